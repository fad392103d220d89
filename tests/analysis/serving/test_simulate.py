"""The serving sweep: paired seeded requests, speedups over AR and over the best rival, families at their best
member, determinism, and the published shape (speculation's gain falls with load) from the model alone."""

import numpy as np
import polars as pl
import pytest
from fixtures import forwards_frame, step_cost_model

from analysis.errors import ParamsError
from analysis.serving.forwards import traces
from analysis.serving.scheduler import EngineConfig
from analysis.serving.simulate import Methods, Sweep, shared_cases, sweep_source, with_families, with_speedups
from analysis.serving.workload import draw_cases, poisson_arrivals

METHODS = Methods({"ar": "baseline", "pld-earliest-k5": "rival", "copy-line-decoded": "copy", "copy-line-ideal": "bound"},
                  {"pld-best": ("pld-earliest-k5",)}, frozenset({"pld-earliest-k5"})).validate()
SWEEP = Sweep((1, 2, 8), 12, 2, 0.1, (0.5,), 12, 5.0, 2.0, 0).validate()


def table(model=None):
    by_case = traces(forwards_frame(6))
    cases, outside = shared_cases(by_case, list(METHODS.roles))
    rows, info = sweep_source(model or step_cost_model(), EngineConfig(64, 8), by_case, METHODS, SWEEP, cases,
                              keep_steps=lambda m, c: c == 2)
    return with_speedups(with_families(pl.DataFrame(rows), METHODS), METHODS), info, outside


def test_every_method_at_every_load_point_with_its_speedups():
    frame, info, outside = table()
    assert outside == {m: 0 for m in METHODS.roles}
    closed = frame.filter(pl.col("workload") == "closed").sort("load", "method")
    assert closed.height == 3 * (4 + 1)  # four methods and the family, three concurrencies
    ar = closed.filter(pl.col("method") == "ar")
    assert ar["speedup_vs_ar"].to_list() == [1.0, 1.0, 1.0]
    copy = closed.filter(pl.col("method") == "copy-line-decoded")
    assert copy["speedup_vs_ar"][0] > 1 and copy["speedup_vs_best_rival"].is_not_null().all()
    # past the ridge (T* = 8 here) a step's cost follows its tokens: copying them is no cheaper than decoding
    # them, and the directive tokens cost extra, so the gain falls with load
    assert copy["speedup_vs_ar"][-1] < copy["speedup_vs_ar"][0]
    ideal = closed.filter(pl.col("method") == "copy-line-ideal")
    assert (ideal["output_tokens_per_s"].to_numpy() >= copy["output_tokens_per_s"].to_numpy()).all()
    family = closed.filter(pl.col("method") == "pld-best").sort("load")
    assert family["best_member"].to_list() == ["pld-earliest-k5"] * 3
    member = closed.filter(pl.col("method") == "pld-earliest-k5").sort("load")
    assert family["output_tokens_per_s"].to_list() == member["output_tokens_per_s"].to_list()
    assert closed.filter(pl.col("role") == "rival")["speedup_vs_best_rival"].is_null().all()
    assert frame.filter(pl.col("workload") == "open").height == 5
    assert info["slo"].ttft_s > 0 and set(info["steps"]) == {(m, 2) for m in METHODS.roles}


def test_the_same_settings_give_the_same_table():
    a, _, _ = table()
    b, _, _ = table()
    assert a.drop("sim_wall_s").equals(b.drop("sim_wall_s"))


def test_speculation_gains_fall_with_load_when_verifies_pass_the_ridge():
    frame, _, _ = table(step_cost_model(c0=0.002, c_seq=0.0, c_w=0.008, t_star=8.0, c_kv=0.0, c_a=0.0))
    pld = frame.filter((pl.col("workload") == "closed") & (pl.col("method") == "pld-earliest-k5")).sort("load")
    gains = pld["speedup_vs_ar"].to_list()
    assert gains[0] > 1.5 and gains[-1] < gains[0]


def test_draws_are_seeded_and_paired_and_rates_must_be_positive():
    cases = ["a", "b", "c"]
    assert draw_cases(cases, 20, 0, "x") == draw_cases(cases, 20, 0, "x") != draw_cases(cases, 20, 1, "x")
    arrivals = poisson_arrivals(50, 2.0, 0, "y")
    assert arrivals == sorted(arrivals) and 10 < arrivals[-1] < 50
    with pytest.raises(ParamsError, match="must be > 0"):
        poisson_arrivals(5, 0.0, 0, "y")
    with pytest.raises(ParamsError, match="no case has a trace"):
        draw_cases([], 3, 0, "x")


@pytest.mark.parametrize("roles, best_of, speculative, message", [
    ({"ar": "baseline", "c": "copy", "x": "boss"}, {}, [], "unknown roles"),
    ({"ar": "baseline", "b": "baseline", "c": "copy"}, {}, [], "exactly one baseline"),
    ({"ar": "baseline", "r": "rival"}, {}, [], "no Copy-as-Decode"),
    ({"ar": "baseline", "c": "copy"}, {"fam": ("c",)}, [], "must list rival methods"),
    ({"ar": "baseline", "c": "copy"}, {}, ["pld"], "not in serving.methods"),
])
def test_bad_method_roles_are_named(roles, best_of, speculative, message):
    with pytest.raises(ParamsError, match=message):
        Methods(roles, best_of, frozenset(speculative)).validate()


@pytest.mark.parametrize("change, message", [({"ttft_x": -1.0}, "must be > 0"), ({"concurrency": (2, 4)}, "must include 1"),
                                             ({"concurrency": (0, 1)}, ">= 1"), ({"warmup_share": 1.0}, r"\[0, 1\)")])
def test_bad_sweeps_are_named(change, message):
    values = {**SWEEP.__dict__, **change}
    with pytest.raises(ParamsError, match=message):
        Sweep(**values).validate()


def test_a_method_without_traces_is_named():
    with pytest.raises(ParamsError, match="no trace of method"):
        shared_cases(traces(forwards_frame(2)), ["ar", "suffix-k64"])


def test_the_gain_over_the_best_rival_gets_a_paired_request_bootstrap_interval():
    """The interval pairs the two methods on the requests both served (their index in the seeded draw), is the
    spread of the rival's summed latency over Copy-as-Decode's, and is set around the throughput ratio itself."""
    from analysis.serving.simulate import Methods, Resampling, paired_ratio_interval, rival_intervals

    rng = np.random.default_rng(0)
    rival = {i: float(v) for i, v in enumerate(rng.uniform(1.0, 3.0, 200))}
    copy = {i: v / 2 for i, v in rival.items() if i != 7}  # twice as fast; request 7 outside its window
    boot = Resampling(resamples=400, seed=0, ci=0.95)
    low, high = paired_ratio_interval(rival, copy, 2.1, boot)
    assert low <= 2.1 <= high and high - low < 0.01  # a constant per-request ratio: a narrow interval
    assert paired_ratio_interval(rival, copy, 2.1, Resampling(0, 0, 0.95)) == (None, None)
    noisy = {i: v * float(rng.uniform(0.3, 0.9)) for i, v in rival.items()}
    wide = paired_ratio_interval(rival, noisy, 1.7, boot)
    assert wide[0] < 1.7 < wide[1] and wide == paired_ratio_interval(rival, noisy, 1.7, boot)  # seeded

    methods = Methods({"ar": "baseline", "copy-line-decoded": "copy", "pld-earliest-k5": "rival",
                       "pld-earliest-k10": "rival"}, {"pld-best-k": ("pld-earliest-k5", "pld-earliest-k10")},
                      frozenset({"pld-earliest-k5", "pld-earliest-k10"}))
    point = {"kernel_source": "s", "max_num_batched_tokens": 2048, "workload": "closed", "load": 1.0}
    table = pl.DataFrame([
        {**point, "method": "copy-line-decoded", "role": "copy", "best_rival": "pld-best-k", "best_member": None,
         "speedup_vs_best_rival": 2.0},
        {**point, "method": "pld-best-k", "role": "rival", "best_rival": None, "best_member": "pld-earliest-k10",
         "speedup_vs_best_rival": None},
        {**point, "method": "ar", "role": "baseline", "best_rival": "pld-best-k", "best_member": None,
         "speedup_vs_best_rival": 0.5}])
    latencies = {("s", 2048, 1.0, "pld-earliest-k10"): rival, ("s", 2048, 1.0, "copy-line-decoded"): copy}
    out = rival_intervals(table, latencies, methods, boot)
    first = out.row(0, named=True)
    assert first["vs_best_rival_ci_low"] == pytest.approx(2.0) == first["vs_best_rival_ci_high"]  # the family's best member paired
    assert out["vs_best_rival_ci_low"].null_count() == 2  # only Copy-as-Decode's closed-loop rows get one


def test_a_point_where_every_method_is_compute_bound_is_flagged_and_ranked_by_tokens_per_output():
    """Audit H3: past the ridge every forwarded token costs the same whoever forwards it, so throughput is output
    over tokens forwarded; such a point is flagged (and reported as that, never as parity), a launch-bound one is
    not."""
    from analysis.serving.simulate import with_compute_bound

    by_case = traces(forwards_frame(6))
    cases, _ = shared_cases(by_case, list(METHODS.roles))
    long = Sweep((1, 8), 400, 50, 0.1, (), 12, 5.0, 2.0, 0).validate()   # a long steady window at C = 8

    def closed(model):
        rows, _ = sweep_source(model, EngineConfig(64, 8), by_case, METHODS, long, cases)
        frame = with_speedups(with_families(pl.DataFrame(rows), METHODS), METHODS)
        return with_compute_bound(frame.filter(pl.col("workload") == "closed"), 0.8)

    # T* = 1: every token past the first of a step costs c_w; at C = 8 the launch is a small share of a full step
    frame = closed(step_cost_model(c0=0.0005, c_seq=0.0, c_w=0.0005, t_star=1.0, c_kv=0.0, c_a=0.0))
    heavy = frame.filter(pl.col("load") == 8.0)
    assert heavy["compute_bound"].all() and (heavy["token_bound_share"] >= 0.8).all()
    copy, ar = (heavy.filter(pl.col("method") == m).row(0, named=True) for m in ("copy-line-decoded", "ar"))
    assert copy["speedup_vs_ar"] == pytest.approx(ar["tokens_per_output"] / copy["tokens_per_output"], rel=0.1)
    launch = closed(step_cost_model(c0=0.05, c_w=0.0001, t_star=8.0))
    assert not launch.filter(pl.col("load") == 1.0)["compute_bound"].any()
    with pytest.raises(ParamsError, match="compute_bound_share"):
        with_compute_bound(frame, 1.5)
