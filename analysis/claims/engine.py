"""The paper's claims against this suite's outputs: a verdict table, torch-free and without HTML.

`analysis/data/paper_claims.json` is the single source of each claim: its text (the paper's figure), the
outputs it is measured on (`metric`, checked present before its rule runs; `reads`, the optional outputs
it also reads), the comparator and tolerances, the pool, the rule text and the report section that
explains it. Each claim's rule is a module of this package that registers it by the claim's key
(analysis.claims.registry); the engine discovers the package's rule modules, looks each key up and runs
it. What a Claim, a Scope and each verdict value mean: analysis.claims.verdict.

A new claim is one rule module and one JSON entry:
  1. `analysis/claims/<family>.py` with `@register("<key>") def rule(spec, tables, metrics_dir) -> Claim`
     (per-scope verdicts through `verdict.claim_verdict` where the paper states several figures);
  2. an entry `"<key>": {...}` in paper_claims.json with id, title, text, metric, comparator, rule, section.
Nothing else names it: the engine imports every module of this folder but its own three, and
`copydecode depgraph` follows that discovery (RULE_PACKAGE) into dvc.yaml's code deps.

`claims()` gives one Claim per JSON entry (in its order, extensions last); a claim whose stage output is
absent is `not run`, never silently dropped. `claims_document` is reports/claims.json (every claim and
scope, machine-readable), which the README and the index read back with `read_claims`.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from dataclasses import asdict, fields, replace
from pathlib import Path

import polars as pl

from analysis.claims.decision import BASES, DECISIONS
from analysis.claims.registry import RULES
from analysis.claims.verdict import (
    NOT_APPLICABLE,
    NOT_RUN,
    PAPER,
    TEXT_FIELDS,
    VERDICTS,
    Claim,
    Scope,
    counts,
    metric_paths,
    paper_claims,
    read_metric,
)
from analysis.errors import MissingOutputError, ParamsError
from analysis.pipeline.commands import STAGES
from analysis.pipeline.io import dvc_stage, dvc_stage_names, stage_outputs
from analysis.layout import METRICS, TABLES
from analysis.pooling import PAPER_CORPORA, PAPER_POOL, POOLED
from analysis.results.numbers import MISSING
from analysis.results.outputs import table

RULE_PACKAGE = "analysis.claims"  # every module here registers a rule, but these (depgraph reads the name)
NOT_RULES = ("engine", "registry", "verdict", "decision")
DOCUMENT_VERSION = 2  # 2: decision scopes, `ci_kind`, a provenance block, the preprint's status
PREPRINT = {"id": "arXiv 2604.18170", "version": "v2", "date": "2026-05-26", "status": "reported withdrawn",
            "reading": "the suite evaluates the mechanism; `reproduced` means agreement with the preprint's figure"}


def rule_modules() -> list[str]:
    """The rule modules of this package, imported (each registers its rule on import)."""
    names = sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.name not in NOT_RULES)
    for name in names:
        importlib.import_module(f"{RULE_PACKAGE}.{name}")
    return names


rule_modules()


def claim_label(spec: dict, key: str) -> str:
    return f"{spec['id']}. {spec['title']}" if spec.get("id") else spec.get("title", key)


def inputs_of(spec: dict) -> tuple[str, ...]:
    """The stage outputs a claim reads: its metric files, then its optional `reads`."""
    files = [f"reports/{mp.file}" for mp in metric_paths(spec)]
    return tuple(dict.fromkeys(files + [f"reports/{r}" for r in spec.get("reads") or []]))


def claims(tables: Path = TABLES, metrics_dir: Path = METRICS, paper_path: Path = PAPER) -> list[Claim]:
    """Each claim of paper_claims.json with ours and a verdict, its rule text, inputs and section."""
    paper = paper_claims(paper_path)
    keys = [k for k in paper if not k.startswith("_")]
    unknown = [k for k in keys if k not in RULES]
    if unknown:
        raise ParamsError(f"{paper_path}: no rule for claim(s) {', '.join(unknown)}; known: {', '.join(RULES)}")
    keys.sort(key=lambda k: bool(paper[k].get("extension")))
    corpora = run_corpora(Path(tables))
    out = []
    for key in keys:
        spec = paper[key]
        if spec.get("beside") in paper:  # an extension set beside a claim reads that claim's figures
            spec = {**spec, "beside_claim": paper[spec["beside"]]}
        label = claim_label(spec, key)
        if needs_paper_corpora(spec) and corpora is not None and not corpora & set(PAPER_CORPORA):
            item = Claim(claim=label, paper=spec.get("text", MISSING), ours=MISSING, verdict=NOT_APPLICABLE,
                         reason=f"this run holds none of the paper's corpora ({', '.join(PAPER_CORPORA)}); "
                                f"its corpora: {', '.join(sorted(corpora))}", method=MISSING)
        else:
            try:
                for mp in metric_paths(spec):  # every output the claim is measured on, present before its rule runs
                    read_metric(mp, Path(tables), Path(metrics_dir))
                item = RULES[key](spec, Path(tables), Path(metrics_dir))
            except MissingOutputError as missing:
                item = Claim(claim=label, paper=spec.get("text", MISSING), ours=MISSING, verdict=NOT_RUN,
                             reason=not_run_reason(spec, Path(tables), Path(metrics_dir), missing), method=MISSING)
        out.append(replace(item, key=key, rule=spec.get("rule", MISSING), inputs=inputs_of(spec),
                           section=spec.get("section", "summary")))
    return out


def writer_of(path: Path) -> str | None:
    """The `copydecode` command whose dvc.yaml stage declares `path` among its outputs (None: no stage does)."""
    commands = {dvc_stage(command): command for command in STAGES}
    for stage in dvc_stage_names():
        if any(Path(path).as_posix().endswith(out) for out in stage_outputs(stage)):
            return commands.get(stage, stage)
    return None


def not_run_reason(spec: dict, tables: Path, metrics_dir: Path, missing: MissingOutputError) -> str:
    """Why a claim is not run, in a reader's words: the outputs this run lacks and the command that writes them, to run
    here (in a one-off run folder, which has no dvc.yaml, that command with --out, never `dvc repro`). An output that
    is there but stale keeps its own message, which names the stage to rerun."""
    paths = dict.fromkeys((tables if mp.root == "tables" else metrics_dir) / f"{mp.name}.{mp.kind}"
                          for mp in metric_paths(spec))
    absent = [path for path in paths if not path.is_file()]
    if not absent:
        return str(missing)
    writers = sorted({writer_of(path) or "?" for path in absent})
    one_off = not Path("dvc.yaml").is_file()
    runs = " and ".join(f"`copydecode {'--out DIR ' if one_off else ''}{w}`" for w in writers)
    return (f"not run in this run: it has no {' or '.join(p.name for p in absent)}; {runs} "
            f"{'writes' if len(writers) == 1 else 'write'} {'them' if len(absent) > 1 else 'it'} "
            + ("(after the stages it reads)" if one_off else "(`dvc repro` runs every stage)"))


def needs_paper_corpora(spec: dict) -> bool:
    """A claim judged over the paper's corpora, or one whose figure counts their programs (claim 5's
    482/482, `needs_paper_corpora` in paper_claims.json): not applicable to a run without them."""
    return spec.get("pool") == PAPER_POOL or bool(spec.get("needs_paper_corpora"))


def run_corpora(tables: Path) -> set[str] | None:
    """The corpora of this run (from the coverage table), or None when the table is absent."""
    try:
        return set(table("coverage", tables)["corpus"].to_list()) - {POOLED}
    except ParamsError:
        return None


def claims_frame(items: list[Claim] | None = None) -> pl.DataFrame:
    """The verdict table: claim, paper, ours, verdict, reason, method (one row per claim)."""
    items = claims() if items is None else items
    return pl.DataFrame([{n: getattr(c, n) for n in TEXT_FIELDS} for c in items], schema={n: pl.String for n in TEXT_FIELDS})


def rules_frame(path: Path = PAPER) -> pl.DataFrame:
    """Each claim's verdict rule, comparator, pool and thresholds, as stated in paper_claims.json."""
    rows = []
    for key, claim in paper_claims(path).items():
        if key.startswith("_"):
            continue
        limits = {k: v for k, v in claim.items()
                  if k in ("tolerance_pp", "rel_tolerance", "share_rel_tolerance", "max_failures")}
        rows.append({"claim": key.replace("_", " "), "rule": claim.get("rule", MISSING),
                     "pool": claim.get("pool", MISSING),
                     "thresholds": ", ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in limits.items()) or MISSING})
    return pl.DataFrame(rows)


# ---------------------------------------------------------------- reports/claims.json


def _plain(value):
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def claims_document(items: list[Claim], provenance: dict | None = None) -> dict:
    """reports/claims.json: every claim and scope with the paper's figure, ours, CI (and what kind of interval it
    is), case count, verdict, reason, rule, section and the stage outputs it read; a decision scope's decision,
    basis and facets (analysis.claims.decision); the verdict counts beside them, and `provenance` (the commit,
    params hash, versions, date and machine of the run, as lm-eval's results JSON carries them) when given."""
    head = {"provenance": provenance} if provenance is not None else {}
    return {"version": DOCUMENT_VERSION, **head, "source": "analysis/data/paper_claims.json, judged by analysis.claims",
            "preprint": PREPRINT, "decisions": list(DECISIONS), "bases": list(BASES),
            "verdicts": list(VERDICTS), "counts": counts(items),
            "claims": [{k: ([{f: _plain(v) for f, v in asdict(s).items()} for s in item.scopes] if k == "scopes"
                            else _plain(v)) for k, v in asdict(item).items()} for item in items]}


def read_claims(path: Path) -> list[Claim]:
    """reports/claims.json back into Claims; an absent or malformed file is a MissingOutputError naming it."""
    path = Path(path)
    if not path.is_file():
        raise MissingOutputError(f"{path} not found; run `dvc repro reports` first")
    try:
        doc = json.loads(path.read_text())
        scope_fields = {f.name for f in fields(Scope)}
        return [Claim(**{**{k: v for k, v in c.items() if k not in ("scopes", "inputs")},
                         "inputs": tuple(c.get("inputs", ())),
                         "scopes": tuple(Scope(**{k: (tuple(v) if isinstance(v, list) else v)
                                                  for k, v in s.items() if k in scope_fields})
                                         for s in c.get("scopes", ()))})
                for c in doc["claims"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise MissingOutputError(f"{path} is not a claims document ({exc}); rerun `dvc repro reports`") from None
