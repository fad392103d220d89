"""What the reports show of the end-to-end stage: its pooled figures and the frozen `e2e-wide` run.

The e2e headline reads `e2e_pooled.csv` (kernels_profile.e2e.summary): per model, method and pool
(each corpus, `HEvalFix` over the HEvalFix corpora, `pooled` over every case) the sum of AR seconds
over the sum of the method's seconds (each case: its lower median over repeats), with its case count
and case-bootstrap CI, and the same including each method's prompt prefill. A sentence leads with
Copy-as-Decode with directive tokens decoded (what a deployment pays), then the rivals (prompt lookup at
its standard policy and its best measured k, suffix decoding), then the ideal programs labelled as
their upper bound; it names the HEvalFix pool beside the all-case pool, so a pool dominated by long
files never stands alone. The best single case is never a headline.

A frozen preset run (`copydecode e2e --preset e2e-wide --out DIR`, then DIR copied to
reports/e2e/frozen/e2e-wide/) holds run.json, metrics.json and its e2e_{speedup,pooled,cases}.csv;
`read_frozen` returns it, None when the folder does not exist ("not yet run"), refuses by name a folder
that lacks a file, and marks `stale` (with what it lacks) a run written before this code's columns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from analysis.errors import CorpusError
from analysis.layout import E2E_FROZEN, E2E_WIDE
from analysis.pipeline.runrecord import RUN_JSON, lacking
from analysis.pooling import POOLED
from analysis.rivals.families.ar import AR
from analysis.rivals.families.pld import STANDARD_POLICY
from analysis.rivals.methods import canonical, headline_order, method_label, parse_method

HEVALFIX_POOL = "HEvalFix"  # kernels_profile.e2e.summary.HEVALFIX_POOL
FROZEN_FILES = (RUN_JSON, "metrics.json", "e2e_speedup.csv", "e2e_pooled.csv", "e2e_cases.csv")
POOLED_COLUMNS = ("model", "pool", "method", "label", "cases", "ar_seconds", "seconds", "speedup_pooled", "ci_low",
                  "ci_high", "prompt_seconds", "speedup_with_prompt", "predicted_pooled", "abs_error")
SPEEDUP_COLUMNS = ("model", "corpus", "method", "cases", "speedup_total", "speedup_with_prompt", "abs_error_total")
CASE_COLUMNS = ("model", "corpus", "case_id", "method", "ar_seconds", "seconds", "speedup", "prompt_seconds",
                "tokens", "forwards", "tokens_per_forward", "accept_hist")


def not_yet_run(preset: str = E2E_WIDE) -> str:
    return (f"{preset}: not yet run (copydecode e2e --preset {preset} --out DIR, then copy DIR to "
            f"{E2E_FROZEN}/{preset}/)")


def best_standard_pld(rows: pl.DataFrame) -> str | None:
    """Prompt lookup as a headline names it: the standard policy (earliest) at its best measured k in
    these rows (the highest pooled figure; ties: the smaller k); else the other policy the same way."""
    plds = [(parse_method(r["method"]), r["speedup_pooled"]) for r in rows.iter_rows(named=True)
            if parse_method(r["method"]).family == "pld"]
    if not plds:
        return None
    standard = [p for p in plds if p[0].policy == STANDARD_POLICY] or plds
    return max(standard, key=lambda p: (p[1], -p[0].k))[0].name


def _figure(row: dict) -> str:
    ci = (f" [{row['ci_low']:.1f}, {row['ci_high']:.1f}]" if row.get("ci_low") is not None
          and row["ci_low"] == row["ci_low"] else "")
    return f"{row['speedup_pooled']:.1f}x{ci}"


def pool_sentence(rows: pl.DataFrame) -> str:
    """One pool's figures for one model, in headline order: directives decoded, the rivals, the ideal
    programs as upper bounds, then the same leading figures including the prompt's prefill."""
    by = {r["method"]: r for r in rows.iter_rows(named=True)}
    pld = best_standard_pld(rows)
    parts, with_prompt = [], []
    for name in headline_order(by):
        m = parse_method(name)
        if m.role == "baseline" or (m.family == "pld" and name != pld):
            continue
        if m.role == "copy":
            text = f"Copy-as-Decode {m.level} with directives decoded {_figure(by[name])}"
        elif m.family == "pld":
            ks = sorted(parse_method(n).k for n in by if parse_method(n).family == "pld" and parse_method(n).policy == m.policy)
            text = f"PLD ({m.policy}) at its best k={m.k} of {'/'.join(map(str, ks))} {_figure(by[name])}"
        elif m.is_bound:
            text = f"upper bound (directives free) {m.level} {_figure(by[name])}"
        else:
            text = f"{m.short} {_figure(by[name])}"
        parts.append(text)
        if not m.is_bound:
            with_prompt.append(f"{m.short} {by[name]['speedup_with_prompt']:.1f}x")
    return ", ".join(parts) + ("; including the prompt's prefill: " + ", ".join(with_prompt) if with_prompt else "")


def pooled_sentence(pooled: pl.DataFrame) -> str:
    """Per model: the HEvalFix pool, then every case pooled (said once when the two are the same cases)."""
    out = []
    for model in sorted(pooled["model"].unique().to_list()):
        part = pooled.filter(pl.col("model") == model)
        ar = {r["pool"]: r["cases"] for r in part.filter(pl.col("method") == AR).iter_rows(named=True)}
        if POOLED not in ar:
            continue
        corpora = ", ".join(f"{p} {n}" for p, n in sorted(ar.items()) if p not in (POOLED, HEVALFIX_POOL))
        texts = []
        if ar.get(HEVALFIX_POOL) not in (None, ar[POOLED]):
            texts.append(f"HEvalFix ({ar[HEVALFIX_POOL]} cases): "
                         + pool_sentence(part.filter(pl.col("pool") == HEVALFIX_POOL)))
        texts.append(f"all {ar[POOLED]} cases ({corpora}): " + pool_sentence(part.filter(pl.col("pool") == POOLED)))
        out.append(f"{model}, pooled over " + "; ".join(texts))
    return "; ".join(out)


@dataclass(frozen=True)
class FrozenRun:
    """A committed preset run of the e2e stage; `stale` names what an older run's tables lack."""

    preset: str
    run: dict
    metrics: dict
    speedup: pl.DataFrame
    pooled: pl.DataFrame
    cases: pl.DataFrame
    stale: str | None = None

    @property
    def case_count(self) -> int:
        return self.cases.filter(pl.col("method") == AR).select("model", "case_id").n_unique()

    def label(self) -> str:
        commit = str(self.run.get("commit") or "?")[:10]
        day = str(self.run.get("ended") or "?")[:10]
        return f"{self.preset} (frozen run, commit {commit}, {day}, {self.case_count} cases{noise_note(self.metrics)})"

    def stale_text(self) -> str:
        return (f"{self.label()}: written before this code's e2e tables (it lacks {self.stale}); not shown, rerun "
                f"`{self.run.get('command') or 'copydecode e2e --preset ' + self.preset}`")


def noise_note(metrics: dict) -> str:
    """'; marked NOISY: reasons' when an e2e run's own environment record (metrics "environment") says so, else ''."""
    env = metrics.get("environment") if isinstance(metrics, dict) else None
    if not isinstance(env, dict) or not env.get("noisy"):
        return ""
    return "; marked NOISY: " + "; ".join(env.get("noisy_reasons") or ["no reason recorded"])


def stale_columns(pooled: pl.DataFrame) -> list[str]:
    """The POOLED_COLUMNS an e2e_pooled.csv lacks (one written before this code's columns)."""
    return [c for c in POOLED_COLUMNS if c not in pooled.columns]


def stale_text(missing: list[str], where: str = "reports/tables/e2e_pooled.csv") -> str:
    return f"{where} was written before this code's e2e tables (it lacks {', '.join(missing)}); rerun `copydecode e2e`"


def pooled_headline(pooled: pl.DataFrame, frozen_root: Path, default_note: str = "") -> str:
    """The e2e headline, read by the claims row and the README: the frozen e2e-wide run under `frozen_root`
    first when it is there and current (its label, NOISY mark included: the wider case sample leads), then the
    default run's pools (`default_note` after them, e.g. its own NOISY mark); a stale frozen run is named
    after the default run, a missing one is "not yet run"."""
    missing = stale_columns(pooled)
    default = "default run: " + (stale_text(missing) if missing else pooled_sentence(pooled)) + default_note
    wide = read_frozen(frozen_root)
    if wide is None:
        return f"{default}; {not_yet_run()}"
    if wide.stale:
        return f"{default}; {wide.stale_text()}"
    return f"{wide.label()}: {pooled_sentence(wide.pooled)}; {default}"


def read_frozen(root: Path = E2E_FROZEN, preset: str = E2E_WIDE) -> FrozenRun | None:
    """The frozen run reports/e2e/frozen/<preset>/, or None when that folder does not exist."""
    folder = Path(root) / preset
    if not folder.is_dir():
        return None
    missing = [name for name in FROZEN_FILES if not (folder / name).is_file()]
    if missing:
        raise CorpusError(f"e2e: frozen run {folder} lacks {', '.join(missing)}")
    try:
        run, metrics = (json.loads((folder / name).read_text()) for name in (RUN_JSON, "metrics.json"))
    except json.JSONDecodeError as exc:
        raise CorpusError(f"e2e: frozen run {folder} has an unreadable JSON file: {exc}") from exc
    if lacking(run):
        raise CorpusError(f"e2e: frozen run {folder / RUN_JSON} lacks {', '.join(lacking(run))}")
    frames = {name: respelled(pl.read_csv(folder / f"{name}.csv", infer_schema_length=None))
              for name in ("e2e_speedup", "e2e_pooled", "e2e_cases")}
    wanted = {"e2e_speedup": SPEEDUP_COLUMNS, "e2e_pooled": POOLED_COLUMNS, "e2e_cases": CASE_COLUMNS}
    stale = [f"{name}.csv {c}" for name, columns in wanted.items() for c in columns if c not in frames[name].columns]
    return FrozenRun(preset, run, metrics, frames["e2e_speedup"], frames["e2e_pooled"], frames["e2e_cases"],
                     ", ".join(stale) if stale else None)


def respelled(frame: pl.DataFrame) -> pl.DataFrame:
    """An e2e table with its method names and labels in this vocabulary (a frozen run or a table written with
    the old e2e names, `cad_line_overhead`, is read and shown in today's spelling)."""
    frame = canonical(frame)
    if "label" in frame.columns and "method" in frame.columns:
        frame = frame.with_columns(label=pl.col("method").map_elements(method_label, return_dtype=pl.String))
    return frame


def distinct_pools(pooled: pl.DataFrame) -> pl.DataFrame:
    """e2e_pooled rows without a pool that holds the same cases as a narrower one, for every model: the HEvalFix
    pool when its cases are one HEvalFix corpus's, `pooled` when its cases are the HEvalFix pool's or one corpus's
    (a pool is a superset of what it pools, so equal case counts mean equal case sets). A chart then draws no two
    panels of the same cases."""
    ar = pooled.filter(pl.col("method") == AR)
    redundant = []
    for pool, narrower in ((HEVALFIX_POOL, lambda p: p.startswith(HEVALFIX_POOL + "-")),
                           (POOLED, lambda p: p != POOLED)):
        same = []
        for model in ar["model"].unique().to_list():
            counts = {r["pool"]: r["cases"] for r in ar.filter(pl.col("model") == model).iter_rows(named=True)}
            same.append(pool in counts and any(narrower(p) and p not in redundant and n == counts[pool]
                                               for p, n in counts.items()))
        if same and all(same):
            redundant.append(pool)
    return pooled.filter(~pl.col("pool").is_in(redundant))


def case_rows(cases: pl.DataFrame) -> pl.DataFrame:
    """One row per case from an e2e_cases.csv: output tokens, AR seconds and its prompt's prefill, every
    method's speedup in headline order, and the largest-k prompt lookup's tokens per forward (its acceptance
    histogram is drawn from `acceptance_rows`, never shown as `n:count` text)."""
    keys = ["model", "corpus", "case_id"]
    names = headline_order(m for m in cases["method"].unique().to_list() if m != AR)
    base = cases.filter(pl.col("method") == AR).select(
        *keys, "gold_tokens", pl.col("ar_seconds").alias("AR s"), pl.col("prompt_seconds").alias("AR prompt s"))
    for name in names:
        base = base.join(cases.filter(pl.col("method") == name).select(*keys, pl.col("speedup").alias(f"{parse_method(name).short} (x)")),
                         on=keys, how="left")
    speculative = [n for n in names if parse_method(n).speculative]
    if speculative:
        largest = max(speculative, key=lambda n: (parse_method(n).family == "pld", parse_method(n).k or 0))
        short = parse_method(largest).short
        base = base.join(cases.filter(pl.col("method") == largest).select(
            *keys, pl.col("tokens_per_forward").alias(f"{short}: tokens per forward")), on=keys, how="left")
    return base.sort(keys)


def accepted_bucket(n: int) -> tuple[int, str]:
    """(order, label) of a count of accepted draft tokens: 0, 1, then powers of two (2-3, 4-7, ...)."""
    if n < 2:
        return n, str(n)
    low = 1 << (n.bit_length() - 1)
    return low.bit_length(), f"{low}-{2 * low - 1}"


def acceptance_rows(cases: pl.DataFrame) -> pl.DataFrame:
    """The speculative methods' forwards by draft tokens accepted, summed over the cases of an e2e_cases.csv (its
    `accept_hist`, `n:count` per case): per model and method, each bucket's forwards and their share."""
    rows: dict[tuple, int] = {}
    for r in cases.filter(pl.col("accept_hist").is_not_null()).iter_rows(named=True):
        for item in str(r["accept_hist"]).split():
            accepted, count = (int(x) for x in item.split(":"))
            order, label = accepted_bucket(accepted)
            key = (r["model"], r["method"], order, label)
            rows[key] = rows.get(key, 0) + count
    frame = pl.DataFrame([{"model": m, "method": name, "label": parse_method(name).short, "bucket_order": o,
                           "accepted": label, "forwards": n} for (m, name, o, label), n in sorted(rows.items())],
                         schema={"model": pl.Utf8, "method": pl.Utf8, "label": pl.Utf8, "bucket_order": pl.Int64,
                                 "accepted": pl.Utf8, "forwards": pl.Int64})
    return frame.with_columns(share=pl.col("forwards") / pl.col("forwards").sum().over("model", "method"))


def leading(pooled: pl.DataFrame, model: str, pool: str) -> list[tuple[str, dict]]:
    """The figures a page's tiles lead with, for one model and pool: (method name, its row) for Copy-as-Decode
    with directives decoded per level, the best standard PLD, suffix decoding, then the ideal line program."""
    rows = pooled.filter((pl.col("model") == model) & (pl.col("pool") == pool))
    by = {r["method"]: r for r in rows.iter_rows(named=True)}
    pld = best_standard_pld(rows)
    chosen = [n for n in headline_order(by) if n != AR and (parse_method(n).family != "pld" or n == pld)
              and not (parse_method(n).is_bound and parse_method(n).level != "line")]
    return [(n, by[n]) for n in chosen]


def _tile_value(row: dict) -> str:
    ci = f" [{row['ci_low']:.2f}-{row['ci_high']:.2f}]" if row.get("ci_low") == row.get("ci_low") and row.get("ci_low") is not None else ""
    return f"{row['speedup_pooled']:.2f}x{ci}, {row['cases']} {'case' if row['cases'] == 1 else 'cases'}"


def lead_tiles(pooled: pl.DataFrame, pool: str) -> list[tuple[str, str]]:
    """A page's lead tiles for one pool, per model: (label, figure) in headline order, each the pooled
    speedup with its CI and case count, then the leading method's figure including the prompt."""
    tiles = []
    for model in sorted(pooled["model"].unique().to_list()):
        chosen = leading(pooled, model, pool)
        for name, row in chosen:
            m = parse_method(name)
            tiles.append((f"{m.short} ({model}, {pool})", _tile_value(row)))
        if chosen:
            name, row = chosen[0]
            tiles.append((f"{parse_method(name).short}, including the prompt's prefill ({model}, {pool})",
                          f"{row['speedup_with_prompt']:.2f}x"))
    return tiles


def page_tiles(pooled: pl.DataFrame, pool: str, wide: FrozenRun | None) -> list[tuple[str, str]]:
    """The e2e page's tiles: for the all-case pool, the HEvalFix pool first where it holds other cases
    (a long-file pool never stands alone), then the pool asked for; then the frozen run's state."""
    ar = pooled.filter(pl.col("method") == AR)
    cases = dict(ar.group_by("pool").agg(pl.col("cases").max()).iter_rows())
    pools = ([HEVALFIX_POOL] if pool == POOLED and HEVALFIX_POOL in cases and cases[HEVALFIX_POOL] != cases.get(POOLED)
             else []) + [pool]
    tiles = [t for p in pools for t in lead_tiles(pooled, p)]
    state = "not yet run" if wide is None else "stale: rerun" if wide.stale else f"{wide.case_count} cases, below"
    return tiles + [("e2e-wide (frozen run)", state)]


def chart_methods(names) -> list[tuple[str, str]]:
    """(name, short label) of every method but AR, in headline order: what the e2e chart draws."""
    return [(n, parse_method(n).short) for n in headline_order(set(names)) if n != AR]
