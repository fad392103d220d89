"""Pooling: which rows a pooled figure is taken over, named once.

The framing rule. A corpus with one framing only (ProbeEdit-S's "unit", CommitEdits' "file", a user's
pairs) joins every framing's pool: "pooled / body" is the HEvalFix body cases plus every single-framing
corpus, the set the paper pools. `framing_filter` is that predicate, written once; `pool_rows`,
`framing_view`, `paper_view` and `pooled_groups` are built on it.

The pools. A pooled row pools either the paper's three corpora (PAPER_POOL: HEvalFix-Py, HEvalFix-JS and
the ProbeEdit-S stand-in, 482 cases; the pool set beside the paper's pooled figures) or every corpus of
the run (ALL_POOL); a table's `pool` column says which, POOL_LABELS names each where it is shown.
`paper_cases` selects the paper pool's per-case rows (the bounds stage bootstraps over them);
`paper_pool(rows, weight)` pools per-corpus rows over the paper's corpora, weighted by `weight` (the case
count for a share such as EM). It is the one function that builds a paper pool of per-corpus rows
(perturb, the headline, the claims and the perturbation view use it).

The pooling rules (a table's `pooling` column): the ratio of the summed costs over the pooled cases, or
the mean of the per-corpus ratios; per-corpus rows have PER_CORPUS.

Corpus groups: benchmark (the paper's corpora and their stand-in), the field's benchmarks (CanItEdit,
EditEval: published edit benchmarks the default run reads through the dataset field mapping), git history
(CommitEdits) or a user's pairs, by `group_expr` (one rule; `corpus_group` applies it to one corpus). The
field's benchmarks are not the paper's corpora: they join the pool of every corpus of the run (ALL_POOL),
never the paper's pool.
"""

from __future__ import annotations

from typing import Iterable

import polars as pl

POOLED = "pooled"  # the corpus of a pooled row

# ---------------------------------------------------------------- the paper's corpora
# The corpora the paper pools (its 482 cases); ProbeEdit-S stands in for the unpublished ProbeEdit.
PAPER_CORPORA = ("HEvalFix-Py", "HEvalFix-JS", "ProbeEdit-S")
# The paper's corpus names (as paper_claims.json spells them) -> this suite's corpus.
PAPER_NAMES = {"ProbeEdit": "ProbeEdit-S", "HEvalFix-Py": "HEvalFix-Py", "HEvalFix-JS": "HEvalFix-JS"}
STAND_IN = {"ProbeEdit-S": "ProbeEdit-S*"}  # this suite's stand-ins, starred where shown


def star(corpus: str) -> str:
    """A corpus name as shown: a stand-in gets its star (ProbeEdit-S*)."""
    return STAND_IN.get(corpus, corpus)


def is_stand_in(corpus: str) -> bool:
    return corpus in STAND_IN


# ---------------------------------------------------------------- the framing rule
# Framings of corpora that have one framing only; each joins every multi-framing pool.
SINGLE_FRAMINGS = ("unit", "file", "pair")


def is_single_framing(framing: str) -> bool:
    return framing in SINGLE_FRAMINGS


def framing_filter(framing: str) -> pl.Expr:
    """The framing predicate: rows of `framing` and of every single-framing corpus."""
    return pl.col("framing").is_in([framing, *SINGLE_FRAMINGS])


def pool_framings(framings: Iterable[str]) -> list[str]:
    """The framings that get a pooled row: every multi-framing one, or the single ones if alone."""
    framings = set(framings)
    multi = sorted(f for f in framings if not is_single_framing(f))
    return multi or sorted(framings)


def pool_rows(frame: pl.DataFrame, framing: str) -> pl.DataFrame:
    """The rows of `frame` that make up the pool at `framing`."""
    return frame.filter(framing_filter(framing))


def framing_view(framing: str) -> pl.Expr:
    """Rows a report shows for `framing`: its per-corpus rows, the single-framing corpora, and only
    that framing's pooled rows (a single-framing corpus's own framing has no pool of its own here)."""
    return framing_filter(framing) & ((pl.col("corpus") != POOLED) | (pl.col("framing") == framing))


def pooled_groups(cases: pl.DataFrame) -> list[tuple[str, str, pl.DataFrame]]:
    """(corpus, framing, rows) groups of per-case rows: each corpus and framing, plus a pooled group per
    pool framing (`pool_rows`: ProbeEdit-S joins the HEvalFix body pool, the set the paper pools)."""
    groups = [(corpus, framing, rows)
              for (corpus, framing), rows in cases.group_by("corpus", "framing", maintain_order=True)]
    for framing in pool_framings(cases["framing"]):
        groups.append((POOLED, framing, pool_rows(cases, framing)))
    return groups


# ---------------------------------------------------------------- pools and pooling rules
# Which corpora a pooled row pools (a table's `pool` column), and their one wording.
PAPER_POOL, ALL_POOL = "paper", "all"
POOLS = (PAPER_POOL, ALL_POOL)
POOL_LABELS = {PAPER_POOL: "the paper's three corpora", ALL_POOL: "every corpus of this run"}
# Pooling rules of a pooled row (a table's `pooling` column).
PER_CORPUS, RATIO_OF_SUMS, MEAN_OF_CORPORA = "corpus", "ratio_of_sums", "mean_of_corpora"
POOLINGS = (RATIO_OF_SUMS, MEAN_OF_CORPORA)
POOLING_LABELS = {RATIO_OF_SUMS: "pooled (ratio of sums)", MEAN_OF_CORPORA: "pooled (mean of corpora)"}


def pool_label(pool: str) -> str:
    """'pooled over the paper's three corpora' / 'pooled over every corpus of this run'."""
    return f"pooled over {POOL_LABELS[pool]}"


def pooling_label(frame: pl.DataFrame) -> pl.DataFrame:
    """Name pooled rows by their pooling rule, so both rules can sit side by side on one axis."""
    if "pooling" not in frame.columns:
        return frame
    return frame.with_columns(
        corpus=pl.when(pl.col("corpus") == POOLED)
        .then(pl.col("pooling").replace_strict(POOLING_LABELS, default=pl.lit(POOLED)))
        .otherwise(pl.col("corpus")))


def paper_corpora() -> pl.Expr:
    """Rows of the corpora the paper reports on (ProbeEdit-S standing in for ProbeEdit)."""
    return pl.col("corpus").is_in(PAPER_CORPORA)


def paper_view(frame: pl.DataFrame, framing: str = "body") -> pl.DataFrame:
    """The per-corpus rows a paper claim compares: `framing` plus the single-framing corpora, the
    paper's corpora only, no pooled rows."""
    return frame.filter(framing_filter(framing) & paper_corpora() & (pl.col("corpus") != POOLED))


def paper_cases(cases: pl.DataFrame) -> pl.DataFrame:
    """The per-case rows of the paper's pool: empty when the run holds none of the paper's corpora,
    and also when it holds nothing else (then the pool of every corpus is the paper's pool)."""
    mine = cases.filter(paper_corpora())
    return mine if mine.height and mine.height < cases.height else cases.clear()


def paper_pool(rows: pl.DataFrame, weight: str, values: Iterable[str], by: Iterable[str] = ()) -> pl.DataFrame:
    """Per-corpus rows pooled over the paper's three corpora: per pool framing (`pool_framings` of the
    per-corpus rows) and per `by`, each of `values` as the `weight`-weighted mean of the per-corpus
    values (for a share weighted by case count, the share over the pooled cases), `weight` summed and
    `corpora` counted; corpus = pooled, pool = PAPER_POOL. Pooled input rows are ignored."""
    values, by = list(values), list(by)
    per_corpus = rows.filter(pl.col("corpus") != POOLED)
    mine = per_corpus.filter(paper_corpora())
    w = pl.col(weight)
    parts = []
    for framing in pool_framings(per_corpus["framing"]):
        members = pool_rows(mine, framing)
        if members.height == 0:
            continue
        pooled = (members.group_by(by, maintain_order=True) if by else members.group_by(pl.lit(1).alias("_all")))
        parts.append(pooled.agg(*[((pl.col(v) * w).sum() / w.sum()).alias(v) for v in values],
                                w.sum().alias(weight), pl.len().cast(pl.Int64).alias("corpora"))
                     .drop("_all", strict=False)
                     .with_columns(corpus=pl.lit(POOLED), framing=pl.lit(framing), pool=pl.lit(PAPER_POOL)))
    columns = [*by, *values, weight, "corpora", "corpus", "framing", "pool"]
    if not parts:
        schema = {**{c: rows.schema[c] for c in (*by, *values, weight)}, "corpora": pl.Int64, "corpus": pl.String,
                  "framing": pl.String, "pool": pl.String}
        return pl.DataFrame(schema=schema)
    return pl.concat(parts).select(columns)


# ---------------------------------------------------------------- corpus groups
BENCHMARK, FIELD_BENCHMARK, GIT_HISTORY, USER_PAIRS = "benchmark", "field benchmark", "git history", "your pairs"
COMMITS_PREFIX = "CommitEdits-"
# The field's published edit benchmarks by the corpus names params.yaml gives them (corpora.datasets): CanItEdit
# (Cassano et al. 2024; the corpus EfficientEdit reports its speedups on) and EditEval (InstructCoder's test set).
FIELD_BENCHMARKS = ("CanItEdit", "EditEval")


def group_expr() -> pl.Expr:
    """The corpus group of each row (over its corpus and framing columns): the one rule."""
    return (pl.when(pl.col("corpus").str.starts_with(COMMITS_PREFIX)).then(pl.lit(GIT_HISTORY))
            .when(pl.col("corpus").is_in(FIELD_BENCHMARKS)).then(pl.lit(FIELD_BENCHMARK))
            .when(pl.col("framing") == "pair").then(pl.lit(USER_PAIRS)).otherwise(pl.lit(BENCHMARK)))


def corpus_group(corpus: str, framing: str) -> str:
    """benchmark (the paper's corpora and their stand-in), field benchmark (CanItEdit, EditEval), git history
    (CommitEdits) or your pairs."""
    return pl.DataFrame({"corpus": [corpus], "framing": [framing]}).select(group_expr().alias("group"))["group"][0]
