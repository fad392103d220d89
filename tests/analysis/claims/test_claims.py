"""analysis.claims.engine without HTML: each rule on small synthetic outputs written here. Expected values
are computed in the test from the inputs it writes (or from paper_claims.json), never typed from a run."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest
from fixtures import ROOT, bound_rows, coverage_rows, perturbation_rows, write_bound_tables

from analysis.claims import engine as claims
from analysis.errors import MissingOutputError, ParamsError, StaleInputError
from analysis.latency.model import paper_points
from analysis.layout import METRICS, TABLES
from analysis.results.numbers import fmt_pct
from analysis.results.outputs import bounds_frame
from analysis.present import notebook as present

PAPER = claims.paper_claims()


def _tables(tmp_path):
    path = tmp_path / TABLES
    path.mkdir(parents=True, exist_ok=True)
    return path


# ---------------------------------------------------------------- the JSON is the single source


def test_an_unknown_comparator_is_a_named_error(tmp_path):
    doc = json.loads(claims.PAPER.read_text())
    doc["copy_ceiling"]["comparator"] = "roughly"
    path = tmp_path / "claims.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ParamsError, match="copy_ceiling.*roughly"):
        claims.paper_claims(path)


# ---------------------------------------------------------------- the engine: comparators, metric paths, outputs


def test_every_comparator_the_json_declares_is_implemented_and_dispatched():
    declared = {spec["comparator"] for key, spec in PAPER.items() if not key.startswith("_")}
    assert declared <= set(claims.COMPARATORS)
    assert all(callable(claims.COMPARATORS[name]) for name in declared)
    spec = {"comparator": "ends_within_factor", "rel_tolerance": 0.25}
    assert claims.judge(spec, (8.0, 300.0), (6.8, 303.0)) and not claims.judge(spec, (9.0, 300.0), (6.8, 303.0))
    assert claims.judge({**spec, "comparator": "ends_within_pp", "tolerance_pp": 3}, (0.76, 0.96), (0.74, 0.98))
    assert not claims.judge({**spec, "comparator": "ends_within_pp", "tolerance_pp": 1}, (0.76, 0.96), (0.74, 0.98))
    assert claims.judge({**spec, "comparator": "inside_widened_ci", "rel_tolerance": 0.15}, (3.0, 3.9), 4.4)
    assert not claims.judge({**spec, "comparator": "inside_widened_ci", "rel_tolerance": 0.1}, (3.0, 3.9), 4.4)
    ranged = {"comparator": "range_inside", "tolerance_pp": 3.0, "rel_tolerance": 0.25}
    assert claims.judge(ranged, (0.9, 1.0), (0.91, 0.99), tolerance="tolerance_pp")
    assert not claims.judge(ranged, (0.87, 1.0), (0.91, 0.99), tolerance="tolerance_pp")
    assert claims.judge(ranged, (3.7, 8.0), (4.5, 6.5), tolerance="rel_tolerance")
    assert not claims.judge(ranged, (3.5, 8.0), (4.5, 6.5), tolerance="rel_tolerance")
    assert claims.judge({"comparator": "at_most"}, 0, 0) and not claims.judge({"comparator": "at_most"}, 1, 0)
    assert claims.judge({"comparator": "each_within_pp", "tolerance_pp": 2}, [0.15, 0.16], 0.1548)
    assert not claims.judge({"comparator": "each_within_pp", "tolerance_pp": 2}, [0.15, 0.20], 0.1548)
    assert claims.judge({"comparator": "lift_at_least", "tolerance_pp": 2}, 0.10, 0.12)
    assert not claims.judge({"comparator": "lift_at_least", "tolerance_pp": 2}, 0.09, 0.12)
    with pytest.raises(ParamsError, match="extension"):
        claims.judge({"comparator": "none"}, 1, 1)
    with pytest.raises(ParamsError, match="roughly"):
        claims.judge({"comparator": "roughly", "title": "t"}, 1, 1)


def test_the_claims_comparator_decides_the_verdict(tmp_path):
    tables = _tables(tmp_path)
    spec = PAPER["copy_ceiling"]
    pl.DataFrame({"level": ["line"] * 2, "corpus": ["HEvalFix-Py", "ProbeEdit-S"], "framing": ["body", "unit"],
                  "coverage": [spec["low"] + 0.02, spec["high"]], "ci_low": [0.1, 0.1], "ci_high": [0.9, 0.99],
                  "n_cases": [164, 154]}).write_csv(tables / "coverage.csv")
    assert claims._ceiling_claim(spec, tables, tmp_path / METRICS).verdict == claims.REPRODUCED
    tight = {**spec, "tolerance_pp": 1.0}
    assert claims._ceiling_claim(tight, tables, tmp_path / METRICS).verdict == claims.DIFFERS


def test_every_metric_path_parses_and_a_claim_reads_the_path_it_names(tmp_path):
    for key, spec in PAPER.items():
        if not key.startswith("_"):
            assert claims.metric_paths(spec), key
    with pytest.raises(ParamsError, match="not 'tables"):
        claims.metric_paths({"title": "t", "metric": ["tables/coverage:coverage"]})
    tables = _tables(tmp_path)
    rows = {"level": ["line"], "corpus": ["HEvalFix-Py"], "framing": ["body"], "coverage": [0.5], "ci_low": [0.4],
            "ci_high": [0.6], "n_cases": [164]}
    pl.DataFrame(rows).write_csv(tables / "coverage_other.csv")
    spec = {**PAPER["copy_ceiling"], "metric": ["tables/coverage_other.csv:coverage"]}
    assert "HEvalFix-Py 50.0%" in claims._ceiling_claim(spec, tables, tmp_path / METRICS).ours
    with pytest.raises(MissingOutputError, match="column 'share'"):
        claims._ceiling_claim({**spec, "metric": ["tables/coverage_other.csv:share"]}, tables, tmp_path / METRICS)


def test_an_absent_output_is_not_run_but_a_params_error_is_not_swallowed(tmp_path, monkeypatch):
    items = {c.claim: c for c in claims.claims(tmp_path / TABLES, tmp_path / METRICS)}
    lossless = items[f"5. {PAPER['losslessness']['title']}"]
    assert lossless.verdict == claims.NOT_RUN and "roundtrip.json" in lossless.reason

    def broken(spec, tables, metrics_dir):
        raise ParamsError("a wrong parameter, not a missing output")

    (tmp_path / METRICS).mkdir(parents=True)
    (tmp_path / METRICS / "roundtrip.json").write_text(json.dumps({"failed": 0, "passed": 1, "programs": 1}))
    monkeypatch.setitem(claims.RULES, "losslessness", broken)
    with pytest.raises(ParamsError, match="wrong parameter"):
        claims.claims(tmp_path / TABLES, tmp_path / METRICS)


def test_the_papers_gpu_datasheet_has_one_home():
    gpu = claims.paper_gpu()
    sheet = json.loads(claims.DEVICES.read_text())[PAPER["_gpu_reference"]["datasheet_entry"]]
    assert (gpu["hbm_gbps"], gpu["bf16_tflops"]) == (sheet["hbm_gbps"], sheet["bf16_tflops"])
    assert "hbm_gbps" not in PAPER["_gpu_reference"] and "bf16_tflops" not in PAPER["_gpu_reference"]


def test_the_verdict_table_has_one_row_per_claim_and_the_named_columns(tmp_path):
    frame = claims.claims_frame(claims.claims(tmp_path / TABLES, tmp_path / METRICS))
    assert frame.columns == ["claim", "paper", "ours", "verdict", "reason", "method"]
    assert frame.height == len([k for k in PAPER if not k.startswith("_")])
    assert set(frame["verdict"]) == {claims.NOT_RUN}  # no outputs at all: every claim not run, none dropped


# ---------------------------------------------------------------- claim 1: every kernel source


def _kernel_rows(source: str | None, device: str, model: str, low: float, high: float, eager_scale: float = 1.0):
    rows = []
    for n, speedup in ((8, low), (64, (low + high) / 2), (512, high), (1024, 10 * high)):  # N=1024 outside the range
        for baseline, scale, strongest in (("eager", eager_scale, eager_scale == 1.0), ("static_compiled", 1.0, True)):
            if eager_scale == 1.0 and baseline != "eager":
                continue
            row = {"model": model, "dtype": "bfloat16" if device != "cpu" else "float32", "device": device, "n": n,
                   "baseline": baseline, "speedup": speedup * scale, "is_strongest": strongest}
            if source is not None:
                row["kernel_source"] = source
            rows.append(row)
    return rows


def _judged_rows(source: str, device: str, model: str, comparison: str, low: float, high: float, judged: bool,
                 shift_at: int | None = None):
    """kernel_speedup.csv rows with the comparison contract (comparison, judged, ar_shift)."""
    baseline = {"eager/eager": "eager", "graph/eager": "static_compiled", "device/device": "devtime",
                "graph/graph": "static_compiled"}[comparison]
    return [{"kernel_source": source, "model": model, "dtype": "bfloat16" if device != "cpu" else "float32",
             "device": device, "n": n, "baseline": baseline, "speedup": speedup, "is_strongest": True,
             "comparison": comparison, "judged": judged, "ar_shift": n == shift_at}
            for n, speedup in ((8, low), (64, (low + high) / 2), (512, high), (1024, 10 * high))]


def test_claim_1_on_a_table_without_the_comparison_columns_is_a_stale_output_not_a_verdict(tmp_path):
    tables = _tables(tmp_path)
    pl.DataFrame(_kernel_rows(None, "cpu", "qwen2.5-0.5b", 4.0, 16.6)).write_csv(tables / "kernel_speedup.csv")
    claim = claims._kernel_claim(PAPER["kernel_speedup"], tables, tmp_path / METRICS)
    assert claim.verdict == claims.STALE and "rerun `copydecode kernels fit`" in claim.reason
    assert claim.ours.startswith("fit (qwen2.5-0.5b float32 cpu)") and "16.6x" in claim.ours
    with pytest.raises(StaleInputError, match="comparison, judged, ar_shift"):
        claims.comparison_ranges(pl.read_csv(tables / "kernel_speedup.csv"), 8, 512)


def test_claim_1_on_the_cpu_fit_alone_says_the_hardware_is_not_comparable(tmp_path):
    tables = _tables(tmp_path)
    pl.DataFrame(_judged_rows("fit", "cpu", "qwen2.5-0.5b", "eager/eager", 4.0, 16.6, True)).write_csv(
        tables / "kernel_speedup.csv")
    claim = claims._kernel_claim(PAPER["kernel_speedup"], tables, tmp_path / METRICS)
    assert claim.verdict == claims.DIFFERS and "not comparable" in claim.reason
    assert "16.6x" in claim.ours and claims.fmt_x(10 * 16.6) not in claim.ours  # N=1024 outside the range


def test_claim_1_is_judged_on_comparisons_built_alike_never_on_graph_vs_eager(tmp_path):
    (_, low), (_, high) = paper_points(PAPER["kernel_speedup"])
    gpu = ("h200/qwen2.5-1.5b", "cuda", "qwen2.5-1.5b")
    rows = (_judged_rows("fit", "cpu", "qwen2.5-0.5b", "eager/eager", 3.0, 18.0, True)
            + _judged_rows(*gpu, "eager/eager", low * 1.1, high * 1.2, True)
            + _judged_rows(*gpu, "device/device", low, high * 0.9, True)
            + _judged_rows(*gpu, "graph/eager", 0.8, 52.4, False))
    tables = _tables(tmp_path)
    pl.DataFrame(rows).write_csv(tables / "kernel_speedup.csv")
    claim = claims._kernel_claim(PAPER["kernel_speedup"], tables, tmp_path / METRICS)
    assert claim.verdict == claims.REPRODUCED, claim.reason  # graph/eager 0.8x and the CPU fit are shown, not judged
    assert "graph/eager 0.8x-52.4x (prefill not graph-captured, not judged)" in claim.ours
    assert "fit (qwen2.5-0.5b float32 cpu): eager/eager 3.0x-18.0x" in claim.ours
    rows = [r if r["comparison"] != "device/device" else {**r, "speedup": r["speedup"] / 3} for r in rows]
    pl.DataFrame(rows).write_csv(tables / "kernel_speedup.csv")
    claim = claims._kernel_claim(PAPER["kernel_speedup"], tables, tmp_path / METRICS)
    assert claim.verdict == claims.DIFFERS and "h200/qwen2.5-1.5b device/device low end" in claim.reason
    assert "graph/eager" not in claim.reason.split(" (judged on")[0] and "fit " not in claim.reason


def test_a_range_end_from_a_shifted_ar_run_carries_the_flag(tmp_path):
    (_, low), (_, high) = paper_points(PAPER["kernel_speedup"])
    rows = (_judged_rows("h200/qwen2.5-7b", "cuda", "qwen2.5-7b", "eager/eager", low, high * 4.7, True, shift_at=512)
            + _judged_rows("h200/qwen2.5-7b", "cuda", "qwen2.5-7b", "device/device", low, high, True))
    tables = _tables(tmp_path)
    pl.DataFrame(rows).write_csv(tables / "kernel_speedup.csv")
    claim = claims._kernel_claim(PAPER["kernel_speedup"], tables, tmp_path / METRICS)
    shifted = f"{claims.fmt_x(high * 4.7)}{claims.AR_SHIFT_FLAG}"
    assert f"eager/eager {claims.fmt_x(low)}-{shifted}" in claim.ours  # only the end that depends on it
    assert f"high end {claims.fmt_x(high * 4.7)} vs" in claim.reason and "flagged: " in claim.reason
    assert claims.AR_SHIFT_FLAG not in claim.ours.split("device/device")[1]


# ---------------------------------------------------------------- claim 3: sources beside the paper kernel


def test_claim_3_shows_every_kernel_source_beside_the_judged_paper_kernel(tmp_path):
    c = PAPER["bounds"]
    rows = []
    corpora = {"HEvalFix-Py": ("body", 164), "HEvalFix-JS": ("body", 164), "ProbeEdit-S": ("unit", 154)}
    names = {"HEvalFix-Py": "HEvalFix-Py", "HEvalFix-JS": "HEvalFix-JS", "ProbeEdit-S": "ProbeEdit"}
    for source, baseline, scale in (("paper", "paper (A100, bf16)", 1.0), ("fit", "eager", 0.5),
                                    ("h200/qwen2.5-1.5b/eager", "eager", 0.8)):
        for corpus, (framing, n) in corpora.items():
            bound = scale * c[names[corpus]]
            rows.append({"level": "line", "corpus": corpus, "framing": framing, "variant": "ideal", "n_cases": n,
                         "bound": bound, "ci_low": bound * 0.95, "ci_high": bound * 1.05, "pooling": "corpus",
                         "extrapolated_spans": 0, "kernel_source": source, "baseline": baseline})
    tables = _tables(tmp_path)
    pl.DataFrame(rows).write_csv(tables / "bounds.csv")
    pl.DataFrame([{"level": "line", "corpus": k, "framing": f, "coverage": 0.8, "ci_low": 0.7, "ci_high": 0.9,
                   "n_cases": n} for k, (f, n) in corpora.items()]).write_csv(tables / "coverage.csv")
    claim = claims._bounds_claim(c, tables, tmp_path / METRICS)
    assert claim.verdict == claims.REPRODUCED, claim.reason  # judged on the paper kernel only
    assert "fit (eager AR)" in claim.ours and "h200/qwen2.5-1.5b/eager (eager AR)" in claim.ours
    assert claims.fmt_x(0.8 * c["ProbeEdit"]) in claim.ours
    compare = claims.paper_comparison(tables)
    assert {"fitted kernel", "h200/qwen2.5-1.5b/eager kernel"} <= set(compare.columns)


def test_claim_3_judges_the_papers_pool_and_shows_both_pools_for_every_source(tmp_path):
    c = PAPER["bounds"]
    corpora = {"HEvalFix-Py": ("body", 164), "HEvalFix-JS": ("body", 164), "ProbeEdit-S": ("unit", 154),
               "CommitEdits-click": ("file", 600)}
    names = {"HEvalFix-Py": "HEvalFix-Py", "HEvalFix-JS": "HEvalFix-JS", "ProbeEdit-S": "ProbeEdit"}
    rows = []
    for source, baseline, scale in (("paper", "paper (A100, bf16)", 1.0), ("h200/qwen2.5-1.5b/static_compiled",
                                                                          "static_compiled", 0.7)):
        def row(corpus, framing, n, bound, pooling="corpus", pool="all"):
            return {"level": "line", "corpus": corpus, "framing": framing, "variant": "ideal", "n_cases": n,
                    "bound": bound, "ci_low": bound * 0.95, "ci_high": bound * 1.05, "pooling": pooling, "pool": pool,
                    "extrapolated_spans": 0, "kernel_source": source, "baseline": baseline}
        for corpus, (framing, n) in corpora.items():
            rows.append(row(corpus, framing, n, scale * c.get(names.get(corpus, ""), 40.0)))
        rows.append(row("pooled", "body", 1082, scale * 2 * c["pooled"], "ratio_of_sums", "all"))
        rows.append(row("pooled", "body", 482, scale * c["pooled"], "ratio_of_sums", "paper"))
    tables = _tables(tmp_path)
    pl.DataFrame(rows).write_csv(tables / "bounds.csv")
    pl.DataFrame([{"level": "line", "corpus": k, "framing": f, "coverage": 0.8, "ci_low": 0.7, "ci_high": 0.9,
                   "n_cases": n} for k, (f, n) in corpora.items()]).write_csv(tables / "coverage.csv")
    claim = claims._bounds_claim(c, tables, tmp_path / METRICS)
    assert claim.verdict == claims.REPRODUCED, claim.reason  # the 1,082-case pool (2x the paper's) is not judged
    assert f"pooled over the paper's corpora ({claims.fmt_x(c['pooled'])})" in claim.reason
    beside = claim.ours.split("Beside it, ")[1]
    assert f"pooled over the paper's corpora {claims.fmt_x(0.7 * c['pooled'])} (ratio of sums) (482 cases)" in beside
    assert f"pooled over every corpus {claims.fmt_x(1.4 * c['pooled'])} (ratio of sums) (1,082 cases)" in beside


# ---------------------------------------------------------------- claim 6: the paper's three corpora


def test_claim_6_pools_the_papers_three_corpora_only(tmp_path):
    em_of = {"HEvalFix-Py": lambda r: 1 - 0.8 * r, "HEvalFix-JS": lambda r: 1 - r, "ProbeEdit-S": lambda r: 1 - r,
             "CommitEdits-click": lambda r: 1 - 0.5 * r}
    tables = _tables(tmp_path)
    perturbation_rows(em_of).write_csv(tables / "perturbation.csv")
    claim = claims._perturb_claim(PAPER["perturbation"], tables, tmp_path / METRICS)
    expected = (164 * 0.2 + 164 * 0.0 + 154 * 0.0) / 482  # CommitEdits, the decl framing and the pooled row left out
    assert f"{100 * expected:.2f}%" in claim.ours and "482 cases" in claim.ours
    target = PAPER["perturbation"]["em_pct"] / 100
    ems = {r: (164 * em_of["HEvalFix-Py"](r) + 318 * (1 - r)) / 482 for r in (0.5, 1.0)}
    crossing = 0.5 + (ems[0.5] - target) / (ems[0.5] - ems[1.0]) * 0.5
    assert f"strict at rate {crossing:.2f}-{crossing:.2f}" in claim.ours
    assert "clip" not in claim.ours  # no clip table written: not claimed


def test_claim_6_is_underdetermined_when_the_papers_figure_lies_inside_the_measured_family(tmp_path):
    em_of = {"HEvalFix-Py": lambda r: 1 - 0.8 * r, "HEvalFix-JS": lambda r: 1 - r, "ProbeEdit-S": lambda r: 1 - r,
             "CommitEdits-click": lambda r: 1 - 0.5 * r}
    tables = _tables(tmp_path)
    perturbation_rows(em_of).write_csv(tables / "perturbation.csv")
    spec = PAPER["perturbation"]
    claim = claims._perturb_claim(spec, tables, tmp_path / METRICS)
    assert spec["paper_states_rate"] is False and spec["comparator"] in claims.COMPARATORS
    assert claim.verdict == claims.UNDERDETERMINED and "strict at rate" in claim.ours
    assert "neither the noise rate nor the perturbation definition" in claim.reason
    assert "by construction" in claim.reason  # EM at rate 1 equals the no-copy share in this fixture too
    stated = {**spec, "paper_states_rate": True}  # had the paper stated its rate, the same data would differ
    assert claims._perturb_claim(stated, tables, tmp_path / METRICS).verdict == claims.DIFFERS


def test_claim_6_differs_when_no_measured_definition_reaches_the_papers_figure(tmp_path):
    em_of = {k: (lambda r: 1 - 0.5 * r) for k in ("HEvalFix-Py", "HEvalFix-JS", "ProbeEdit-S", "CommitEdits-click")}
    tables = _tables(tmp_path)
    perturbation_rows(em_of).write_csv(tables / "perturbation.csv")
    claim = claims._perturb_claim(PAPER["perturbation"], tables, tmp_path / METRICS)
    assert claim.verdict == claims.DIFFERS and "strict never" in claim.reason


def test_claim_6_within_tolerance_is_reproduced(tmp_path):
    target = PAPER["perturbation"]["em_pct"] / 100
    em_of = {k: (lambda r: 1 - (1 - target) * r) for k in ("HEvalFix-Py", "HEvalFix-JS", "ProbeEdit-S")}
    em_of["CommitEdits-click"] = lambda r: 1.0
    tables = _tables(tmp_path)
    perturbation_rows(em_of).write_csv(tables / "perturbation.csv")
    assert claims._perturb_claim(PAPER["perturbation"], tables, tmp_path / METRICS).verdict == claims.REPRODUCED


# ---------------------------------------------------------------- claim 7: judged by its rule


def _pilot(tmp_path, **extra) -> dict:
    m = {"model": "smollm2-135m", "steps": 32, "method": "LoRA", "before": {"cases": 33, "em": 0.0},
         "after_program": {"0": {"em": 0.0}, "1": {"em": 1 / 33}}, "humaneval": {"0": {"em": 0.0}}, **extra}
    (tmp_path / METRICS).mkdir(parents=True, exist_ok=True)
    (tmp_path / METRICS / "pilot.json").write_text(json.dumps(m))
    return m


def test_claim_7_without_a_lift_is_not_reproduced_at_this_scale_and_names_the_scale(tmp_path):
    _pilot(tmp_path)
    claim = claims._finetune_claim(PAPER["finetune"], tmp_path / TABLES, tmp_path / METRICS)
    assert claim.verdict == claims.NOT_AT_SCALE
    assert "smollm2-135m" in claim.reason and "32 steps" in claim.reason
    assert "HEvalFix-Py EM before fine-tuning not recorded" in claim.reason  # an older pilot.json, said so
    assert claims.fmt_pct(1 / 33) in claim.ours


@pytest.mark.parametrize("after, verdict", [(0.05, claims.NOT_AT_SCALE), (0.15, claims.REPRODUCED)])
@pytest.mark.parametrize("layout", ["nested", "flat"])
def test_claim_7_is_reproduced_only_when_the_lift_meets_the_papers(tmp_path, after, verdict, layout):
    seeds = {"0": {"em": after}, "1": {"em": after}}
    if layout == "nested":
        _pilot(tmp_path, humaneval={"before": {"em": 0.0}, "after": seeds})
    else:  # the pilot stage's keys: humaneval_before beside humaneval (seed -> summary)
        _pilot(tmp_path, humaneval=seeds, humaneval_before={"cases": 33, "em": 0.0})
    claim = claims._finetune_claim(PAPER["finetune"], tmp_path / TABLES, tmp_path / METRICS)
    assert claim.verdict == verdict and claim.verdict != claims.BEYOND
    assert claims.fmt_pct(after) in claim.ours


@pytest.mark.parametrize("after, verdict", [(0.03, claims.NOT_AT_SCALE), (0.2, claims.REPRODUCED)])
def test_claim_7_judges_the_longest_run_with_hevalfix_and_labels_each_run(tmp_path, after, verdict):
    long = {"model": "smollm2-135m", "steps": 384, "method": "LoRA long", "before": {"cases": 33, "em": 0.0},
            "after_program": {"0": {"em": 5 / 33}}, "humaneval_before": {"cases": 33, "em": 0.0},
            "humaneval": {"0": {"em": after}}}
    run = {"commit": "abc1234", "command": "copydecode pilot --preset pilot-long"}
    _pilot(tmp_path, humaneval={}, after_program={"0": {"em": 0.0}}, humaneval_before={"cases": 0},
           frozen={"pilot-long": {"run": run, "metrics": long}})
    claim = claims._finetune_claim(PAPER["finetune"], tmp_path / TABLES, tmp_path / METRICS)
    assert claim.verdict == verdict
    assert claim.ours.startswith("default (32 steps): held-out edits EM")
    assert "pilot-long, frozen run of abc1234 (384 steps): HEvalFix-Py EM" in claim.ours
    assert claims.fmt_pct(5 / 33) in claim.ours and claims.fmt_pct(after) in claim.ours
    assert "384 steps (pilot-long, frozen run of abc1234)" in claim.reason
    assert "LoRA long" in claim.method and "default: LoRA" in claim.method


def test_claim_7_gives_every_em_an_interval_and_the_difference_a_paired_test(tmp_path):
    _pilot(tmp_path, heldout_cases=33, heldout_em_before=0, heldout_em_after={"0": 2}, humaneval_cases=33,
           humaneval_em_before=0, humaneval_em_after={"0": 0}, humaneval_before={"cases": 33, "em": 0.0},
           humaneval={"0": {"em": 0.0}})
    claim = claims._finetune_claim(PAPER["finetune"], tmp_path / TABLES, tmp_path / METRICS)
    assert "held-out edits EM 0 / 33 -> 2 / 33 (after 6.1%, 95% CI [0.7%, 20.2%]; McNemar exact p = 0.5, " \
           "not significant)" in claim.ours
    assert "HEvalFix-Py EM 0 / 33 -> 0 / 33 (after 0.0%, 95% CI [0.0%, 10.6%]" in claim.ours
    assert "McNemar exact p = 0.5, not significant" in claim.reason


def test_claim_7_without_the_pilot_is_a_missing_output_and_not_run(tmp_path):
    with pytest.raises(MissingOutputError, match="pilot.json"):
        claims._finetune_claim(PAPER["finetune"], tmp_path / TABLES, tmp_path / METRICS)
    items = {c.claim: c for c in claims.claims(tmp_path / TABLES, tmp_path / METRICS)}
    assert items[f"7. {PAPER['finetune']['title']}"].verdict == claims.NOT_RUN


# ---------------------------------------------------------------- the e2e extension


# the e2e claim (pooled over every case, the frozen e2e-wide run beside it): tests/analysis/results/test_e2eview.py


# ---------------------------------------------------------------- the optimal oracle and the pooling owner


def test_optimal_line_sets_both_oracles_beside_the_papers_floors(tmp_path):
    rows = []
    for corpus, framing, covmax, optimal in (("HEvalFix-Py", "body", 1.4, 5.0), ("ProbeEdit-S", "unit", 17.0, 26.0),
                                             ("CommitEdits-click", "file", 100.0, 200.0)):
        rows.append({"kernel_source": "paper", "baseline": "paper (A100, bf16)", "level": "token", "corpus": corpus,
                     "framing": framing, "pooling": "corpus", "n_cases": 10, "covmax_bound": covmax,
                     "optimal_bound": optimal, "context": 256})
    tables = _tables(tmp_path)
    pl.DataFrame(rows).write_csv(tables / "optimal.csv")
    spec = {**PAPER["optimal"], "beside_claim": PAPER["token_level"]}
    claim = claims._optimal_claim(spec, tables, tmp_path / METRICS)
    assert claim.verdict == claims.BEYOND
    assert "1.4x-17.0x coverage-max -> 5.0x-26.0x cost-optimal" in claim.ours  # CommitEdits is not a paper corpus
    assert "1 of 2 corpora" in claim.reason


def test_framing_view_keeps_single_framing_corpora_and_only_the_framings_pool():
    from analysis.layout import framing_view
    from analysis.results.outputs import pick_view

    frame = pl.DataFrame({"corpus": ["HEvalFix-Py", "HEvalFix-Py", "ProbeEdit-S", "pooled", "pooled"],
                          "framing": ["body", "decl", "unit", "body", "decl"]})
    shown = frame.filter(framing_view("body"))
    assert shown.rows() == [("HEvalFix-Py", "body"), ("ProbeEdit-S", "unit"), ("pooled", "body")]
    assert pick_view(frame, "decl").rows() == [("HEvalFix-Py", "decl"), ("ProbeEdit-S", "unit"), ("pooled", "decl")]
    with pytest.raises(ParamsError, match="unknown framing"):
        pick_view(frame, "sideways")


def test_break_even_n_is_the_smallest_n_where_prefill_wins():
    from analysis.present.kernelviews import break_even_n

    table = pl.DataFrame({"n": [16, 1, 4, 2], "speedup_strongest": [3.0, 0.9, 1.2, 0.99]})
    assert break_even_n(table) == 4
    assert break_even_n(table.filter(pl.col("n") < 4)) is None


def test_context_label_names_the_mode():
    from analysis.layout import context_label

    assert context_label("fixed", 256) == "c=256"
    assert "None" not in context_label("running", None) and "so far" in context_label("running", None)


def test_the_round_trip_claim_is_judged_on_a_run_of_the_users_programs(tmp_path):
    """C10 (issue 41): losslessness is a property of the oracle and the resolver on any corpus, so a one-off
    run's claim 5 is judged on that run's own programs (42/42 here), not marked 'not applicable'. (N19 had made
    it not applicable; its figure is now the run's own count, never the paper's 482.)"""
    tables = _tables(tmp_path)
    pl.DataFrame({"level": ["line", "line"], "corpus": ["Pairs-a", "pooled"], "framing": ["pair", "pair"],
                  "coverage": [0.5, 0.5], "ci_low": [0.4, 0.4], "ci_high": [0.6, 0.6], "n_cases": [2, 2]}
                 ).write_csv(tables / "coverage.csv")
    (tmp_path / METRICS).mkdir(parents=True, exist_ok=True)
    (tmp_path / METRICS / "roundtrip.json").write_text(json.dumps({"programs": 42, "passed": 42, "failed": 0}))
    items = {c.claim: c for c in claims.claims(tables, tmp_path / METRICS)}
    assert items["5. lossless round trip"].verdict == claims.REPRODUCED
    assert items["5. lossless round trip"].ours.startswith("42/42 programs") and "482" not in items["5. lossless round trip"].ours
    (tmp_path / METRICS / "roundtrip.json").write_text(json.dumps({"programs": 42, "passed": 41, "failed": 1}))
    assert {c.claim: c for c in claims.claims(tables, tmp_path / METRICS)}["5. lossless round trip"].verdict == claims.DIFFERS


def test_claims_over_the_papers_corpora_are_not_applicable_to_a_run_without_them(tmp_path):
    from analysis.results.outputs import pick_framing

    tables = _tables(tmp_path)
    pl.DataFrame({"level": ["line", "line"], "corpus": ["Pairs-a", "pooled"], "framing": ["pair", "pair"],
                  "coverage": [0.5, 0.5], "ci_low": [0.4, 0.4], "ci_high": [0.6, 0.6], "n_cases": [2, 2]}
                 ).write_csv(tables / "coverage.csv")
    items = claims.claims(tables, tmp_path / METRICS)
    judged_on_paper = {f"{s['id']}. {s['title']}" if s.get("id") else s["title"]
                       for k, s in PAPER.items() if not k.startswith("_") and claims.needs_paper_corpora(s)}
    assert "5. lossless round trip" not in judged_on_paper  # C10: judged on the run's own programs
    assert judged_on_paper and {c.claim for c in items if c.verdict == claims.NOT_APPLICABLE} == judged_on_paper
    assert all("Pairs-a" in c.reason for c in items if c.verdict == claims.NOT_APPLICABLE)
    assert {c.verdict for c in items if c.claim not in judged_on_paper} == {claims.NOT_RUN}
    # a framing that this run lacks shows its single-framing corpora instead of failing
    assert pick_framing(pl.read_csv(tables / "coverage.csv"), "body").height == 2


def test_claim_7_label_reads_model_steps_task_and_data_size_from_the_run(tmp_path):
    _pilot(tmp_path, task="bugfix", train_sequences={"program": {"kept": 158, "too_long": 2}},
           data={"n_train": 160})
    claim = claims._finetune_claim(PAPER["finetune"], tmp_path / TABLES, tmp_path / METRICS)
    assert "smollm2-135m, 32 steps (default), task bugfix on 158 training sequences" in claim.reason
    _pilot(tmp_path, data={"n_train": 160})  # a run written before pilot.task trained on edits
    claim = claims._finetune_claim(PAPER["finetune"], tmp_path / TABLES, tmp_path / METRICS)
    assert "32 steps (default), task edit on 160 training cases" in claim.reason


def test_claim_7_judges_a_bugfix_run_before_a_longer_edit_run(tmp_path):
    long = {"model": "smollm2-135m", "steps": 384, "method": "LoRA long", "before": {"cases": 33, "em": 0.0},
            "after_program": {"0": {"em": 0.0}}, "humaneval_before": {"cases": 33, "em": 0.0},
            "humaneval": {"0": {"em": 0.0}}}
    _pilot(tmp_path, task="bugfix", humaneval={"0": {"em": 0.2}}, humaneval_before={"cases": 33, "em": 0.0},
           frozen={"pilot-long": {"run": {"commit": "abc1234"}, "metrics": long}})
    claim = claims._finetune_claim(PAPER["finetune"], tmp_path / TABLES, tmp_path / METRICS)
    assert claim.verdict == claims.REPRODUCED and "32 steps (default), task bugfix" in claim.reason
    assert claim.ours.startswith("default (32 steps): HEvalFix-Py EM") and "held-out bug fixes EM" in claim.ours
    assert "(384 steps): HEvalFix-Py EM 0.0% -> 0.0%; held-out edits EM" in claim.ours


# ---------------------------------------------------------------- claim 3, like with like


def _paper_bounds(probe: float, extra: bool) -> pl.DataFrame:
    c = PAPER["bounds"]
    values = {("paper", "HEvalFix-Py"): c["HEvalFix-Py"], ("paper", "HEvalFix-JS"): c["HEvalFix-JS"],
              ("paper", "ProbeEdit-S"): probe, ("paper", "pooled"): c["pooled"], ("fit", "HEvalFix-Py"): 2.0}
    cases = {"HEvalFix-Py": 164, "HEvalFix-JS": 164, "ProbeEdit-S": 154, "pooled": 482 + (300 if extra else 0)}
    if extra:
        values[("paper", "CommitEdits-click")] = 20.0
        cases["CommitEdits-click"] = 300
    return bound_rows(values, cases)


def test_claim_3_compares_the_paper_kernel_and_only_a_like_pool(tmp_path):
    c = PAPER["bounds"]
    tables = write_bound_tables(tmp_path, _paper_bounds(c["ProbeEdit"], extra=False))
    claim = claims._bounds_claim(PAPER["bounds"], tables, tmp_path / METRICS)
    assert claim.verdict == claims.REPRODUCED, claim.why
    assert "pooled" in claim.ours and "fit (eager AR" in claim.ours
    compare = claims.paper_comparison(tables)
    assert (compare["paper inside CI"] == "yes").sum() == 4  # three corpora and the ratio-of-sums pool
    assert "not comparable" in compare.filter(pl.col("corpus") == "pooled (mean of corpora)")["paper inside CI"].to_list()

    tables = write_bound_tables(tmp_path, _paper_bounds(c["ProbeEdit"], extra=True))
    claim = claims._bounds_claim(PAPER["bounds"], tables, tmp_path / METRICS)
    assert claim.verdict == claims.REPRODUCED and "pooled not compared" in claim.why and "CommitEdits-click" in claim.why


def test_claim_3_explains_a_bound_above_the_papers_from_the_generated_share(tmp_path):
    c = PAPER["bounds"]
    coverage = coverage_rows().with_columns(coverage=pl.when(pl.col("corpus") == "ProbeEdit-S").then(0.99)
                                        .otherwise(pl.col("coverage")))
    tables = write_bound_tables(tmp_path, _paper_bounds(3 * c["ProbeEdit"], extra=False), coverage)
    claim = claims._bounds_claim(PAPER["bounds"], tables, tmp_path / METRICS)
    assert claim.verdict == claims.DIFFERS
    assert fmt_pct(1 / c["ProbeEdit"]) in claim.why and fmt_pct(1 - 0.99) in claim.why


def test_old_bounds_table_is_a_clear_error(tmp_path):
    old = _paper_bounds(29.0, extra=False).drop("kernel_source", "pooling")
    tables = write_bound_tables(tmp_path, old)
    with pytest.raises(ParamsError, match="predates kernel sources"):
        bounds_frame(tables)
    verdicts = claims.claims(tables, tmp_path / METRICS)
    assert [c.verdict for c in verdicts if c.claim.startswith(("bounds", "3."))] == [claims.NOT_RUN]


# ---------------------------------------------------------------- verdicts on the committed outputs (moved from test_reports.py)


@pytest.fixture
def outputs(tmp_path):
    """A private copy of the committed stage outputs that a test may edit."""
    for folder in (TABLES, METRICS):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    return tmp_path


def _verdicts(root, paper=present.PAPER):
    return {c.claim.split(".")[0] if c.claim[0].isdigit() else c.claim: c
            for c in present.claims(root / TABLES, root / METRICS, paper)}


def test_every_claim_of_the_paper_gets_a_verdict():
    paper = present.paper_claims()
    verdicts = present.claims(ROOT / TABLES, ROOT / METRICS)
    assert {c.verdict for c in verdicts} <= set(present.VERDICTS)
    assert len([k for k, c in paper.items() if not k.startswith("_") and not c.get("extension")]) == len(
        [c for c in verdicts if c.claim[0].isdigit()])
    assert all(c.verdict == present.BEYOND for c in verdicts if not c.claim[0].isdigit())  # extensions only
    assert all(c.why for c in verdicts if c.verdict in (present.DIFFERS, present.NOT_RUN))


def test_a_round_trip_failure_turns_the_verdict(outputs):
    assert _verdicts(outputs)["5"].verdict == present.REPRODUCED
    rt = json.loads((outputs / METRICS / "roundtrip.json").read_text())
    rt["failed"], rt["passed"] = 3, rt["passed"] - 3
    (outputs / METRICS / "roundtrip.json").write_text(json.dumps(rt))
    claim = _verdicts(outputs)["5"]
    assert claim.verdict == present.DIFFERS and "3 programs" in claim.why


def test_the_threshold_in_paper_claims_decides_the_verdict(outputs, tmp_path):
    paper = present.paper_claims()
    cov = pl.read_csv(outputs / TABLES / "coverage.csv")
    line = cov.filter((pl.col("level") == "line") & pl.col("framing").is_in(["body", "unit"]) & (pl.col("corpus") != "pooled"))
    gap_pp = 100 * max(abs(line["coverage"].min() - paper["copy_ceiling"]["low"]),
                       abs(line["coverage"].max() - paper["copy_ceiling"]["high"]))
    for tolerance, verdict in ((gap_pp + 0.5, present.REPRODUCED), (gap_pp / 2, present.DIFFERS)):
        paper["copy_ceiling"]["tolerance_pp"] = tolerance
        path = tmp_path / f"claims_{verdict.replace(' ', '_')}.json"
        path.write_text(json.dumps(paper))
        assert _verdicts(outputs, path)["2"].verdict == verdict


def test_a_missing_stage_output_is_not_run_not_dropped(outputs):
    (outputs / TABLES / "perturbation.csv").unlink()
    verdicts = present.claims(outputs / TABLES, outputs / METRICS)
    missing = [c for c in verdicts if c.verdict == present.NOT_RUN and "perturbation.csv" in c.why]
    assert len(missing) == 1 and len(verdicts) == len(present.claims(ROOT / TABLES, ROOT / METRICS))
