"""`copydecode rivals`: bad settings are named at settings time; a run on the scratch pipeline's HumanEvalPack
cases writes every method's forwards, its price under every kernel source (a paired estimate included), the
pooled table, the fastest-method table, the chart and the metrics the claims row reads."""

import json
import shutil

import polars as pl
import pytest
from fixtures import ROOT, params_with

from analysis.claims.rivals import rivals_claim
from analysis.cli import main
from analysis.errors import ParamsError
from analysis.rivals.methods import parse_method
from analysis.stages import rivals


@pytest.mark.parametrize("changes, message", [
    ({"rivals.pld.k": [10, 0]}, "rivals.pld.k"),
    ({"rivals.pld.k": []}, "rivals.pld.k"),
    ({"rivals.pld.k": [10, None]}, "rivals.pld.k"),
    ({"rivals.pld.k": [5000]}, r"\(5000 is out of range\)"),
    ({"rivals.suffix.k": [0]}, r"rivals.suffix.k.*\(0 is out of range\)"),
    ({"rivals.suffix.unbounded": 1}, "rivals.suffix.unbounded"),
    ({"rivals.suffix.options.min_token_prob": float("nan")}, "'rivals.suffix.options.min_token_prob' must be a finite number"),
    ({"rivals.pld.unbounded": "yes"}, "rivals.pld.unbounded"),
    ({"rivals.pld.policies": ["first"]}, "rivals.pld.policies"),
    ({"rivals.pld.ngram_max": 10 ** 9}, "ngram_max"),
    ({"rivals.suffix.options.max_tree_depth": 10 ** 9}, "max_tree_depth"),
    ({"rivals.suffix.options.depth": 3}, "is not a suffix decoding setting"),
    ({"rivals.suffix.options": {"max_tree_depth": 64}}, r"lacks \['max_spec_factor'"),
    ({"rivals.suffix.k": 0}, "'rivals.suffix.k' must be list"),
    ({"rivals.kernel_sources": ["paper", "H200 eager"], "rivals.judged_source": "paper"}, "unknown kernel sources"),
    ({"rivals.judged_source": "fit2"}, "rivals.judged_source"),
    ({"rivals.estimates": [{"name": "x", "decode": "paper"}]}, "exactly name, decode and prefill"),
    ({"rivals.estimates": [{"name": "paper", "decode": "paper", "prefill": "paper"}]}, "also a kernel source"),
    ({"rivals.framing": "sideways"}, "rivals.framing"),
    ({"rivals.bootstrap_resamples": 3}, "bootstrap_resamples"),
])
def test_bad_settings_are_named_errors(changes, message):
    with pytest.raises(ParamsError, match=message):
        rivals.settings(params_with(**changes))


def test_an_unknown_rivals_key_is_named():
    params = params_with()
    params["rivals"]["workers"] = 2
    with pytest.raises(ParamsError, match="rivals.workers"):
        rivals.settings(params)


def test_the_shipped_settings_simulate_the_standard_and_best_settings():
    s = rivals.settings(params_with())
    names = [m.name for m in s.methods]
    assert "pld-earliest-k10" in names and "pld-earliest-kinf" in names and "pld-latest-k64" in names
    assert "suffix-k64" in names and "suffix-k64-cache" not in names  # the response cache is off by default
    assert {"copy-line-decoded", "copy-line-jump", "copy-line-ideal", "unified-diff", "search-replace"} <= set(names)


SOURCES = ["paper", "h200-devtime/qwen2.5-1.5b"]
ESTIMATE = {"name": "h200-graph+devtime/qwen2.5-1.5b", "decode": "h200/qwen2.5-1.5b/static_compiled",
            "prefill": "h200-devtime/qwen2.5-1.5b"}


@pytest.mark.slow
def test_a_run_writes_forwards_prices_tables_and_the_claims_row(stage_scratch):
    (stage_scratch / "reports/kernels").mkdir(parents=True)
    shutil.copy(ROOT / "reports/kernels/latency_model.json", stage_scratch / "reports/kernels/latency_model.json")
    args = ["--set", f"rivals.kernel_sources={json.dumps(SOURCES)}", "--set", f"rivals.estimates=[{json.dumps(ESTIMATE)}]",
            "--set", "rivals.judged_source=h200-devtime/qwen2.5-1.5b", "--set", "rivals.pld.k=[10]",
            "--set", "rivals.bootstrap_resamples=50", "--set", "rivals.suffix.response_cache=true"]
    assert main([*args, "rivals"]) == 0
    forwards = pl.read_parquet(stage_scratch / "data/rivals/forwards.parquet")
    cases = forwards["case_id"].n_unique()
    methods = sorted(set(forwards["method"]))
    assert forwards.height == cases * len(methods) and "suffix-k64-cache" in methods
    # every method reaches the gold output: emitted gold tokens (formats emit their own text's tokens)
    reach = forwards.filter(~pl.col("method").is_in(["unified-diff", "search-replace"]))
    assert (reach["emitted"].list.sum() == reach["gold_tokens"]).all()
    table = pl.read_csv(stage_scratch / "reports/tables/rivals.csv")
    sources = SOURCES + [ESTIMATE["name"]]
    assert sorted(set(table["kernel_source"])) == sorted(sources)
    assert table.group_by("kernel_source", "corpus", "pool").len()["len"].unique().to_list() == [len(methods)]
    ar = table.filter(pl.col("method") == "ar")
    assert (ar["speedup"] == 1.0).all()
    percase = pl.read_parquet(stage_scratch / "data/rivals/percase.parquet")
    one = table.filter((pl.col("kernel_source") == "paper") & (pl.col("method") == "copy-line-decoded")
                       & (pl.col("pool") == "corpus")).row(0, named=True)
    rows = percase.filter((pl.col("kernel_source") == "paper") & (pl.col("method") == "copy-line-decoded"))
    assert one["speedup"] == pytest.approx(rows["ar_seconds"].sum() / rows["seconds"].sum())
    assert one["ci_low"] <= one["speedup"] <= one["ci_high"]
    fastest = pl.read_csv(stage_scratch / "reports/tables/rivals_fastest.csv")
    assert not any(parse_method(m).is_bound for m in fastest["fastest"])
    assert (stage_scratch / "reports/figures/rivals.svg").is_file()
    spec = {"title": "beyond the paper: against the alternatives", "text": "none",
            "metric": ["tables/rivals_fastest.csv:fastest", "metrics/rivals.json:judged_source"]}
    claim = rivals_claim(spec, stage_scratch / "reports/tables", stage_scratch / "reports/metrics")
    assert claim.verdict == "beyond the paper" and claim.ours.startswith(
        "under h200-devtime/qwen2.5-1.5b, Copy-as-Decode's best deployable variant against the fastest deployable rival")
    assert "every corpus" in claim.ours and "time ratio" not in claim.ours
    # the verdict's band over the prefill rules past the profiled N, the crossover table, the split shares
    assert (fastest["copy_over_rival_band_low"] <= fastest["copy_over_rival_band_high"]).all()
    assert {"copy_over_rival_marginal", "copy_over_rival_linear", "deployable_k_max"} <= set(fastest.columns)
    assert {"extrapolated_n_share", "extrapolated_context_share", "extrapolated_batch_share"} <= set(table.columns)
    assert (stage_scratch / "reports/tables/rivals_crossover.csv").is_file()
    assert (stage_scratch / "reports/figures/rivals_crossover.svg").is_file()
    # each method pays its own prompt: Copy-as-Decode the numbered source, longer than the plain one
    prompts = forwards.pivot(on="method", index="case_id", values="prompt_tokens")
    assert (prompts["copy-line-decoded"] > prompts["ar"]).all() and (prompts["pld-earliest-k10"] == prompts["ar"]).all()
    judged = [s for s in claim.scopes if s.detail["judged"]]
    assert judged[0].scope.startswith("h200-devtime/qwen2.5-1.5b (judged), ")
    assert len(judged) == fastest.filter(pl.col("kernel_source") == "h200-devtime/qwen2.5-1.5b").height
    assert len(claim.scopes) - len(judged) == 2  # the other sources, each pooled over every corpus
    assert all(s.value is not None and s.ci[0] <= s.value <= s.ci[1] and s.decision for s in claim.scopes)
