"""analysis.present.notebook's computations: the corpus report's frames, claim 3 like with like, the kernel
run environment and roofline explanation, the headline metrics. Inputs are small frames built here;
expected values are computed independently in the test, never typed from a run."""

from __future__ import annotations

import json
import statistics

import polars as pl
import pytest
from fixtures import ROOT

from analysis import claims
from analysis.errors import ParamsError
from analysis.layout import LATENCY_MODEL, METRICS, TABLES
from analysis.present import notebook as present

PAPER = present.paper_claims()


# ---------------------------------------------------------------- corpora


def _cases() -> pl.DataFrame:
    rows = [("HEvalFix-Py/0", "HEvalFix-Py", "python", "body", "a\nb\nc\n", "a\nB\nc\n"),
            ("HEvalFix-Py/0", "HEvalFix-Py", "python", "decl", "d\na\nb\nc\n", "d\na\nB\nc\n"),
            ("HEvalFix-Py/1", "HEvalFix-Py", "python", "body", "x\n", "y\n"),
            ("CommitEdits-click/1", "CommitEdits-click", "python", "file", "1\n2\n3\n4\n5\n", "1\n2\n3\n4\n6\n"),
            ("Mine/1", "Mine", "js", "pair", "p\nq\n", "p\nq\nr\n")]
    return pl.DataFrame(rows, schema=["case_id", "corpus", "language", "framing", "source", "target"], orient="row")


def _spans() -> pl.DataFrame:
    rows = [("HEvalFix-Py/0", "body", "line", "copy", 2, 1), ("HEvalFix-Py/0", "body", "line", "gen", 3, 1),
            ("HEvalFix-Py/1", "body", "line", "gen", 2, 1), ("HEvalFix-Py/1", "body", "line", "gen", 4, 2),
            ("HEvalFix-Py/1", "body", "token", "gen", 99, 0),  # token level: not an edit size
            ("CommitEdits-click/1", "file", "line", "copy", 8, 4)]  # no gen span: a zero-size edit
    return pl.DataFrame(rows, schema=["case_id", "framing", "level", "kind", "n_tokens", "n_lines"], orient="row")


def test_corpus_groups():
    assert present.corpus_group("HEvalFix-Py", "body") == present.BENCHMARK
    assert present.corpus_group("ProbeEdit-S", "unit") == present.BENCHMARK
    assert present.corpus_group("CommitEdits-click", "file") == present.GIT_HISTORY
    assert present.corpus_group("Mine", "pair") == present.USER_PAIRS


def test_corpus_cases_counts_cases_per_framing():
    table = present.corpus_cases(_cases())
    row = table.filter(pl.col("corpus") == "HEvalFix-Py").row(0, named=True)
    assert row["framings"] == "body, decl" and row["cases_per_framing"] == 2 and row["group"] == present.BENCHMARK
    assert set(table["corpus"]) == set(_cases()["corpus"])


def test_case_sizes_follow_the_framing_and_sum_line_level_gen_spans():
    counted = []

    def fake_counts(texts):
        counted.extend(texts)
        return [len(t) for t in texts]  # characters stand in for tokens: known values

    sizes = present.case_sizes(_cases(), _spans(), "body", token_counts=fake_counts)
    assert set(sizes["framing"]) == {"body", "file", "pair"}  # decl left out; single framings join
    one = sizes.filter(pl.col("case_id") == "HEvalFix-Py/1").row(0, named=True)
    assert (one["changed_lines"], one["gen_tokens"]) == (1 + 2, 2 + 4)  # the token-level span is not counted
    zero = sizes.filter(pl.col("case_id") == "CommitEdits-click/1").row(0, named=True)
    assert (zero["changed_lines"], zero["gen_tokens"], zero["source_lines"]) == (0, 0, 5)
    assert zero["source_tokens"] == len("1\n2\n3\n4\n5\n") and len(counted) == sizes.height
    with pytest.raises(ParamsError, match="framing"):
        present.case_sizes(_cases(), _spans(), "prompt", token_counts=fake_counts)


def test_size_distribution_and_its_narrow_table():
    values = [1, 2, 3, 4, 100]
    sizes = pl.DataFrame({"group": ["benchmark"] * 5, "corpus": ["A"] * 5, "source_lines": values,
                          "source_tokens": values, "changed_lines": values, "gen_tokens": values})
    dist = present.size_distribution(sizes)
    row = dist.filter(pl.col("measure") == "source_lines").row(0, named=True)
    assert row["median"] == statistics.median(values) and row["max"] == max(values) and row["cases"] == len(values)
    assert row["mean"] == pytest.approx(statistics.mean(values))
    table = present.size_table(dist)
    assert table.columns == ["group", "corpus", "cases", *present.SIZE_MEASURES.values()]
    assert table["source lines"][0].startswith(present.fmt_count(statistics.median(values)) + " [")


def _coverage() -> pl.DataFrame:
    rows = []
    for corpus, framing, line, token in (("HEvalFix-Py", "body", 0.74, 0.97), ("HEvalFix-Py", "decl", 0.80, 0.98),
                                         ("ProbeEdit-S", "unit", 0.98, 0.999), ("CommitEdits-click", "file", 0.96, 0.99),
                                         ("pooled", "body", 0.9, 0.99), ("pooled", "decl", 0.91, 0.99)):
        for level, value in (("line", line), ("token", token)):
            rows.append({"corpus": corpus, "framing": framing, "level": level, "n_cases": 10, "coverage": value,
                         "ci_low": value - 0.01, "ci_high": value + 0.005})
    return pl.DataFrame(rows)


def test_corpus_coverage_pivots_levels_and_keeps_only_the_framings_pool():
    table = present.corpus_coverage(_coverage(), "body")
    assert table.filter(pl.col("corpus") == "pooled").height == 1
    assert table["corpus"].to_list()[-1] == "pooled"  # pools last
    py = table.filter(pl.col("corpus") == "HEvalFix-Py").row(0, named=True)
    assert (py["line_coverage"], py["token_coverage"]) == (0.74, 0.97)
    assert table.filter(pl.col("corpus") == "CommitEdits-click")["group"][0] == present.GIT_HISTORY


def _bound_rows(values: dict[tuple[str, str], float], cases: dict[str, int] | None = None) -> pl.DataFrame:
    """A bounds.csv in the kernel-source format: line/ideal rows for (kernel_source, corpus) -> bound."""
    cases = cases or {}
    rows = []
    for (source, corpus), bound in values.items():
        framing = {"ProbeEdit-S": "unit", "CommitEdits-click": "file"}.get(corpus, "body")
        poolings = ["ratio_of_sums", "mean_of_corpora"] if corpus == "pooled" else ["corpus"]
        for pooling in poolings:
            rows.append({"level": "line", "corpus": corpus, "framing": framing, "variant": "ideal",
                         "n_cases": cases.get(corpus, 164), "bound": bound, "ci_low": bound * 0.9, "ci_high": bound * 1.1,
                         "coverage": 0.9, "pooling": pooling, "extrapolated_spans": 0, "kernel_source": source,
                         "baseline": "eager" if source == "fit" else "paper (A100, bf16)"})
    return pl.DataFrame(rows)


def _write_tables(tmp_path, bounds: pl.DataFrame, coverage: pl.DataFrame | None = None):
    tables = tmp_path / TABLES
    tables.mkdir(parents=True, exist_ok=True)
    bounds.write_csv(tables / "bounds.csv")
    (coverage if coverage is not None else _coverage()).write_csv(tables / "coverage.csv")
    return tables


def test_real_vs_benchmarks_is_computed_from_the_tables():
    bounds = _bound_rows({("paper", "HEvalFix-Py"): 3.4, ("paper", "ProbeEdit-S"): 60.0, ("paper", "CommitEdits-click"): 25.0})
    text = present.real_vs_benchmarks(_coverage(), bounds)
    assert "CommitEdits-click" in text and present.fmt_pct(0.96) in text and present.fmt_x(25.0) in text
    assert "above HEvalFix-Py, below ProbeEdit-S*" in text
    higher = _coverage().with_columns(coverage=pl.when(pl.col("corpus") == "CommitEdits-click").then(0.999)
                                      .otherwise(pl.col("coverage")))
    assert "above every benchmark" in present.real_vs_benchmarks(higher, bounds)
    benchmarks_only = _coverage().filter(pl.col("corpus") != "CommitEdits-click")
    assert "No real-edit corpus" in present.real_vs_benchmarks(benchmarks_only, bounds)


def test_corpus_bounds_has_one_column_per_kernel_and_labels_both_poolings():
    bounds = _bound_rows({("paper", "HEvalFix-Py"): 3.4, ("fit", "HEvalFix-Py"): 2.9, ("paper", "pooled"): 12.0,
                          ("fit", "pooled"): 8.0})
    table = present.corpus_bounds(bounds, "body", "line", "ideal")
    assert {"paper kernel", "fitted, eager AR"} <= set(table.columns)
    assert {"pooled (ratio of sums)", "pooled (mean of corpora)"} <= set(table["corpus"])
    assert table.filter(pl.col("corpus") == "HEvalFix-Py")["paper kernel"][0].startswith(present.fmt_x(3.4))


# ---------------------------------------------------------------- claim 3, like with like


def _paper_bounds(probe: float, extra: bool) -> pl.DataFrame:
    c = PAPER["bounds"]
    values = {("paper", "HEvalFix-Py"): c["HEvalFix-Py"], ("paper", "HEvalFix-JS"): c["HEvalFix-JS"],
              ("paper", "ProbeEdit-S"): probe, ("paper", "pooled"): c["pooled"], ("fit", "HEvalFix-Py"): 2.0}
    cases = {"HEvalFix-Py": 164, "HEvalFix-JS": 164, "ProbeEdit-S": 154, "pooled": 482 + (300 if extra else 0)}
    if extra:
        values[("paper", "CommitEdits-click")] = 20.0
        cases["CommitEdits-click"] = 300
    return _bound_rows(values, cases)


def test_claim_3_compares_the_paper_kernel_and_only_a_like_pool(tmp_path):
    c = PAPER["bounds"]
    tables = _write_tables(tmp_path, _paper_bounds(c["ProbeEdit"], extra=False))
    claim = claims._bounds_claim(PAPER["bounds"], tables, tmp_path / METRICS)
    assert claim.verdict == present.REPRODUCED, claim.why
    assert "pooled" in claim.ours and "fit (eager AR" in claim.ours
    compare = present.paper_comparison(tables)
    assert (compare["paper inside CI"] == "yes").sum() == 4  # three corpora and the ratio-of-sums pool
    assert "not comparable" in compare.filter(pl.col("corpus") == "pooled (mean of corpora)")["paper inside CI"].to_list()

    tables = _write_tables(tmp_path, _paper_bounds(c["ProbeEdit"], extra=True))
    claim = claims._bounds_claim(PAPER["bounds"], tables, tmp_path / METRICS)
    assert claim.verdict == present.REPRODUCED and "pooled not compared" in claim.why and "CommitEdits-click" in claim.why


def test_claim_3_explains_a_bound_above_the_papers_from_the_generated_share(tmp_path):
    c = PAPER["bounds"]
    coverage = _coverage().with_columns(coverage=pl.when(pl.col("corpus") == "ProbeEdit-S").then(0.99)
                                        .otherwise(pl.col("coverage")))
    tables = _write_tables(tmp_path, _paper_bounds(3 * c["ProbeEdit"], extra=False), coverage)
    claim = claims._bounds_claim(PAPER["bounds"], tables, tmp_path / METRICS)
    assert claim.verdict == present.DIFFERS
    assert present.fmt_pct(1 / c["ProbeEdit"]) in claim.why and present.fmt_pct(1 - 0.99) in claim.why


def test_old_bounds_table_is_a_clear_error(tmp_path):
    old = _paper_bounds(29.0, extra=False).drop("kernel_source", "pooling")
    tables = _write_tables(tmp_path, old)
    with pytest.raises(ParamsError, match="predates kernel sources"):
        present.bounds_frame(tables)
    verdicts = present.claims(tables, tmp_path / METRICS)
    assert [c.verdict for c in verdicts if c.claim.startswith(("bounds", "3."))] == [present.NOT_RUN]


# ---------------------------------------------------------------- kernels: environment and roofline


def _sidecar(reference: list[float], threshold: float = 0.15, roofline: dict | None = None) -> dict:
    """A sidecar as kernels_profile.profile_session.environment_record writes it, from the contention module's own types."""
    from kernels_profile.contention import Drift, RunEnvironment

    drift = Drift.of(reference, threshold)
    run = RunEnvironment(run_id="r1", started_at=1_700_000_000.0, ended_at=1_700_000_100.0,
                         machine={"cpu_model": "Test CPU", "cpu_avx2": True, "cpu_avx512f": False},
                         load_before=(0.5, 0.4, 0.3), load_after=(1.5, 0.6, 0.4), reference_samples_s=tuple(reference),
                         drift=drift).to_json()
    run["roofline"] = roofline
    return {"machine": {"cpu_model": "Test CPU", "cpu_avx2": True, "cpu_avx512f": False, "cpu_avx512_bf16": False,
                        "cpu_amx_tile": True, "logical_cores": 2, "usable_cores": 2, "torch_threads": 2},
            "noisy_drift": threshold, "noisy": drift.noisy, "pairs": 4, "noisy_pairs": ["p1"] if drift.noisy else [],
            "max_pair_drift": drift.drift, "median_pair_drift": drift.drift / 2, "load1": {"min": 0.5, "max": 1.5},
            "runs": [run]}


def test_run_environment_not_recorded_says_so():
    view = present.run_environment_view({"fits": []})
    assert not view.recorded and "not recorded" in view.summary


@pytest.mark.parametrize("reference,noisy", [([0.010, 0.0101], False), ([0.010, 0.013], True)])
def test_run_environment_marks_a_drifting_reference_noisy(reference, noisy):
    view = present.run_environment_view({"run_environment": _sidecar(reference)})
    assert view.recorded and view.noisy is noisy
    assert view.summary.startswith("NOISY") is noisy
    run = view.runs.row(0, named=True)
    assert run["status"] == ("NOISY" if noisy else "quiet")
    assert run["reference start ms"] == pytest.approx(1000 * reference[0])
    assert run["drift"] == pytest.approx(max(reference) / min(reference) - 1)
    machine = view.machine.row(0, named=True)
    assert (machine["CPU"], machine["avx2"], machine["avx512f"], machine["amx"]) == ("Test CPU", "yes", "no", "yes")


ROOF = {"stream_gbps": 10.0, "matmul_f32_gflops": 120.0, "matmul_f32_size": 1024, "matmul_bf16_gflops": 4.0,
        "matmul_bf16_size": 128, "ridge_flops_per_byte": 12.0}


def _speedups(top: float) -> pl.DataFrame:
    return pl.DataFrame({"n": [8, 512, 512], "dtype": ["float32"] * 3, "is_strongest": [True, True, False],
                         "speedup": [3.0, top, top / 2], "baseline": ["static", "static", "eager"]})


def test_fit_writes_the_roofline_ceiling_of_the_profiled_dtype():
    from analysis.roofline import copy_speedup_ceiling
    from kernels_profile.stages.fit import environment_metrics, roofline_metrics

    assert roofline_metrics(None, _speedups(10.0)) == "not recorded"
    roof = roofline_metrics(_sidecar([0.01, 0.01], roofline=ROOF), _speedups(10.0))
    assert roof["ceiling"] == copy_speedup_ceiling(512, ROOF["stream_gbps"], ROOF["matmul_f32_gflops"], 4)
    assert roof["ridge_flops_per_byte"] == pytest.approx(ROOF["matmul_f32_gflops"] / ROOF["stream_gbps"])
    assert (roof["measured_at_n_max"], roof["n_max"], roof["dtype"]) == (10.0, 512, "float32")
    env = environment_metrics(_sidecar([0.010, 0.013]))
    assert env["noisy"] is True and env["noisy_pairs"] == 1 and env["machine"]["cpu_model"] == "Test CPU"
    assert environment_metrics(None) == "not recorded"


def test_roofline_explanation_uses_the_measured_numbers_and_labels_the_hypothesis():
    from kernels_profile.stages.fit import roofline_metrics

    gpu = present.gpu_reference()
    roof = roofline_metrics(_sidecar([0.01, 0.01], roofline=ROOF), _speedups(10.0))
    text = present.roofline_explanation(roof, gpu).text
    assert "explanation these measurements support" in text
    assert present.fmt_num(ROOF["stream_gbps"]) in text and present.fmt_x(roof["ceiling"]) in text
    gpu_cap = gpu["bf16_tflops"] * 1000 / gpu["hbm_gbps"]
    assert ("Hypothesis" in text) is (gpu["paper_top"] > gpu_cap)  # only what the roofline cannot explain
    assert "not recorded" in present.roofline_explanation(None, gpu).text
    frame = present.roofline_frame(roof, gpu)
    assert frame.height == 2 and frame["ridge FLOP/byte"][1] == pytest.approx(gpu_cap)
    curves = present.roofline_ceilings(roof, gpu, [1, 8, 512])
    assert curves.filter(pl.col("n") == 1)["ceiling"].to_list() == [1.0, 1.0]  # both machines: speedup N at N = 1


# ---------------------------------------------------------------- latency fits and headline


def test_latency_fits_read_both_schemas():
    from analysis.latency import paper_model, to_document

    legacy = json.loads((ROOT / LATENCY_MODEL).read_text())
    fits = present.latency_fits(legacy)
    assert fits.height == len(legacy.get("fits") or legacy.get("models"))
    doc = json.loads(json.dumps(to_document([paper_model()], "test", [])))
    assert present.latency_fits(doc)["form"].to_list() == [paper_model().form]
    with pytest.raises(ParamsError, match="no fit"):
        present.latency_fits(doc, "no-such-model")


def test_bounds_wide_and_tokenization_wide_are_narrow_and_put_pools_last():
    bounds = _bound_rows({("paper", "HEvalFix-Py"): 3.4, ("paper", "pooled"): 12.0, ("paper", "ProbeEdit-S"): 60.0})
    wide = present.bounds_wide(bounds)
    assert wide.columns == ["corpus", "n_cases", "line ideal", "extrapolated_spans_max"]
    assert wide["corpus"].to_list()[-2:] == ["pooled (mean of corpora)", "pooled (ratio of sums)"]
    assert wide.filter(pl.col("corpus") == "ProbeEdit-S")["line ideal"][0] == (
        f"{present.fmt_x(60.0)} {present.fmt_ci(60.0 * 0.9, 60.0 * 1.1)}")
    tok = bounds.with_columns(bound_gold_prefill=pl.col("bound") * 1.1, rel_change=pl.lit(0.1))
    narrow = present.tokenization_wide(tok)
    assert narrow.height == bounds.height and narrow["line ideal"][0].endswith(f"(+{present.fmt_pct(0.1, 2)})")
