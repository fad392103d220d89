"""What each corpus is like, for the reports: corpus groups, case sizes, coverage and bounds per
corpus (narrow tables, one cell per value with its interval), and the corpus report's headline."""

from __future__ import annotations

from typing import Callable

import polars as pl

from analysis.errors import ParamsError
from analysis.latency.names import FIT_SOURCE, PAPER_SOURCE
from analysis.pooling import (
    BENCHMARK,
    COMMITS_PREFIX,
    FIELD_BENCHMARK,
    GIT_HISTORY,
    POOLED,
    USER_PAIRS,
    corpus_group,
    group_expr,
    pooling_label,
    star,
)
from analysis.results.numbers import fmt_ci, fmt_count, fmt_pct, fmt_x
from analysis.layout import METRICS
from analysis.results.outputs import metrics, pick, pick_framing, pick_view
from analysis.present.pages import pivot_wide
from analysis.text.tokens import load_tokenizer

__all__ = ["BENCHMARK", "COMMITS_PREFIX", "FIELD_BENCHMARK", "GIT_HISTORY", "USER_PAIRS", "corpus_group"]

SIZE_MEASURES = {"source_lines": "source lines", "source_tokens": "source tokens",
                 "changed_lines": "changed lines", "gen_tokens": "gold tokens from gen spans"}


def corpus_cases(cases: pl.DataFrame) -> pl.DataFrame:
    """One row per corpus: its group, language, framings and cases per framing."""
    return (cases.group_by("corpus", "framing", "language").len("cases")
            .group_by("corpus").agg(pl.col("language").unique().sort().str.join(", "),
                                    pl.col("framing").unique().sort().str.join(", ").alias("framings"),
                                    pl.col("cases").max().alias("cases_per_framing"),
                                    pl.col("framing").first())
            .with_columns(group=group_expr()).select("group", "corpus", "language", "framings", "cases_per_framing")
            .sort("group", "corpus"))


def data_checks_table(metrics_dir=METRICS) -> pl.DataFrame:
    """corpora.json's data checks, one row per corpus and framing: its cases and the cases holding each text
    problem (analysis.corpora.checks; the refused ones are 0 in a written run), with the corpus group."""
    checks = metrics("corpora", metrics_dir).get("data_checks")
    if not checks:
        raise ParamsError("reports/metrics/corpora.json has no data_checks; rerun `copydecode corpora`")
    rows = [{"corpus": key.rsplit("/", 1)[0], "framing": key.rsplit("/", 1)[1], **counts}
            for key, counts in checks["cases"].items()]
    return (pl.DataFrame(rows).with_columns(group=group_expr())
            .select("group", "corpus", "framing", "cases", *checks["decisions"]).sort("group", "corpus", "framing"))


def data_decisions(metrics_dir=METRICS) -> pl.DataFrame:
    """Each text problem and its named decision (kept or refused, and how)."""
    decisions = metrics("corpora", metrics_dir).get("data_checks", {}).get("decisions", {})
    return pl.DataFrame({"problem": list(decisions), "decision": list(decisions.values())},
                        schema={"problem": pl.String, "decision": pl.String})


def _line_count(text: str) -> int:
    return len(text.splitlines())


def case_sizes(cases: pl.DataFrame, spans: pl.DataFrame, framing: str = "body", token_counts=None) -> pl.DataFrame:
    """Per case of `framing` (plus the single-framing corpora): source file length in lines and tokens,
    and the edit's size: gold-output lines written by gen spans of the line-level oracle
    (changed_lines) and the gold tokens those gen spans produce (gen_tokens).

    `token_counts(texts) -> list[int]` counts source tokens; default: the suite's tokenizer."""
    chosen = pick_framing(cases, framing)
    if chosen.height == 0:
        raise ParamsError(f"no cases with framing {framing!r}")
    if token_counts is None:
        tokenizer = load_tokenizer()
        token_counts = lambda texts: [len(e.ids) for e in tokenizer.backend.encode_batch(texts, add_special_tokens=False)]
    sources = chosen["source"].to_list()
    sized = chosen.select("case_id", "corpus", "framing").with_columns(
        source_lines=pl.Series([_line_count(t) for t in sources], dtype=pl.Int64),
        source_tokens=pl.Series(list(token_counts(sources)), dtype=pl.Int64))
    gen = (spans.filter((pl.col("level") == "line") & (pl.col("kind") == "gen"))
           .group_by("case_id", "framing").agg(pl.col("n_lines").sum().alias("changed_lines"),
                                               pl.col("n_tokens").sum().alias("gen_tokens")))
    return (sized.join(gen, on=["case_id", "framing"], how="left")
            .with_columns(pl.col("changed_lines", "gen_tokens").fill_null(0))
            .with_columns(group=group_expr()).sort("group", "corpus", "case_id"))


def size_distribution(sizes: pl.DataFrame) -> pl.DataFrame:
    """Per corpus and measure: cases, mean, p10, median, p90, max (long, numeric)."""
    rows = []
    for measure in SIZE_MEASURES:
        rows.append(sizes.group_by("group", "corpus").agg(
            pl.lit(measure).alias("measure"), pl.len().alias("cases"), pl.col(measure).mean().alias("mean"),
            pl.col(measure).quantile(0.1, "nearest").alias("p10"), pl.col(measure).median().alias("median"),
            pl.col(measure).quantile(0.9, "nearest").alias("p90"), pl.col(measure).max().cast(pl.Float64).alias("max")))
    return pl.concat(rows).sort("group", "corpus", "measure")


def size_table(dist: pl.DataFrame) -> pl.DataFrame:
    """The distribution made narrow: one row per corpus, one column per measure, `median [p10, p90]`."""
    cells = dist.with_columns(cell=pl.struct("median", "p10", "p90").map_elements(
        lambda r: f"{fmt_count(r['median'])} [{fmt_count(r['p10'])}, {fmt_count(r['p90'])}]", return_dtype=pl.String),
        measure=pl.col("measure").replace_strict(SIZE_MEASURES))
    wide = pivot_wide(cells.sort("measure"), index=["group", "corpus", "cases"], on="measure", values="cell")
    return wide.select("group", "corpus", "cases", *[m for m in SIZE_MEASURES.values() if m in wide.columns])


def corpus_coverage(cov: pl.DataFrame, framing: str = "body") -> pl.DataFrame:
    """Line and token coverage with CIs per corpus (and the framing's pool), one row per corpus."""
    rows = pick_view(cov, framing)
    if rows.height == 0:
        raise ParamsError(f"coverage.csv has no rows for framing {framing!r}")
    keys = ["corpus", "framing"]
    out = rows.select(*keys, "n_cases").unique(keys)
    for level in ("line", "token"):
        part = rows.filter(pl.col("level") == level).select(
            *keys, *[pl.col(c).alias(f"{level}_{c}") for c in ("coverage", "ci_low", "ci_high")])
        out = out.join(part, on=keys, how="left")
    group = pl.when(pl.col("corpus") == POOLED).then(pl.lit(POOLED)).otherwise(group_expr())
    return (out.with_columns(group=group)
            .select("group", "corpus", "n_cases", *[c for c in out.columns if c.startswith(("line_", "token_"))])
            .sort(pl.col("group") == POOLED, "group", "corpus"))


def bound_cell(frame: pl.DataFrame) -> pl.DataFrame:
    """Add `cell`: the bound and its interval as one string, `3.4x [3.0, 3.9]`."""
    return frame.with_columns(cell=pl.struct("bound", "ci_low", "ci_high").map_elements(
        lambda r: f"{fmt_x(r['bound'])} {fmt_ci(r['ci_low'], r['ci_high'])}", return_dtype=pl.String))


def kernel_label(frame: pl.DataFrame) -> pl.DataFrame:
    """`kernel`: 'paper kernel', 'fitted, <baseline> AR' (this run's profile) or the measured source's
    own name (e.g. h200/qwen2.5-7b/eager): the column a bounds table pivots on, one per kernel."""
    return frame.with_columns(kernel=pl.when(pl.col("kernel_source") == PAPER_SOURCE).then(pl.lit("paper kernel"))
                              .when(pl.col("kernel_source") == FIT_SOURCE)
                              .then(pl.concat_str([pl.lit("fitted, "), pl.col("baseline"), pl.lit(" AR")]))
                              .otherwise(pl.col("kernel_source")))


def corpus_bounds(bounds: pl.DataFrame, framing: str = "body", level: str = "line", variant: str = "ideal") -> pl.DataFrame:
    """Per corpus (and each pooling rule): the bound under every kernel source, one column each."""
    rows = pick(pick_view(bounds, framing), level=level, variant=variant)
    labelled = bound_cell(kernel_label(pooling_label(rows)))
    wide = pivot_wide(labelled, index=["corpus", "n_cases"], on="kernel", values="cell")
    extrapolated = labelled.group_by("corpus").agg(
        pl.col("extrapolated_spans").max().alias(extrapolated_column(level, "any_kernel")))
    return wide.join(extrapolated, on="corpus").sort(pl.col("corpus").str.starts_with(POOLED), "corpus")


def extrapolated_column(level: str, over: str | None = None) -> str:
    """The name of a row's count of spans priced beyond the profiled N at `level`: `extrapolated_spans_line` for
    one kernel, `extrapolated_spans_line_any_kernel` for the most under any kernel of the row (one name,
    `extrapolated_spans_max`, held a line-level max on one page and a line-and-token max on another)."""
    return f"extrapolated_spans_{level}" + (f"_{over}" if over else "")


def bounds_wide(rows: pl.DataFrame) -> pl.DataFrame:
    """One kernel's bounds as a narrow table: a row per corpus (pools last), a column per level and
    variant holding `bound [CI]`, and per level the most extrapolated spans of any cell in the row."""
    cells = bound_cell(pooling_label(rows)).with_columns(
        column=pl.concat_str([pl.col("level"), pl.lit(" "), pl.col("variant")])).sort("level", "variant")
    wide = pivot_wide(cells, index=["corpus", "n_cases"], on="column", values="cell")
    for level in sorted(cells["level"].unique().to_list()):
        extra = (cells.filter(pl.col("level") == level).group_by("corpus")
                 .agg(pl.col("extrapolated_spans").max().alias(extrapolated_column(level))))
        wide = wide.join(extra, on="corpus", how="left")
    return wide.sort(pl.col("corpus").str.starts_with(POOLED), "corpus")


def tokenization_wide(rows: pl.DataFrame) -> pl.DataFrame:
    """bounds_tokenization narrowed: a row per kernel and corpus, a column per level and variant
    holding the bound with gold-tokenization prefill sizes and its change, `3.4x (+0.2%)`."""
    cells = kernel_label(pooling_label(rows)).with_columns(
        column=pl.concat_str([pl.col("level"), pl.lit(" "), pl.col("variant")]),
        cell=pl.struct("bound_gold_prefill", "rel_change").map_elements(
            lambda r: f"{fmt_x(r['bound_gold_prefill'])} ({'+' if (r['rel_change'] or 0) >= 0 else ''}{fmt_pct(r['rel_change'], 2)})",
            return_dtype=pl.String)).sort("level", "variant")
    wide = pivot_wide(cells, index=["kernel", "corpus"], on="column", values="cell")
    return wide.sort("kernel", pl.col("corpus").str.starts_with(POOLED), "corpus")


def tokenization_note(rows: pl.DataFrame, digits: int = 2) -> str | None:
    """One sentence in place of the bounds_tokenization table when no cell of it would show a change at
    `digits` decimals of a percent (rows that all read "(+0.00%)"); None when some change shows."""
    if rows.height == 0:
        return "No bound with gold-tokenization prefill sizes in this selection."
    largest = rows.select(pl.col("rel_change").abs().max()).item()
    if largest is None or round(largest * 100, digits) != 0:
        return None
    where = rows.filter(pl.col("rel_change").abs() == largest).row(0, named=True)
    return (f"With prefill sizes from the gold tokenization, none of the {rows.height} bounds shown changes by "
            f"0.005% or more (largest: {largest:.2e} relative, {where['kernel_source']}, {where['corpus']}, "
            f"{where['level']} {where['variant']}); the table of unchanged rows is left out "
            "(`reports/tables/bounds_tokenization.csv` has every row).")


def _span_text(values: dict[str, float], fmt: Callable[[float], str]) -> str:
    low, high = min(values, key=values.get), max(values, key=values.get)
    if low == high:
        return f"{fmt(values[low])} ({star(low)})"
    return f"{fmt(values[low])} ({star(low)}) to {fmt(values[high])} ({star(high)})"


def _range_only(values: dict[str, float], fmt: Callable[[float], str]) -> str:
    low, high = min(values.values()), max(values.values())
    return fmt(low) if low == high else f"{fmt(low)}-{fmt(high)}"


def _placement(values: dict[str, float], reference: dict[str, float]) -> str:
    """Where `values` (a range over corpora) sit among the `reference` corpora: above which, below which, and
    level with those inside the range; "above/below every benchmark" only when no reference lies inside it."""
    below = sorted(star(k) for k, v in reference.items() if v < min(values.values()))
    above = sorted(star(k) for k, v in reference.items() if v > max(values.values()))
    level = sorted(star(k) for k in reference if star(k) not in below + above)
    if not above and not level:
        return "above every benchmark"
    if not below and not level:
        return "below every benchmark"
    parts = [f"above {' and '.join(below)}" if below else "", f"below {' and '.join(above)}" if above else "",
             f"level with {' and '.join(level)}" if level else ""]
    return ", ".join(part for part in parts if part)


def _paper_bounds(bounds: pl.DataFrame, framing: str, level: str) -> dict[str, float]:
    """Each corpus's ideal bound under the paper's kernel at `level` (per-corpus rows)."""
    paper = pick_framing(bounds, framing).filter((pl.col("kernel_source") == PAPER_SOURCE) & (pl.col("level") == level)
                                                 & (pl.col("variant") == "ideal") & (pl.col("pooling") == "corpus"))
    return dict(zip(paper["corpus"], paper["bound"]))


def _against_benchmarks(who: str, values: dict[str, float], bench: dict[str, float], bound: dict[str, float],
                        level: str, note: str = "") -> str:
    """`who` reach X-Y coverage: placed among the paper's benchmarks; and their bound under the paper's kernel."""
    text = (f"{who} ({', '.join(sorted(values))}{note}) reach {_range_only(values, fmt_pct)} {level}-level coverage: "
            f"{_placement(values, bench)} (benchmarks span {_range_only(bench, fmt_pct)}).")
    mine, theirs = {k: bound[k] for k in values if k in bound}, {k: bound[k] for k in bench if k in bound}
    if mine and theirs:
        text += (f" With the paper's kernel their bound is {_range_only(mine, fmt_x)}: {_placement(mine, theirs)} "
                 f"(benchmarks span {_range_only(theirs, fmt_x)}).")
    return text


def real_vs_benchmarks(cov: pl.DataFrame, bounds: pl.DataFrame, framing: str = "body", level: str = "line") -> str:
    """The corpus report's headline: how the real edits (CommitEdits, a user's pairs), and the field's benchmarks
    (CanItEdit, EditEval) where the run holds them, compare with the paper's benchmarks in coverage and in the
    bound under the paper's kernel, computed from the tables."""
    covs = corpus_coverage(cov, framing).filter(pl.col("group") != POOLED)
    by_group = {g: dict(zip(rows["corpus"], rows[f"{level}_coverage"])) for (g,), rows in covs.group_by("group")}
    real = {**by_group.get(GIT_HISTORY, {}), **by_group.get(USER_PAIRS, {})}
    bench, field = by_group.get(BENCHMARK, {}), by_group.get(FIELD_BENCHMARK, {})
    bound = _paper_bounds(bounds, framing, level)
    if not real:
        text = "No real-edit corpus (CommitEdits or your own pairs) is in this run; add one under corpora in params.yaml."
    elif not bench:
        text = f"Real edits only in this run: {level}-level coverage {_span_text(real, fmt_pct)}."
    else:
        text = _against_benchmarks("Real edits", real, bench, bound, level)
    if field and bench:
        text += " " + _against_benchmarks("The field's benchmarks", field, bench, bound, level,
                                          note="; not in the paper's pool")
    return text


def optimal_table(optimal: pl.DataFrame, framing: str = "body") -> pl.DataFrame:
    """optimal.csv made narrow for reading: per kernel, level and corpus (pools last), the bound with
    directive tokens decoded under the coverage-maximising oracle and under the cost-optimal one, with
    their CIs, coverage and the gain."""
    rows = kernel_label(pooling_label(pick_view(optimal, framing)))
    cell = lambda prefix: pl.struct(f"{prefix}_bound", f"{prefix}_ci_low", f"{prefix}_ci_high").map_elements(  # noqa: E731
        lambda r: f"{fmt_x(r[f'{prefix}_bound'])} {fmt_ci(r[f'{prefix}_ci_low'], r[f'{prefix}_ci_high'])}",
        return_dtype=pl.String)
    return (rows.with_columns(cell("covmax").alias("coverage-max oracle"), cell("optimal").alias("cost-optimal oracle"))
            .select("kernel", "level", "corpus", "n_cases", "covmax_coverage", "coverage-max oracle",
                    "optimal_coverage", "cost-optimal oracle", "floor_gain")
            .sort("kernel", "level", pl.col("corpus").str.starts_with(POOLED), "corpus"))
