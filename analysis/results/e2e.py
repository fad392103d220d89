"""What the reports show of the end-to-end stage: pooled figures and the frozen `e2e-wide` run.

The e2e headline is pooled over every measured case: per model and method, the sum of AR seconds over
the sum of the method's seconds (each case: its median over repeats), per corpus and over all corpora,
always with its case count. The best single case is never a headline.

`e2e_speedup.csv` (the default run's table) holds per corpus `cases` and `total_seconds` (the method's
summed seconds; the AR row's is the summed AR seconds), so the overall pool is computed from it alone;
a method measured on only some of AR's cases (the PLD k sweep) has no overall pool.

A frozen preset run (`copydecode e2e --preset e2e-wide --out DIR`, then DIR copied to
reports/e2e/frozen/e2e-wide/) holds run.json, metrics.json and its e2e_{speedup,pooled,cases}.csv;
`read_frozen` returns it, None when the folder does not exist ("not yet run"), and refuses by name a
folder that lacks a file or a column.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from analysis.errors import CorpusError
from analysis.layout import E2E_FROZEN, E2E_WIDE
from analysis.pooling import POOLED

BASELINE = "ar"
FROZEN_FILES = ("run.json", "metrics.json", "e2e_speedup.csv", "e2e_pooled.csv", "e2e_cases.csv")
POOLED_COLUMNS = ("model", "pool", "method", "label", "cases", "ar_seconds", "seconds", "speedup_pooled")
CASE_COLUMNS = ("model", "corpus", "case_id", "method", "ar_seconds", "seconds", "tokens", "forwards",
                "tokens_per_forward")
RUN_FIELDS = ("command", "commit", "started", "ended", "seconds")
# the methods a headline sentence names, in this order (the first PLD method of the table joins them)
SENTENCE_METHODS = (("cad_line", "Copy-as-Decode line"), ("cad_token", "token"),
                    ("cad_line_overhead", "line with directive tokens decoded"),
                    ("cad_token_overhead", "token with directive tokens decoded"))


def primary_pld(methods) -> str | None:
    """The PLD method a headline names: the `latest` policy before `earliest`, then the smallest k."""
    plds = [m for m in methods if m.startswith("pld_")]

    def order(method: str) -> tuple:
        policy, _, k = method.removeprefix("pld_").partition("_k")
        return (policy != "latest", int(k) if k.isdigit() else 0, method)

    return min(plds, key=order) if plds else None


def not_yet_run(preset: str = E2E_WIDE) -> str:
    return (f"{preset}: not yet run (copydecode e2e --preset {preset} --out DIR, then copy DIR to "
            f"{E2E_FROZEN}/{preset}/)")


def pooled_from_speedup(speedup: pl.DataFrame) -> pl.DataFrame:
    """POOLED_COLUMNS from an e2e_speedup.csv: each corpus's row, plus the `pooled` row over all
    corpora of a model for every method measured on exactly AR's cases in each corpus."""
    if "total_seconds" not in speedup.columns:
        raise CorpusError("e2e_speedup.csv has no total_seconds column: rerun `copydecode e2e`")
    ar = speedup.filter(pl.col("method") == BASELINE).select(
        "model", "corpus", pl.col("cases").alias("ar_cases"), pl.col("total_seconds").alias("ar_seconds"))
    rows = speedup.join(ar, on=["model", "corpus"], how="left").select(
        "model", pl.col("corpus").alias("pool"), "method", "label", "cases", "ar_cases", "ar_seconds",
        pl.col("total_seconds").alias("seconds"))
    complete = rows.group_by("model", "method").agg(
        ok=(pl.col("cases") == pl.col("ar_cases")).all() & pl.col("ar_cases").is_not_null().all(),
        corpora=pl.len())
    ar_corpora = ar.group_by("model").agg(ar_corpora=pl.len())
    whole = (complete.join(ar_corpora, on="model").filter(pl.col("ok") & (pl.col("corpora") == pl.col("ar_corpora")))
             .select("model", "method"))
    overall = (rows.join(whole, on=["model", "method"]).group_by("model", "method", "label")
               .agg(pl.col("cases").sum(), pl.col("ar_seconds").sum(), pl.col("seconds").sum())
               .with_columns(pool=pl.lit(POOLED)))
    frame = pl.concat([rows.drop("ar_cases"), overall.select(rows.drop("ar_cases").columns)])
    return (frame.with_columns(speedup_pooled=pl.col("ar_seconds") / pl.col("seconds"))
            .select(*POOLED_COLUMNS).sort("model", pl.col("pool") == POOLED, "pool", "method"))


def pooled_sentence(pooled: pl.DataFrame, pool: str = POOLED) -> str:
    """'smollm2-135m, 5 cases (HEvalFix-JS 2, HEvalFix-Py 3): Copy-as-Decode line 9.1x, token 12.0x, ...'
    per model, from POOLED_COLUMNS rows: every figure a ratio of summed times over the named cases."""
    parts = []
    for model in sorted(pooled["model"].unique().to_list()):
        part = pooled.filter(pl.col("model") == model)
        total = part.filter((pl.col("pool") == pool) & (pl.col("method") == BASELINE))
        if total.height == 0:
            continue
        corpora = part.filter((pl.col("pool") != POOLED) & (pl.col("method") == BASELINE)).sort("pool")
        counts = ", ".join(f"{r['pool']} {r['cases']}" for r in corpora.iter_rows(named=True))
        cases = int(total["cases"][0])
        by_method = {r["method"]: r for r in part.filter(pl.col("pool") == pool).iter_rows(named=True)}
        pld = primary_pld(by_method)
        named = [(m, text) for m, text in SENTENCE_METHODS if m in by_method]
        named += [(pld, by_method[pld]["label"])] if pld else []
        figures = ", ".join(f"{text} {by_method[m]['speedup_pooled']:.1f}x" for m, text in named)
        where = f"{cases} {'case' if cases == 1 else 'cases'}" + (f" ({counts})" if pool == POOLED else f" of {pool}")
        parts.append(f"{model}, pooled over {where}: {figures}")
    return "; ".join(parts)


@dataclass(frozen=True)
class FrozenRun:
    """A committed preset run of the e2e stage."""

    preset: str
    run: dict
    metrics: dict
    speedup: pl.DataFrame
    pooled: pl.DataFrame
    cases: pl.DataFrame

    @property
    def case_count(self) -> int:
        return self.cases.filter(pl.col("method") == BASELINE).select("model", "case_id").n_unique()

    def label(self) -> str:
        commit = str(self.run.get("commit") or "?")[:10]
        day = str(self.run.get("ended") or "?")[:10]
        return f"{self.preset} (frozen run, commit {commit}, {day}, {self.case_count} cases{noise_note(self.metrics)})"


def noise_note(metrics: dict) -> str:
    """'; marked NOISY: reasons' when an e2e run's own environment record (metrics "environment") says so, else ''."""
    env = metrics.get("environment") if isinstance(metrics, dict) else None
    if not isinstance(env, dict) or not env.get("noisy"):
        return ""
    return "; marked NOISY: " + "; ".join(env.get("noisy_reasons") or ["no reason recorded"])


def pooled_headline(speedup: pl.DataFrame, frozen_root: Path) -> str:
    """The e2e headline: the default run pooled over all its cases, then the frozen e2e-wide run under
    `frozen_root` (its label, NOISY mark included) or "not yet run"; read by the claims row and the README."""
    text = "default run: " + pooled_sentence(pooled_from_speedup(speedup))
    wide = read_frozen(frozen_root)
    return text + (f"; {wide.label()}: {pooled_sentence(wide.pooled)}" if wide is not None else f"; {not_yet_run()}")


def _require(frame: pl.DataFrame, columns: tuple[str, ...], path: Path) -> pl.DataFrame:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise CorpusError(f"e2e: frozen run file {path} lacks columns {', '.join(missing)}")
    return frame


def read_frozen(root: Path = E2E_FROZEN, preset: str = E2E_WIDE) -> FrozenRun | None:
    """The frozen run reports/e2e/frozen/<preset>/, or None when that folder does not exist."""
    folder = Path(root) / preset
    if not folder.is_dir():
        return None
    missing = [name for name in FROZEN_FILES if not (folder / name).is_file()]
    if missing:
        raise CorpusError(f"e2e: frozen run {folder} lacks {', '.join(missing)}")
    try:
        run, metrics = (json.loads((folder / name).read_text()) for name in ("run.json", "metrics.json"))
    except json.JSONDecodeError as exc:
        raise CorpusError(f"e2e: frozen run {folder} has an unreadable JSON file: {exc}") from exc
    lacking = [k for k in RUN_FIELDS if k not in run]
    if lacking:
        raise CorpusError(f"e2e: frozen run {folder / 'run.json'} lacks {', '.join(lacking)}")

    def csv(name: str, columns: tuple[str, ...]) -> pl.DataFrame:
        path = folder / name
        return _require(pl.read_csv(path, infer_schema_length=None), columns, path)

    return FrozenRun(preset, run, metrics, csv("e2e_speedup.csv", ("model", "corpus", "method", "cases", "speedup_total")),
                     csv("e2e_pooled.csv", POOLED_COLUMNS), csv("e2e_cases.csv", CASE_COLUMNS))


def case_rows(cases: pl.DataFrame) -> pl.DataFrame:
    """One row per case from an e2e_cases.csv: output tokens, AR seconds, the PLD method's and each
    program's seconds (medians over repeats), and PLD's tokens per forward and acceptance histogram
    (`n:count`: forwards that accepted n draft tokens)."""
    keys = ["model", "corpus", "case_id"]
    pld = primary_pld(cases["method"].unique().to_list())
    wanted = [("cad_line", "line program s"), ("cad_token", "token program s")] + ([(pld, "PLD s")] if pld else [])
    base = cases.filter(pl.col("method") == BASELINE).select(
        *keys, *(["gold_tokens"] if "gold_tokens" in cases.columns else []), pl.col("ar_seconds").alias("AR s"))
    for method, name in wanted:
        base = base.join(cases.filter(pl.col("method") == method).select(*keys, pl.col("seconds").alias(name)),
                         on=keys, how="left")
    if pld:
        extra = [pl.col("tokens_per_forward").alias("PLD tokens per forward")]
        if "accept_hist" in cases.columns:
            extra.append(pl.col("accept_hist").alias("PLD accepted per forward (n:count)"))
        base = base.join(cases.filter(pl.col("method") == pld).select(*keys, *extra), on=keys, how="left")
    return base.sort(keys)
