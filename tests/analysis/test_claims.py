"""analysis.claims without HTML: each rule on small synthetic outputs written here. Expected values
are computed in the test from the inputs it writes (or from paper_claims.json), never typed from a run."""

from __future__ import annotations

import json

import polars as pl
import pytest

from analysis import claims
from analysis.errors import ParamsError
from analysis.layout import METRICS, TABLES

PAPER = claims.paper_claims()


def _tables(tmp_path):
    path = tmp_path / TABLES
    path.mkdir(parents=True, exist_ok=True)
    return path


# ---------------------------------------------------------------- the JSON is the single source


def test_paper_kernel_points_have_one_home():
    from analysis.latency import PAPER_POINTS, paper_kernel_points

    assert PAPER_POINTS == claims.paper_points(PAPER["kernel_speedup"]) == paper_kernel_points(claims.PAPER)


def test_paper_kernel_points_follow_the_json(tmp_path):
    from analysis.latency import paper_kernel_points

    doc = json.loads(claims.PAPER.read_text())
    doc["kernel_speedup"]["points"] = [[4, 2.0], [256, 100.0]]
    path = tmp_path / "claims.json"
    path.write_text(json.dumps(doc))
    assert paper_kernel_points(path) == ((4, 2.0), (256, 100.0))


def test_an_unknown_comparator_is_a_named_error(tmp_path):
    doc = json.loads(claims.PAPER.read_text())
    doc["copy_ceiling"]["comparator"] = "roughly"
    path = tmp_path / "claims.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ParamsError, match="copy_ceiling.*roughly"):
        claims.paper_claims(path)


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


def test_claim_1_without_a_source_column_is_the_cpu_fit_and_says_the_hardware_is_not_comparable(tmp_path):
    tables = _tables(tmp_path)
    pl.DataFrame(_kernel_rows(None, "cpu", "qwen2.5-0.5b", 4.0, 16.6)).write_csv(tables / "kernel_speedup.csv")
    claim = claims._kernel_claim(PAPER["kernel_speedup"], tables, tmp_path / METRICS)
    assert claim.verdict == claims.DIFFERS
    assert claim.ours.startswith("fit (qwen2.5-0.5b float32 cpu)") and "16.6x" in claim.ours and claims.fmt_x(10 * 16.6) not in claim.ours
    assert "not comparable" in claim.reason and "roofline" not in claim.reason


def test_claim_1_lists_every_source_and_is_judged_on_the_gpu_ones(tmp_path):
    (_, low), (_, high) = claims.paper_points(PAPER["kernel_speedup"])
    rows = (_kernel_rows("fit", "cpu", "qwen2.5-0.5b", 4.0, 16.6)
            + _kernel_rows("h200/qwen2.5-1.5b/eager", "cuda", "qwen2.5-1.5b", low * 1.1, high * 0.9)
            + _kernel_rows("h200/qwen2.5-7b/static_compiled", "cuda", "qwen2.5-7b", low, high, eager_scale=2.0))
    tables = _tables(tmp_path)
    pl.DataFrame(rows).write_csv(tables / "kernel_speedup.csv")
    claim = claims._kernel_claim(PAPER["kernel_speedup"], tables, tmp_path / METRICS)
    for source in ("fit", "h200/qwen2.5-1.5b/eager", "h200/qwen2.5-7b/static_compiled"):
        assert source in claim.ours
    assert claim.verdict == claims.REPRODUCED, claim.reason  # the CPU fit is shown, not judged
    assert "static_compiled" in claim.ours and claims.fmt_x(2 * high) in claim.ours  # eager beside the strongest
    rows = [r if r["kernel_source"] != "h200/qwen2.5-1.5b/eager" else {**r, "speedup": r["speedup"] / 3} for r in rows]
    pl.DataFrame(rows).write_csv(tables / "kernel_speedup.csv")
    claim = claims._kernel_claim(PAPER["kernel_speedup"], tables, tmp_path / METRICS)
    assert claim.verdict == claims.DIFFERS and "h200/qwen2.5-1.5b/eager" in claim.reason and "fit " not in claim.reason


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


# ---------------------------------------------------------------- claim 6: the paper's three corpora


def _perturbation(em_of: dict[str, callable]) -> pl.DataFrame:
    corpora = {"HEvalFix-Py": ("body", 164), "HEvalFix-JS": ("body", 164), "ProbeEdit-S": ("unit", 154),
               "CommitEdits-click": ("file", 300)}
    rows = []
    for corpus, (framing, n) in corpora.items():
        for rate in (0.0, 0.5, 1.0):
            for kind in ("start", "end"):
                em = em_of[corpus](rate)
                rows.append({"level": "line", "kind": kind, "rate": rate, "corpus": corpus, "framing": framing,
                             "em": em, "em_min": em, "em_max": em, "invalid": 0.0, "no_copy": em_of[corpus](1.0),
                             "n_cases": n, "seeds": 3})
        rows.append({"level": "line", "kind": "start", "rate": 1.0, "corpus": corpus, "framing": "decl", "em": 0.9,
                     "em_min": 0.9, "em_max": 0.9, "invalid": 0.0, "no_copy": 0.9, "n_cases": n, "seeds": 3})
    rows.append({"level": "line", "kind": "start", "rate": 1.0, "corpus": "pooled", "framing": "body", "em": 0.5,
                 "em_min": 0.5, "em_max": 0.5, "invalid": 0.0, "no_copy": 0.0, "n_cases": 782, "seeds": 3})
    return pl.DataFrame(rows).filter(~((pl.col("framing") == "decl") & pl.col("corpus").is_in(["ProbeEdit-S", "CommitEdits-click"])))


def test_claim_6_pools_the_papers_three_corpora_only(tmp_path):
    em_of = {"HEvalFix-Py": lambda r: 1 - 0.8 * r, "HEvalFix-JS": lambda r: 1 - r, "ProbeEdit-S": lambda r: 1 - r,
             "CommitEdits-click": lambda r: 1 - 0.5 * r}
    tables = _tables(tmp_path)
    _perturbation(em_of).write_csv(tables / "perturbation.csv")
    claim = claims._perturb_claim(PAPER["perturbation"], tables, tmp_path / METRICS)
    expected = (164 * 0.2 + 164 * 0.0 + 154 * 0.0) / 482  # CommitEdits, the decl framing and the pooled row left out
    assert f"{100 * expected:.2f}%" in claim.ours and "482 cases" in claim.ours
    assert claim.verdict == claims.DIFFERS
    target = PAPER["perturbation"]["em_pct"] / 100
    ems = {r: (164 * em_of["HEvalFix-Py"](r) + 318 * (1 - r)) / 482 for r in (0.5, 1.0)}
    crossing = 0.5 + (ems[0.5] - target) / (ems[0.5] - ems[1.0]) * 0.5
    assert f"strict at rate {crossing:.2f}-{crossing:.2f}" in claim.reason
    assert "clip" not in claim.reason  # no clip table written: not claimed


def test_claim_6_within_tolerance_is_reproduced(tmp_path):
    target = PAPER["perturbation"]["em_pct"] / 100
    em_of = {k: (lambda r: 1 - (1 - target) * r) for k in ("HEvalFix-Py", "HEvalFix-JS", "ProbeEdit-S")}
    em_of["CommitEdits-click"] = lambda r: 1.0
    tables = _tables(tmp_path)
    _perturbation(em_of).write_csv(tables / "perturbation.csv")
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


def test_claim_7_without_the_pilot_is_not_run(tmp_path):
    claim = claims._finetune_claim(PAPER["finetune"], tmp_path / TABLES, tmp_path / METRICS)
    assert claim.verdict == claims.NOT_RUN


# ---------------------------------------------------------------- the e2e extension


# the e2e claim (pooled over every case, the frozen e2e-wide run beside it): tests/analysis/test_e2eview.py


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
    from analysis.outputs import pick_view

    frame = pl.DataFrame({"corpus": ["HEvalFix-Py", "HEvalFix-Py", "ProbeEdit-S", "pooled", "pooled"],
                          "framing": ["body", "decl", "unit", "body", "decl"]})
    shown = frame.filter(framing_view("body"))
    assert shown.rows() == [("HEvalFix-Py", "body"), ("ProbeEdit-S", "unit"), ("pooled", "body")]
    assert pick_view(frame, "decl").rows() == [("HEvalFix-Py", "decl"), ("ProbeEdit-S", "unit"), ("pooled", "decl")]
    with pytest.raises(ParamsError, match="unknown framing"):
        pick_view(frame, "sideways")


def test_break_even_n_is_the_smallest_n_where_prefill_wins():
    from analysis.kernelviews import break_even_n

    table = pl.DataFrame({"n": [16, 1, 4, 2], "speedup_strongest": [3.0, 0.9, 1.2, 0.99]})
    assert break_even_n(table) == 4
    assert break_even_n(table.filter(pl.col("n") < 4)) is None


def test_context_label_names_the_mode():
    from analysis.layout import context_label

    assert context_label("fixed", 256) == "c=256"
    assert "None" not in context_label("running", None) and "so far" in context_label("running", None)


def test_perturbation_page_tables_cover_every_definition_written(tmp_path):
    from analysis import perturbviews

    em_of = {k: (lambda r: 1 - r) for k in ("HEvalFix-Py", "HEvalFix-JS", "ProbeEdit-S", "CommitEdits-click")}
    tables = _tables(tmp_path)
    _perturbation(em_of).write_csv(tables / "perturbation.csv")
    _perturbation(em_of).write_csv(tables / "perturbation_clip.csv")
    pooled = perturbviews.paper_pool_table("line", tables)
    assert set(pooled["definition"]) == {"strict", "clip"} and set(pooled["n_cases"]) == {482}
    assert set(perturbviews.definition_tables("line", "body", tables=tables)) == {"strict", "clip"}
    crossings = perturbviews.crossings_table(PAPER["perturbation"]["em_pct"] / 100, tables)
    assert crossings.height == 4 and crossings["crossing, paper's corpora"].null_count() == 0


def test_claims_over_the_papers_corpora_are_not_applicable_to_a_run_without_them(tmp_path):
    from analysis.outputs import pick_framing

    tables = _tables(tmp_path)
    pl.DataFrame({"level": ["line", "line"], "corpus": ["Pairs-a", "pooled"], "framing": ["pair", "pair"],
                  "coverage": [0.5, 0.5], "ci_low": [0.4, 0.4], "ci_high": [0.6, 0.6], "n_cases": [2, 2]}
                 ).write_csv(tables / "coverage.csv")
    items = claims.claims(tables, tmp_path / METRICS)
    judged_on_paper = {f"{s['id']}. {s['title']}" if s.get("id") else s["title"]
                       for k, s in PAPER.items() if not k.startswith("_") and s.get("pool") == claims.PAPER_POOL}
    assert judged_on_paper and {c.claim for c in items if c.verdict == claims.NOT_APPLICABLE} == judged_on_paper
    assert all("Pairs-a" in c.reason for c in items if c.verdict == claims.NOT_APPLICABLE)
    assert {c.verdict for c in items if c.claim not in judged_on_paper} == {claims.NOT_RUN}
    # a framing that this run lacks shows its single-framing corpora instead of failing
    assert pick_framing(pl.read_csv(tables / "coverage.csv"), "body").height == 2
