import json

import numpy as np
import polars as pl
import pytest
from fixtures import ROOT

from analysis.bounds import (
    COST_COLUMNS,
    CaseCost,
    CostSettings,
    SpanOp,
    bounds_table,
    case_cost,
    case_costs,
    kernel_bounds,
    repeat_costs,
    span_costs,
)
from analysis.errors import ParamsError
from analysis.latency.model import LatencyModel, ModelKey, QuadraticAR, QuadraticPrefill, paper_model, paper_speedup

KEY = ModelKey("m", "random", "float32", "cpu", "eager")


def quadratic(a=1e-3, b=0.0, p=(2e-3, 1e-5, 0.0, 0.0), ns=(1.0, 512.0), contexts=(0.0, 4096.0), repeats=()):
    return LatencyModel(KEY, "quadratic", QuadraticAR(a, b), QuadraticPrefill(*p), ns, contexts, repeats)


# t_step = 1 ms at any context; T_prefill(n) = 2 ms + 0.01 ms * n
KERNEL = quadratic()
def priced(mode: str, extrapolate: bool = False, context: int | None = None, step_cost: str = "steady", **kw) -> CostSettings:
    """CostSettings with params.yaml's decode pricing (steady, steady_max_n 8) unless a test names another:
    CostSettings itself has no default that changes a result."""
    return CostSettings(mode, extrapolate, context, step_cost=step_cost, steady_max_n=8, prefill_past_n="marginal", **kw)


FIXED0 = priced("fixed", context=0)


def spans(rows, prompt=None):
    frame = pl.DataFrame(rows, orient="row", schema={
        "case_id": pl.String, "corpus": pl.String, "framing": pl.String, "level": pl.String,
        "kind": pl.String, "n_tokens": pl.Int64, "n_tokens_src": pl.Int64, "directive_tokens": pl.Int64,
    })
    frame = frame.with_columns(op_index=pl.int_range(pl.len()).over("case_id", "framing", "level").cast(pl.Int64))
    if prompt is not None:
        frame = frame.with_columns(prompt_tokens=pl.col("case_id").replace_strict(prompt, return_dtype=pl.Int64))
    return frame


def test_bound_matches_a_hand_computed_histogram():
    # one case: copy 100 tokens, gen 10 tokens, copy 50 tokens; directives 7 + 2 + 7 tokens
    table = spans([
        ("A/0", "A", "body", "line", "copy", 100, 100, 7),
        ("A/0", "A", "body", "line", "gen", 10, 0, 2),
        ("A/0", "A", "body", "line", "copy", 50, 50, 7),
    ])
    costs = case_costs(table, KERNEL, FIXED0).row(0, named=True)
    g, t = 160, 1e-3
    prefill = (2e-3 + 100e-5) + (2e-3 + 50e-5)
    assert costs["regen"] == pytest.approx(g * t)
    assert costs["program_ideal"] == pytest.approx(prefill + 10 * t)
    # each copy's tag decodes 6 of its 7 tokens: the last rides with the copy's prefill (one more token each)
    assert costs["program_overhead"] == pytest.approx(prefill + 10 * t + 14 * t + 2 * 1e-5)
    bounds = bounds_table(case_costs(table, KERNEL, FIXED0), resamples=0, seed=0, ci=0.95)
    ideal = bounds.filter((pl.col("corpus") == "A") & (pl.col("variant") == "ideal"))["bound"][0]
    assert ideal == pytest.approx(0.160 / (prefill + 0.010))
    overhead = bounds.filter((pl.col("corpus") == "A") & (pl.col("variant") == "overhead"))["bound"][0]
    assert overhead == pytest.approx(0.160 / (prefill + 0.024 + 2e-5))


def test_running_context_costs_each_op_where_it_happens():
    # t_step(c) = 1 ms + 1 us * c; T_prefill(n, c) = 2 ms + 10 us * n + 0.1 us * n * c
    model = quadratic(a=1e-3, b=1e-6, p=(2e-3, 1e-5, 1e-7, 0.0))
    table = spans([
        ("A/0", "A", "body", "line", "copy", 10, 12, 7),
        ("A/0", "A", "body", "line", "gen", 5, 0, 2),
        ("A/0", "A", "body", "line", "copy", 20, 20, 7),
    ], prompt={"A/0": 100})
    row = case_costs(table, model, priced("running")).row(0, named=True)
    step = lambda c: 1e-3 + 1e-6 * c
    pre = lambda n, c: 2e-3 + 1e-5 * n + 1e-7 * n * c
    # contexts: op 0 at 100, op 1 at 110, op 2 at 115
    assert row["regen"] == pytest.approx(sum(step(100 + j) for j in range(35)))
    assert row["program_ideal"] == pytest.approx(pre(12, 100) + sum(step(110 + j) for j in range(5)) + pre(20, 115))
    # a copy's tag's last token goes into its prefill: 6 steps and one more prefilled token per copy
    assert row["directive_seconds"] == pytest.approx(6 * step(100) + 2 * step(110) + 6 * step(115)
                                                     + pre(13, 100) - pre(12, 100) + pre(21, 115) - pre(20, 115))
    # the fixed mode at the prompt length differs: the later ops see a longer cache
    fixed = case_costs(table, model, priced("fixed", context=100)).row(0, named=True)
    assert fixed["program_ideal"] < row["program_ideal"] and fixed["regen"] < row["regen"]


def test_running_mode_needs_the_prompt_column():
    table = spans([("A/0", "A", "body", "line", "gen", 5, 0, 2)])
    with pytest.raises(ParamsError, match="prompt_tokens"):
        case_costs(table, KERNEL, priced("running"))


def test_all_gen_program_has_bound_one_and_empty_copies_are_free():
    table = spans([
        ("A/0", "A", "body", "line", "gen", 40, 0, 2),
        ("A/0", "A", "body", "line", "copy", 0, 0, 7),  # a blank line glued to the previous token
    ])
    costs = case_costs(table, KERNEL, FIXED0).row(0, named=True)
    assert costs["program_ideal"] == pytest.approx(costs["regen"])
    assert costs["extrapolated_spans"] == 0


def test_corpus_bound_is_a_ratio_of_sums_with_an_interval():
    rows = []
    for k in range(20):
        rows += [(f"A/{k}", "A", "body", "line", "copy", 10 * (k + 1), 10 * (k + 1), 7),
                 (f"A/{k}", "A", "body", "line", "gen", 5, 0, 2)]
    costs = case_costs(spans(rows), KERNEL, FIXED0)
    table = bounds_table(costs, resamples=500, seed=1, ci=0.95).filter(pl.col("corpus") == "A")
    ideal = table.filter(pl.col("variant") == "ideal").row(0, named=True)
    assert ideal["bound"] == pytest.approx(costs["regen"].sum() / costs["program_ideal"].sum())
    assert ideal["ci_low"] < ideal["bound"] < ideal["ci_high"]
    assert ideal["pooling"] == "corpus" and ideal["kernel_repeats"] == 0
    over = table.filter(pl.col("variant") == "overhead").row(0, named=True)
    assert over["bound"] < ideal["bound"]


def test_spans_beyond_the_profiled_range_are_refused_or_counted():
    model = quadratic(ns=(1.0, 512.0), contexts=(256.0,))
    table = spans([
        ("A/0", "A", "body", "line", "copy", 2761, 2761, 7),
        ("A/0", "A", "body", "line", "gen", 3, 0, 2),
        ("A/1", "A", "body", "line", "copy", 40, 40, 7),
    ])
    with pytest.raises(ParamsError, match=r"case A/0 .* op 0: T_prefill\(N=2761, c=256\).*N in \[1, 512\]"):
        case_costs(table, model, priced("fixed", context=256))
    with pytest.raises(ParamsError, match=r"t_step\(c=300\)"):
        case_costs(table, model, priced("fixed", context=300))
    costs = case_costs(table, model, priced("fixed", True, context=256))
    assert costs["extrapolated_spans"].to_list() == [1, 0]
    row = bounds_table(costs, 0, 0, 0.95).filter((pl.col("corpus") == "A") & (pl.col("variant") == "ideal")).row(0, named=True)
    assert row["extrapolated_spans"] == 1 and row["extrapolated_regen"] == 0


def two_corpora():
    rows = []
    for k in range(30):  # A: large, copy-heavy
        rows += [(f"A/{k}", "A", "body", "line", "copy", 200 + k, 200 + k, 7), (f"A/{k}", "A", "body", "line", "gen", 5, 0, 2)]
    for k in range(10):  # B: small, gen-heavy
        rows += [(f"B/{k}", "B", "body", "line", "copy", 5, 5, 7), (f"B/{k}", "B", "body", "line", "gen", 20 + k, 0, 2)]
    for k in range(10):  # P: the single-framing corpus joins the pool
        rows += [(f"P/{k}", "P", "unit", "line", "copy", 50, 50, 7), (f"P/{k}", "P", "unit", "line", "gen", 10, 0, 2)]
    return spans(rows)


def test_pooled_row_reports_ratio_of_sums_and_mean_of_corpora():
    costs = case_costs(two_corpora(), KERNEL, FIXED0)
    table = bounds_table(costs, 400, 0, 0.9).filter((pl.col("variant") == "ideal") & (pl.col("framing").is_in(["body", "unit"])))
    per = {r["corpus"]: r["bound"] for r in table.filter(pl.col("pooling") == "corpus").iter_rows(named=True)}
    pooled = {r["pooling"]: r for r in table.filter(pl.col("corpus") == "pooled").iter_rows(named=True)}
    assert set(pooled) == {"ratio_of_sums", "mean_of_corpora"}
    assert pooled["mean_of_corpora"]["bound"] == pytest.approx(np.mean([per["A"], per["B"], per["P"]]))
    assert pooled["ratio_of_sums"]["bound"] == pytest.approx(costs["regen"].sum() / costs["program_ideal"].sum())
    assert pooled["ratio_of_sums"]["bound"] > pooled["mean_of_corpora"]["bound"]  # A dominates the token count
    mean = pooled["mean_of_corpora"]
    assert mean["ci_low"] < mean["bound"] < mean["ci_high"]
    strat = bounds_table(costs, 400, 0, 0.9, pooled_bootstrap="corpus").filter(
        (pl.col("variant") == "ideal") & (pl.col("corpus") == "pooled") & (pl.col("pooling") == "ratio_of_sums")
        & (pl.col("framing") == "body")).row(0, named=True)
    flat = pooled["ratio_of_sums"]
    assert strat["bound"] == flat["bound"]
    assert strat["ci_high"] - strat["ci_low"] < flat["ci_high"] - flat["ci_low"]  # corpus mix no longer varies


def test_kernel_repeats_enter_the_interval():
    rep = [(QuadraticAR(1e-3, 0.0), QuadraticPrefill(2e-3 * s, 1e-5 * s, 0.0, 0.0)) for s in (0.6, 1.0, 1.5)]
    model = quadratic(repeats=tuple(rep))
    costs = case_costs(two_corpora(), model, FIXED0)
    per_repeat = repeat_costs(two_corpora(), model, FIXED0)
    assert len(per_repeat) == 3
    plain = bounds_table(costs, 400, 0, 0.9).filter((pl.col("corpus") == "A") & (pl.col("variant") == "ideal")).row(0, named=True)
    wide = bounds_table(costs, 400, 0, 0.9, repeat_costs=per_repeat).filter(
        (pl.col("corpus") == "A") & (pl.col("variant") == "ideal")).row(0, named=True)
    assert wide["bound"] == plain["bound"] and wide["kernel_repeats"] == 3
    assert wide["ci_high"] - wide["ci_low"] > 2 * (plain["ci_high"] - plain["ci_low"])
    with pytest.raises(ParamsError, match="same cases"):
        bounds_table(costs, 10, 0, 0.9, repeat_costs=[per_repeat[0].head(3)])


def test_single_program_prediction_uses_the_same_formula():
    ops = [SpanOp("copy", 100, 100, 7), SpanOp("gen", 10, 0, 2), SpanOp("copy", 50, 50, 7)]
    cost = case_cost(ops, KERNEL, FIXED0)
    assert isinstance(cost, CaseCost)
    prefill = (2e-3 + 100e-5) + (2e-3 + 50e-5)
    assert cost.bound("ideal") == pytest.approx(0.160 / (prefill + 0.010))
    assert cost.bound("overhead") == pytest.approx(0.160 / (prefill + 0.024 + 2e-5))
    running = case_cost(ops, quadratic(b=1e-6), priced("running"), prompt_tokens=500)
    assert running.regen == pytest.approx(sum(1e-3 + 1e-6 * (500 + j) for j in range(160)))


def test_paper_kernel_bound_is_dimensionless():
    ops = [SpanOp("copy", 64, 64, 7)]
    cost = case_cost(ops, paper_model(), priced("fixed", context=0))
    assert cost.regen == 64 and cost.bound("ideal") == pytest.approx(float(paper_speedup(64)))
    with pytest.raises(ParamsError, match="N=4"):
        case_cost([SpanOp("copy", 4, 4, 7)], paper_model(), priced("fixed", context=0))


# ---------------------------------------------------------------- fixed mode: golden table + invariants

GOLDEN = json.loads((ROOT / "tests" / "golden" / "bounds_fixed_mode.json").read_text())
V1_FIT = (0.2121617831383648, 1.2314954048217156e-05,  # the committed v1 fit's terms
          (0.28399324899311784, 2.4336253849739926e-05, 6.290296656702239e-05, 3.699276270152451e-17))


def random_spans(seed):
    rng = np.random.default_rng(seed)
    rows = []
    for corpus, framings in (("HEvalFix-Py", ("body", "decl")), ("HEvalFix-JS", ("body", "decl")), ("ProbeEdit-S", ("unit",))):
        for k in range(int(rng.integers(3, 12))):
            for framing in framings:
                for level in ("line", "token"):
                    for _ in range(int(rng.integers(1, 8))):
                        kind = "copy" if rng.random() < 0.6 else "gen"
                        n = int(rng.integers(0, 700))
                        rows.append((f"{corpus}/{k}", corpus, framing, level, kind, n,
                                     n + int(rng.integers(-2, 3)) if kind == "copy" and n > 2 else (n if kind == "copy" else 0),
                                     int(rng.integers(2, 12))))
    return spans(rows)


def _golden_frame(key: str, **tag) -> pl.DataFrame:
    rows = [{k: v for k, v in r.items() if k not in tag} for r in GOLDEN[key]
            if all(r[k] == v for k, v in tag.items())]
    return pl.DataFrame(rows, infer_schema_length=None)


@pytest.mark.parametrize("prefill_tokens", ["n_tokens_src", "n_tokens"])
def test_fixed_mode_gives_the_golden_tables(prefill_tokens):
    """tests/golden/bounds_fixed_mode.json pins costs and bounds (made when the v1 `case_costs` and
    `bounds_table` were checked equal to these, bit for bit); the invariants below hold on their own."""
    a, b, p = V1_FIT
    model = quadratic(a, b, p, ns=(1.0, 512.0), contexts=(256.0,))
    table = random_spans(0)
    costs = case_costs(table, model, priced("fixed", True, context=256, prefill_tokens=prefill_tokens))
    assert costs.columns == COST_COLUMNS
    if prefill_tokens == "n_tokens_src":
        golden = _golden_frame("costs", seed=0, prefill_tokens=prefill_tokens)
        assert costs.select(golden.columns).equals(golden.cast(costs.select(golden.columns).schema))
    result = bounds_table(costs, 200, 0, 0.95)
    golden = _golden_frame("bounds", seed=0, prefill_tokens=prefill_tokens)
    assert result.columns == golden.columns
    assert result.equals(golden.cast(result.schema))
    # invariants: regeneration at the fixed context, bounds as ratios of sums inside their intervals
    t = a + b * 256
    assert costs["regen"].to_list() == pytest.approx((costs["gold_tokens"] * t).to_list(), rel=1e-12)
    assert (costs["program_overhead"] >= costs["program_ideal"]).all()
    for row in result.filter(pl.col("pooling") == "corpus").iter_rows(named=True):
        rows = costs.filter((pl.col("level") == row["level"]) & (pl.col("corpus") == row["corpus"])
                            & (pl.col("framing") == row["framing"]))
        assert row["n_cases"] == rows.height
        assert row["bound"] == pytest.approx(rows["regen"].sum() / rows[f"program_{row['variant']}"].sum(), rel=1e-12)
        assert row["ci_low"] <= row["bound"] * (1 + 1e-12) and row["bound"] <= row["ci_high"] * (1 + 1e-12)
    wide = result.pivot("variant", index=["level", "corpus", "framing", "pooling"], values="bound")
    assert (wide["overhead"] <= wide["ideal"]).all()  # directives only add time


def test_every_kernel_source_is_pooled_over_the_paper_corpora_and_over_all():
    """bounds_pools: per kernel source, the paper's three corpora (pool = paper, judged) beside every corpus
    (pool = all); before, only bounds_paper_pool held the 482-case pool and nothing named both (issue 28.5)."""
    from analysis.stages.bounds import pools_for

    rows = [(f"{c}/{i}", c, f, "line", kind, n, n, 1)
            for c, f in (("HEvalFix-Py", "body"), ("ProbeEdit-S", "unit"), ("CommitEdits-x", "file"))
            for i in range(3) for kind, n in (("copy", 40 + i), ("gen", 5 + (c == "CommitEdits-x") * 20))]
    priced = kernel_bounds(spans(rows), KERNEL, FIXED0, 0, 0, 0.95, kernel_repeats=False, pooled_bootstrap="corpus")
    costs = priced.costs
    table = priced.table.with_columns(kernel_source=pl.lit("k"), baseline=pl.lit("eager"))
    paper = priced.paper.with_columns(kernel_source=pl.lit("k"), baseline=pl.lit("eager"))
    pools = pools_for(table, paper).filter(pl.col("variant") == "ideal")
    assert sorted(set(pools["pool"])) == ["all", "paper"]
    by_pool = {r["pool"]: r for r in pools.filter(pl.col("pooling") == "ratio_of_sums").iter_rows(named=True)}
    assert by_pool["paper"]["n_cases"] == 6 and by_pool["all"]["n_cases"] == 9
    paper_only = costs.filter(pl.col("corpus") != "CommitEdits-x")
    expected = paper_only["regen"].sum() / paper_only["program_ideal"].sum()
    assert by_pool["paper"]["bound"] == pytest.approx(expected)
    assert by_pool["all"]["bound"] == pytest.approx(costs["regen"].sum() / costs["program_ideal"].sum())
    # a run over the paper's corpora alone: the two pools are the same cases, both named
    alone = bounds_table(paper_only, 0, 0, 0.95).with_columns(kernel_source=pl.lit("k"), baseline=pl.lit("eager"))
    both = pools_for(alone, pl.DataFrame()).filter((pl.col("variant") == "ideal") & (pl.col("pooling") == "ratio_of_sums"))
    assert both.sort("pool")["bound"].to_list() == pytest.approx([expected, expected])


# ---------------------------------------------------------------- decode cost: first-step overhead + steady step (issue 28.4)

def first_step_model(o=3e-3, s=2e-3, prefill=5e-3, ns=(1.0, 2.0, 4.0, 8.0, 16.0), contexts=(0.0, 4096.0)):
    """An interpolated model whose AR runs cost o + N * s at every context (the first step o + s, every
    later one s) and whose prefill costs `prefill` for any N: the H200 graph loop's shape."""
    from analysis.latency.model import GridCurve

    ar = GridCurve(ns, contexts, tuple(tuple(o + n * s for n in ns) for _ in contexts))
    pre = GridCurve(ns, contexts, tuple(tuple(prefill for _ in ns) for _ in contexts))
    return LatencyModel(KEY, "interp", ar, pre, (ns[0], ns[-1]), contexts)


# copy 10, gen 4, copy 10, gen 6, copy 5 (two generated spans); directives 7 per copy, 2 per gen
TWO_SPANS = [
    ("A/0", "A", "body", "line", "copy", 10, 10, 7),
    ("A/0", "A", "body", "line", "gen", 4, 0, 2),
    ("A/0", "A", "body", "line", "copy", 10, 10, 7),
    ("A/0", "A", "body", "line", "gen", 6, 0, 2),
    ("A/0", "A", "body", "line", "copy", 5, 5, 7),
]


def test_step_costs_split_the_first_step_from_the_steady_step():
    model = first_step_model()
    first, steady = model.step_costs(np.array([0.0, 100.0, 4096.0]), steady_max_n=8)
    assert first.seconds == pytest.approx([3e-3] * 3) and steady.seconds == pytest.approx([2e-3] * 3)
    assert float(model.t_step(100.0).seconds) == pytest.approx(5e-3)  # T_ar(1) = overhead + steady
    with pytest.raises(ParamsError, match="steady_max_n"):
        model.step_costs(0.0, steady_max_n=1)


@pytest.mark.parametrize("mode", ["fixed", "running"])
def test_steady_pricing_charges_the_first_step_once_per_decode_run(mode):
    """Hand-computed: regeneration is one run (3 + 35 x 2 ms); the program pays three prefills, the
    overhead once per generated span (2 x 3 ms) and 10 steady steps; with directives the first copy's
    directive opens one more run (+3 ms) and 22 directive tokens cost 2 ms each (each copy's tag decodes 6 of
    its 7 tokens: the last rides with the prefill, whose price does not move here). v1 priced every token
    at the first step (5 ms): 175 / 65 instead of 73 / 41."""
    settings = priced("fixed", context=0) if mode == "fixed" else priced("running")
    table = spans(TWO_SPANS, prompt={"A/0": 100} if mode == "running" else None)
    row = case_costs(table, first_step_model(), settings).row(0, named=True)
    assert row["regen"] == pytest.approx(3e-3 + 35 * 2e-3)
    assert row["program_ideal"] == pytest.approx(3 * 5e-3 + 2 * 3e-3 + 10 * 2e-3)
    assert row["program_overhead"] == pytest.approx(row["program_ideal"] + 3e-3 + 22 * 2e-3)
    assert row["regen"] / row["program_ideal"] == pytest.approx(73 / 41)
    old = case_costs(table, first_step_model(), priced(mode, context=0, step_cost="first_step")
                     ).row(0, named=True)
    assert (old["regen"], old["program_ideal"]) == pytest.approx((35 * 5e-3, 3 * 5e-3 + 10 * 5e-3))


def test_two_copies_in_a_row_are_two_decode_runs_with_directives():
    table = spans([("A/0", "A", "body", "line", "copy", 10, 10, 7),
                   ("A/0", "A", "body", "line", "copy", 10, 10, 7),
                   ("A/0", "A", "body", "line", "gen", 3, 0, 2),
                   ("A/0", "A", "body", "line", "gen", 3, 0, 2)])
    row = case_costs(table, first_step_model(), priced("fixed", context=0)).row(0, named=True)
    # ideal: one generated run (the two gen ops follow each other); overhead: each copy's directive opens a run
    assert row["program_ideal"] == pytest.approx(2 * 5e-3 + 3e-3 + 6 * 2e-3)
    assert row["directive_seconds"] == pytest.approx(2 * 3e-3 + 16 * 2e-3)  # 6 + 6 tag tokens, 2 + 2 gen tags


def test_a_parametric_model_has_no_first_step_term():
    model = quadratic(a=1e-3, b=1e-6)
    table = spans(TWO_SPANS, prompt={"A/0": 100})
    steady = case_costs(table, model, priced("running"))
    v1 = case_costs(table, model, priced("running", step_cost="first_step"))
    assert steady.equals(v1)


def test_steady_pricing_needs_its_window():
    with pytest.raises(ParamsError, match="steady_max_n"):
        CostSettings("fixed", False, 0, step_cost="steady", steady_max_n=1, prefill_past_n="marginal").validate()
    with pytest.raises(ParamsError, match="step_cost"):
        priced("fixed", context=0, step_cost="last").validate()


def test_h200_graph_loop_pays_its_first_step_once_per_run():
    """The evidence for the split, from the committed raw per-step data: in every H200 static_compiled
    run the first step is the slow one and every later segment is flat; the split recovers it."""
    from analysis.latency.tables import ar_step_segments
    from analysis.latency.fit import FitOptions, fit_latency

    raw = pl.read_parquet(ROOT / "reports/kernels/frozen/h200/gpu-compiled.parquet")
    segments = ar_step_segments(raw)
    for key, run in segments.group_by("model", "context", "repeat"):
        first = run.filter(pl.col("to_step") == 1)["ms_per_step"][0]
        later = run.filter(pl.col("from_step") >= 1)["ms_per_step"]
        assert later.max() / later.min() < 1.01, key
        assert first > 1.15 * later.max(), key
    model = next(m for m in fit_latency(raw, FitOptions("interp"))
                 if (m.key.model, m.key.baseline) == ("qwen2.5-1.5b", "static_compiled"))
    first, steady = model.step_costs(256.0, steady_max_n=8)
    assert float(steady.seconds) == pytest.approx(2.446e-3, rel=0.01)
    assert float(first.seconds) == pytest.approx(3.763e-3 - 2.446e-3, rel=0.02)


def test_fixed_mode_is_running_mode_with_a_constant_context():
    """One priced-ops path: with a step and a prefill that do not depend on c, the fixed context and the
    running one price every op alike; with a context-dependent model only the contexts differ."""
    table = spans(TWO_SPANS, prompt={"A/0": 100})
    flat = first_step_model()
    fixed, running = (case_costs(table, flat, priced(mode, context=100)) for mode in ("fixed", "running"))
    for column in ("regen", "program_ideal", "program_overhead"):
        assert fixed[column].to_list() == pytest.approx(running[column].to_list(), rel=1e-12)
    ops = span_costs(table, quadratic(b=1e-6), priced("fixed", context=100))
    assert ops["context"].to_list() == [100] * 5
    assert span_costs(table, quadratic(b=1e-6), priced("running"))["context"].to_list() == [100, 110, 114, 124, 130]


def test_one_refusal_names_an_op_or_the_regeneration():
    model = quadratic(ns=(1.0, 512.0), contexts=(0.0, 120.0))
    # the ops stay inside c <= 120, but regenerating 30 tokens from c = 100 runs past it
    table = spans([("A/0", "A", "body", "line", "copy", 30, 30, 0)], prompt={"A/0": 100})
    with pytest.raises(ParamsError, match=r"case A/0 \(body, line\) op 0: regenerating 30 tokens runs t_step\(c=100..129\)"):
        case_costs(table, model, priced("running"))
    table = spans([("A/0", "A", "body", "line", "copy", 5, 5, 0), ("A/0", "A", "body", "line", "gen", 30, 0, 2)],
                  prompt={"A/0": 100})
    with pytest.raises(ParamsError, match=r"op 1: t_step\(c=105..134\)"):
        case_costs(table, model, priced("running"))
    costs = case_costs(table, model, priced("running", True)).row(0, named=True)
    assert costs["extrapolated_spans"] == 1 and costs["extrapolated_regen"]


def test_one_kernel_is_priced_once_per_pricing_and_every_row_derives_from_those_costs():
    """kernel_bounds: the table's point columns are the bounds of each pricing's own costs (the judged
    one is `bound`), its paper rows are the paper corpora's pool, and a pricing the model cannot give
    (no steady split with steady_max_n below two profiled N) is a null column, said in `unpriced`."""
    rep = [(QuadraticAR(1e-3, 1e-6), QuadraticPrefill(2e-3 * s, 1e-5 * s, 0.0, 0.0)) for s in (0.8, 1.2)]
    other = random_spans(2).filter(pl.col("corpus") == "HEvalFix-Py").with_columns(
        corpus=pl.lit("CommitEdits-x"), case_id=pl.col("case_id").str.replace("HEvalFix-Py", "CommitEdits-x"))
    table = pl.concat([random_spans(1), other]).with_columns(prompt_tokens=pl.lit(50, dtype=pl.Int64))
    model = first_step_model()
    settings = priced("running", True, context=256)
    got = kernel_bounds(table, model, settings, 100, 0, 0.95, kernel_repeats=True, pooled_bootstrap="corpus")
    assert got.costs.equals(case_costs(table, model, settings)) and not got.unpriced
    for name, other in (("bound_steady", settings), ("bound_first_step", priced("running", True, step_cost="first_step")),
                        ("bound_gold_prefill", priced("running", True, prefill_tokens="n_tokens"))):
        alone = bounds_table(case_costs(table, model, other), 0, 0, 0.95)
        assert got.table[name].to_list() == alone["bound"].to_list(), name
    assert got.table["bound"].to_list() == got.table["bound_steady"].to_list()
    mine = got.costs.filter(pl.col("corpus") != "CommitEdits-x")
    pooled = bounds_table(mine, 0, 0, 0.95).filter(pl.col("corpus") == "pooled").select("level", "framing", "variant", "pooling", "bound")
    paper = got.paper.select("level", "framing", "variant", "pooling", "bound").join(
        pooled, on=["level", "framing", "variant", "pooling"], suffix="_alone")
    assert paper.height == pooled.height > 0 and set(got.paper["pool"]) == {"paper"}
    assert paper["bound"].to_list() == paper["bound_alone"].to_list()
    assert got.steps["t_step"] == pytest.approx(5e-3) and got.steps["steady_step"] == pytest.approx(2e-3)
    # repeats: with the kernel's own repeats the intervals widen, the point bounds do not move
    with_repeats = quadratic(repeats=tuple(rep))
    plain = kernel_bounds(table, with_repeats, settings, 100, 0, 0.95, kernel_repeats=False, pooled_bootstrap="corpus")
    wide = kernel_bounds(table, with_repeats, settings, 100, 0, 0.95, kernel_repeats=True, pooled_bootstrap="corpus")
    assert wide.table["bound"].to_list() == plain.table["bound"].to_list() and set(wide.table["kernel_repeats"]) == {2}
    one_n = first_step_model(ns=(1.0, 16.0))
    judged_v1 = priced("running", True, step_cost="first_step")
    missing = kernel_bounds(table, one_n, judged_v1, 0, 0, 0.95, kernel_repeats=False, pooled_bootstrap="corpus")
    assert set(missing.unpriced) == {"steady"} and missing.table["bound_steady"].null_count() == missing.table.height
    assert missing.steps["steady_step"] is None


def test_commit_costs_sum_the_files_of_a_commit():
    import polars as pl

    from analysis.bounds import bounds_table, commit_costs

    rows = []
    for case_id, regen, program in (("CommitEdits-x/aaa:a.py", 3.0, 1.0), ("CommitEdits-x/aaa:b.py", 5.0, 2.0),
                                    ("CommitEdits-x/bbb:a.py", 4.0, 4.0), ("CommitEdits-y/ccc", 9.0, 1.0)):
        rows.append({"case_id": case_id, "corpus": case_id.split("/")[0], "framing": "file", "level": "line",
                     "gold_tokens": 10, "copied_tokens": 6, "program_ideal": program, "directive_seconds": 0.1,
                     "regen": regen, "program_overhead": program + 0.5, "extrapolated_spans": 0,
                     "extrapolated_regen": case_id.endswith("b.py")})
    costs = pl.DataFrame(rows)
    summed = commit_costs(costs)
    assert summed["case_id"].to_list() == ["CommitEdits-x/aaa", "CommitEdits-x/bbb"]  # one-file corpus left out
    first = summed.row(0, named=True)
    assert (first["regen"], first["program_ideal"], first["program_overhead"]) == (8.0, 3.0, 4.0)
    assert first["n_files"] == 2 and first["extrapolated_regen"] and first["gold_tokens"] == 20
    table = bounds_table(summed.drop("n_files"), 50, 0, 0.9)
    ideal = table.filter((pl.col("variant") == "ideal") & (pl.col("corpus") == "CommitEdits-x")).row(0, named=True)
    assert ideal["n_cases"] == 2 and ideal["bound"] == pytest.approx(12.0 / 7.0)
