"""The serving report's views: the serving stage's tables read back and cut for the page (no HTML here;
the page blocks are analysis.present.pages')."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from analysis.errors import MissingOutputError
from analysis.layout import METRICS, STEP_COST, TABLES
from analysis.results.numbers import fmt_pct, fmt_x
from analysis.pipeline.io import read_json_document
from analysis.results.outputs import metrics, optional_table, table



def serving_table(budget: str | int = "default", tables: Path = TABLES) -> pl.DataFrame:
    """reports/tables/serving.csv at one token budget; `default`: each source at its headline budget (the row
    serving_claim.csv marks `headline`: vLLM's default on that source's device), else the smallest."""
    frame = table("serving", tables, infer_all_rows=True)
    budgets = sorted(set(frame["max_num_batched_tokens"].to_list()))
    if budget in (None, "default"):
        claim = optional_table("serving_claim", tables)
        if claim is not None and "headline" in claim.columns:
            marked = claim.filter(pl.col("headline")).select("kernel_source", "max_num_batched_tokens").unique()
            return frame.join(marked, on=["kernel_source", "max_num_batched_tokens"], how="semi")
        return frame.filter(pl.col("max_num_batched_tokens") == budgets[0])
    if int(budget) not in budgets:
        raise MissingOutputError(f"serving.csv has no budget {budget!r}; budgets: {budgets}")
    return frame.filter(pl.col("max_num_batched_tokens") == int(budget))


def budget_text(frame: pl.DataFrame) -> str:
    """The token budget(s) a cut of serving.csv shows: one, or each source's."""
    pairs = frame.select("kernel_source", "max_num_batched_tokens").unique().sort("kernel_source")
    budgets = sorted(set(pairs["max_num_batched_tokens"].to_list()))
    if len(budgets) == 1:
        return f"budget {budgets[0]:,} tokens"
    return "budget per source: " + ", ".join(f"{r['kernel_source']} {r['max_num_batched_tokens']:,}"
                                             for r in pairs.iter_rows(named=True))


def step_cost_document(path: Path = STEP_COST) -> dict:
    if not Path(path).is_file():
        raise MissingOutputError(f"{path} not found; run `copydecode kernels profile --batched`")
    return read_json_document(path, "copydecode kernels profile --batched", MissingOutputError)


def assumptions(document: dict) -> pl.DataFrame:
    """One row per source and stated assumption (what a batch-1 extrapolation takes for granted)."""
    rows = [{"kernel_source": m["source"], "basis": m["basis"], "assumption": a}
            for m in document.get("models", []) for a in m.get("assumptions", [])]
    return pl.DataFrame(rows) if rows else pl.DataFrame({"kernel_source": [], "basis": [], "assumption": []})


def headline_concurrencies(claim: pl.DataFrame) -> tuple[int, ...]:
    """The concurrencies the run's claims row holds (params serving.headline_concurrency, as the stage wrote
    them: `vs_ar_c{C}` columns), in order."""
    return tuple(sorted(int(m[1]) for c in claim.columns if (m := re.fullmatch(r"vs_ar_c(\d+)", c))))


def concurrency_words(concurrencies: tuple[int, ...]) -> str:
    """`1, 16 and 128`."""
    words = [str(c) for c in concurrencies]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def headline(claim: pl.DataFrame, concurrencies: tuple[int, ...] | None = None) -> pl.DataFrame:
    """The gains table at the headline concurrencies (default: those the run holds), one row per source, budget and
    Copy-as-Decode method: the gains, the band over both budgets and both prices past the fitted steps, and whether
    the point is compute-bound."""
    keep = ["kernel_source", "basis", "method", "max_num_batched_tokens", "headline"]
    for c in headline_concurrencies(claim) if concurrencies is None else concurrencies:
        keep += [x for x in (f"vs_ar_c{c}", f"vs_best_rival_c{c}", f"best_rival_c{c}", f"vs_best_rival_c{c}_band_low",
                             f"vs_best_rival_c{c}_band_high", f"compute_bound_c{c}", f"requests_c{c}") if x in claim.columns]
    return claim.select([k for k in keep if k in claim.columns], "below_vs_ar_from_c", "below_vs_best_rival_from_c")


@dataclass(frozen=True)
class Shape:
    """A rival's gain over AR at the lowest and highest concurrency of one source: the published shape says it falls."""

    kernel_source: str
    method: str
    low: float
    high: float
    top: int

    def sentence(self) -> str:
        trend = "falls" if self.high < self.low else "does not fall"
        return (f"{self.kernel_source}: {self.method} {fmt_x(self.low)} over AR at C=1, {fmt_x(self.high)} at C={self.top} "
                f"({trend})")


def rival_shapes(frame: pl.DataFrame) -> list[Shape]:
    """Each rival's gain over AR from the lowest to the highest concurrency, per source (closed loop)."""
    closed = frame.filter((pl.col("workload") == "closed") & (pl.col("role") == "rival"))
    out = []
    for (source, method), rows in closed.sort("kernel_source", "method", "load").group_by(
            "kernel_source", "method", maintain_order=True):
        rows = rows.sort("load")
        out.append(Shape(source, method, float(rows["speedup_vs_ar"][0]), float(rows["speedup_vs_ar"][-1]),
                         int(rows["load"][-1])))
    return out


def shape_sentence(frame: pl.DataFrame) -> str:
    """Each rival's gain from the lowest to the highest concurrency, or that the run has no rival."""
    shapes = rival_shapes(frame)
    return "; ".join(x.sentence() for x in shapes) if shapes else "no rival in this run"


def ms(column: str) -> pl.Expr:
    """A seconds column in milliseconds, renamed (`latency_s_p50` -> `latency_ms_p50`), as vLLM's benchmarks print."""
    return (pl.col(column) * 1000).alias(column.replace("_s_", "_ms_").replace("_s", "_ms") if column.endswith("_s")
                                         else column.replace("_s_", "_ms_"))


def _decision_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """AR, Copy-as-Decode and the best rival of each load point (the rows a reader compares); the rest are in the
    CSV."""
    rivals = frame.filter(pl.col("role") != "rival").select(*POINT_KEYS, rival=pl.col("best_rival")).drop_nulls().unique()
    best = frame.join(rivals, on=POINT_KEYS, how="left").filter(pl.col("method") == pl.col("rival"))
    return pl.concat([frame.filter(pl.col("role").is_in(["baseline", "copy"])), best.drop("rival")], how="diagonal_relaxed")


POINT_KEYS = ["kernel_source", "max_num_batched_tokens", "workload", "load"]
TIMES = ("latency_s_p50", "latency_s_p90", "latency_s_p99", "ttft_s_p50", "tpot_s_p50")


def open_loop(frame: pl.DataFrame) -> pl.DataFrame:
    """Open-loop rows of AR, Copy-as-Decode and the best rival: offered rate, achieved throughput, latency (ms) and
    goodput."""
    rows = _decision_rows(frame.filter(pl.col("workload") == "open"))
    return (rows.select("kernel_source", "qps_fraction", pl.col("load").alias("offered_requests_per_s"), "method",
                        "requests_per_s", "output_tokens_per_s", ms("latency_s_p50"), ms("latency_s_p99"),
                        ms("ttft_s_p50"), ms("tpot_s_p50"), "goodput_requests_per_s", "slo_attained", "speedup_vs_ar")
            .sort("kernel_source", "qps_fraction", "method"))


def closed_loop(frame: pl.DataFrame, concurrencies: tuple[int, ...]) -> pl.DataFrame:
    """Closed-loop rows of AR, Copy-as-Decode and the best rival at the headline concurrencies, times in ms. No
    goodput: the page defines its SLO with the open loop, whose table carries it (serving.csv has every column)."""
    rows = _decision_rows(frame.filter((pl.col("workload") == "closed")
                                       & pl.col("load").is_in([float(c) for c in concurrencies])))
    return (rows.select("kernel_source", pl.col("load").cast(pl.Int64).alias("concurrency"), "method", "best_member",
                        "output_tokens_per_s", *(ms(c) for c in TIMES), "speedup_vs_ar",
                        "speedup_vs_best_rival", "best_rival", "mean_batch", "extrapolated_step_share")
            .sort("kernel_source", "concurrency", "method"))


def decision_pivot(scopes) -> pl.DataFrame:
    """One row per kernel source, one column per headline concurrency: Copy-as-Decode's best variant over the best
    rival there, its paired interval and the decision (the claims' decision scopes, analysis.claims.serving)."""
    rows: dict[str, dict[str, str]] = {}
    for s in scopes:
        if not s.detail or s.detail.get("concurrency") is None:
            continue
        row = rows.setdefault(s.detail["kernel_source"], {"kernel source": s.detail["kernel_source"],
                                                          "steps": s.detail.get("basis_text", s.basis)})
        row[f"C = {s.detail['concurrency']}"] = (f"{s.value:.2f}x [{s.ci[0]:.2f}, {s.ci[1]:.2f}] {s.decision} "
                                                 f"(vs {s.detail['rival_label']})")
    return pl.DataFrame(list(rows.values()))


@dataclass(frozen=True)
class Replay:
    """The replay check read back: its summary, the metrics and a reading of where it misses."""

    summary: pl.DataFrame | None
    metrics: dict | None

    @property
    def run(self) -> bool:
        return self.summary is not None and self.metrics is not None

    def headline(self) -> str:
        if not self.run:
            return "not run in this run (`copydecode serving replay`)"
        m = self.metrics
        mixes = m.get("per_mix") or {}
        per_mix = "; ".join(f"{mix} {fmt_pct(v['mdape'])} ({v['steps']} steps)" for mix, v in mixes.items())
        target = (f"every step mix under {fmt_pct(m['target'])}" if m.get("target_met")
                  else f"not every step mix under {fmt_pct(m['target'])}")
        batched = f"{fmt_pct(m['batched_share'])} of them batched (B > 1)" if "batched_share" in m else ""
        return (f"median absolute percentage error {fmt_pct(m['mdape'])} over {m['steps']} replayed steps"
                f"{', ' + batched if batched else ''}; per step mix: {per_mix or 'not recorded'} ({target})"
                f"{'; NOISY: ' + '; '.join(m['noisy_reasons']) if m.get('noisy') else ''}")

    def misses(self) -> list[str]:
        """The step mixes whose error is past the target, worst first, with their signed bias."""
        if not self.run:
            return []
        rows = self.summary.filter((pl.col("method") == "all") & (pl.col("mix") != "all")
                                   & pl.col("concurrency").is_null() & (pl.col("mdape") > self.metrics["target"]))
        return [f"{r['mix']}: {fmt_pct(r['mdape'])} ({'over' if r['median_signed_error'] > 0 else 'under'}"
                f"-predicted, median {fmt_pct(r['median_signed_error'])}, {r['steps']} steps)"
                for r in rows.sort("mdape", descending=True).iter_rows(named=True)]


def replay(tables: Path = TABLES, metrics_dir: Path = METRICS) -> Replay:
    summary = optional_table("serving_replay_summary", tables)
    path = Path(metrics_dir) / "serving_replay.json"
    return Replay(summary, metrics("serving_replay", metrics_dir) if path.is_file() else None)
