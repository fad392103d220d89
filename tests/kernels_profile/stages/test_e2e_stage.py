"""The e2e stage's settings and typed plan, the per-case job and its checkpoint key, run order, run
environment, the per-case checkpoint pair (rows and curve) and the preset run's folder; the model-running
parts on the tiny random model with a byte tokenizer."""

import json

import polars as pl
import pytest
import yaml
from fixtures import (
    E2E_COSTS,
    E2E_PLAN,
    E2E_SEGMENTS,
    ROOT,
    FakeExecutor,
    ToyTokenizer,
    e2e_measured,
    fake_drafters,
    params_with,
    toy_model_tokenizer,
)

from analysis.corpora.sample import strata
from analysis.pipeline.config import Config
from analysis.errors import ParamsError
from analysis.rivals.methods import Method
from kernels_profile.e2e import methods as e2e
from kernels_profile.e2e.job import CHECKPOINT_VERSION, build_job, sample_cases
from kernels_profile.e2e.predict import CurvePoint, LatencyCurve
from kernels_profile.measure.interleave import interleaved_order
from kernels_profile.runtime.checkpoints import FromScratch, checkpoint_key
from kernels_profile.runtime.loading import ModelAndTokenizer
from kernels_profile.stages import e2e as stage

BASE = yaml.safe_load((ROOT / "params.yaml").read_text())


def cfg(**changes) -> dict:
    """params.yaml with dotted changes: what the e2e stage's settings read."""
    return params_with(**changes)


# ---------------------------------------------------------------- plan and params

def test_the_plan_measures_both_policies_at_every_k_and_the_sweep_only_where_asked():
    s = stage.settings(cfg(**{"e2e.pld.k": [10], "e2e.pld.sweep_k": [64, 256], "e2e.pld.sweep_models": ["smollm2-135m"],
                              "e2e.pld.sweep_corpora": ["HEvalFix-Py"], "e2e.pld.policies": ["latest", "earliest"],
                              "e2e.overhead": ["line", "token"]}))
    swept = s.plan("smollm2-135m", "HEvalFix-Py").names()
    plain = s.plan("qwen2.5-0.5b", "HEvalFix-Py").names()
    assert s.plan("smollm2-135m", "ProbeEdit-S").names() == plain
    assert {m for m in swept if m.startswith("pld-")} == {f"pld-{p}-k{k}" for p in ("latest", "earliest") for k in (10, 64, 256)}
    assert {m for m in plain if m.startswith("pld-")} == {"pld-latest-k10", "pld-earliest-k10"}
    for methods in (swept, plain):
        assert methods[0] == "ar" and {"copy-line-ideal", "copy-token-ideal", "copy-line-decoded", "copy-token-decoded"} <= set(methods)
    assert "copy-token-decoded" not in stage.settings(cfg(**{"e2e.overhead": []})).plan("qwen2.5-0.5b", "C").names()
    # every method is a typed value: no name is parsed back to find its k or policy
    assert all(isinstance(m, Method) for m in s.plan("smollm2-135m", "HEvalFix-Py").methods)


def test_the_default_plan_matches_the_rivals_standard_and_best_settings():
    """Issue 36.2: prompt lookup at transformers' policy and n-gram size, k 10/32/64, suffix decoding at
    the paper's tree depth, Copy-as-Decode with directives decoded beside the ideal variant."""
    s = stage.settings(BASE)
    assert s.plan("smollm2-135m", "HEvalFix-Py").names() == (
        "ar", "copy-line-decoded", "copy-token-decoded", "pld-earliest-k10", "pld-earliest-k32", "pld-earliest-k64",
        "suffix-k64", "copy-line-ideal", "copy-token-ideal")
    assert s.drafts.ngram_max == 2 and s.drafts.suffix.max_tree_depth == 64
    assert s.checks.lossless_levels == ("line",) and s.ci_level == 0.95


@pytest.mark.parametrize("key, value, message", [
    ("e2e.pld.policies", ["nearest"], "'e2e.pld.policies' has unknown values ['nearest']"),
    ("e2e.pld.k", [10, 10], "'e2e.pld.k' must be a non-empty list of distinct integers in [1, 4096]"),
    ("e2e.pld.k", [0], "(0 is out of range)"),
    ("e2e.pld.k", [5000], "(5000 is out of range)"),
    ("e2e.pld.sweep_models", ["gpt-9"], "'e2e.pld.sweep_models' has unknown values ['gpt-9']"),
    ("e2e.overhead", ["char"], "'e2e.overhead' has unknown values ['char']"),
    ("e2e.pld.sweep_corpora", ["HEvalFix-Go"], "'e2e.pld.sweep_corpora' has unknown values ['HEvalFix-Go']"),
    ("e2e.noisy_drift", 0, "'e2e.noisy_drift' must be a share > 0"),
    ("e2e.reference_budget_s", -1, "'e2e.reference_budget_s' must be > 0"),
    ("e2e.threads", 0, "'e2e.threads' must be a positive integer or null"),
    ("e2e.threads", 1.5, "'e2e.threads' must be a positive integer or null"),
    ("e2e.contention_slack", -0.5, "'e2e.contention_slack' must be a number of cores >= 0"),
    ("e2e.fit", "cubic", "'e2e.fit' must be one of interp, quadratic, roofline"),
    ("e2e.ar_grid", [0, 4], "'e2e.ar_grid' values must lie in [1, inf)"),
    ("e2e.mask_cost.model", "gpt-9", "'e2e.mask_cost.model' must be one of"),
    ("e2e.suffix.k", [64, 64], "'e2e.suffix.k' must be a list of distinct integers"),
    ("e2e.suffix.options.max_tree_depth", "deep", "'e2e.suffix.options.max_tree_depth' must be a finite number"),
    ("e2e.suffix.options.max_spec_factor", float("nan"), "'e2e.suffix.options.max_spec_factor' must be a finite number"),
    ("e2e.suffix.options.max_depth", 64, "'e2e.suffix.options.max_depth' is not a suffix decoding setting"),
    ("e2e.suffix.options", {"max_tree_depth": 64}, "'e2e.suffix.options' lacks ['max_spec_factor'"),
    ("e2e.suffix.options.min_token_prob", 2.0, "min_token_prob must be in [0, 1]"),
    ("e2e.lossless_levels", ["char"], "'e2e.lossless_levels' has unknown values ['char']"),
    ("e2e.ci.level", 1.5, "'e2e.ci.level' must lie in (0, 1)"),
    ("e2e.losslessness_tolerance", 0, "'e2e.losslessness_tolerance' must be > 0"),
])
def test_bad_e2e_params_are_named(key, value, message):
    with pytest.raises(ParamsError) as info:
        stage.settings(cfg(**{key: value}))
    assert message in str(info.value)


LINE = {"case_id": "C/1", "corpus": "HEvalFix-Py", "source": "a\nb\n", "target": "a\nB\n", "instruction": None,
        "program": '<copy lines="1-1"/><gen>B\n</gen>'}
TOKEN = dict(LINE, program='<copy lines="1-1"/><gen>B\n</gen>')


class ByteQwen:
    """A stand-in for the suite tokenizer: token bounds at every character."""

    def encode(self, text):
        from types import SimpleNamespace

        return SimpleNamespace(char_bounds=list(range(len(text) + 1)))


def job_for(s, line=LINE, token=TOKEN):
    tok = toy_model_tokenizer()
    return build_job(s.models[0], s, line, token, tok, tok.encode, ByteQwen())


def test_the_job_is_built_once_with_both_prompts_and_no_none_instruction():
    s = stage.settings(cfg())
    job = job_for(s)
    rewrite, program = (bytes(job.prompts[p]).decode() for p in ("rewrite", "program"))
    assert "None" not in rewrite and "None" not in program  # ProbeEdit-S has no instruction (review D16)
    assert "1: a" in program and "1: a" not in rewrite and "a\nb\n" in rewrite  # AR and PLD get the plain source
    with_text = job_for(s, dict(LINE, instruction="Capitalise b."))
    assert "Capitalise b." in bytes(with_text.prompts["rewrite"]).decode()
    assert bytes(job.gold).decode() == LINE["target"] and job.plan == s.plan("smollm2-135m", "HEvalFix-Py")
    # the curve spans the shortest prompt to the longest context any method reaches, and covers a k = 64 verify
    assert job.curve_contexts[0] == min(len(p) for p in job.prompts.values())
    assert job.curve_contexts[1] >= len(job.prompts["program"]) + len(job.gold)
    assert job.curve_sizes == (1, 4, 16, 64, 256)


def test_the_checkpoint_key_changes_with_every_setting_that_changes_a_measurement():
    def key(line=LINE, **changes):
        # with a k sweep and both policies, so that each of those settings has something to change
        s = stage.settings(cfg(**{"e2e.pld.sweep_k": [64, 256], "e2e.pld.policies": ["latest", "earliest"], **changes}))
        return checkpoint_key(CHECKPOINT_VERSION, job_for(s, line).key_parts(s, {"weights": "w"}))

    base = key()
    changed = {
        "policies": key(**{"e2e.pld.policies": ["latest"]}),
        "k": key(**{"e2e.pld.k": [12]}),
        "sweep_k": key(**{"e2e.pld.sweep_k": [128]}),
        "sweep_corpora": key(**{"e2e.pld.sweep_corpora": []}),
        "ngram": key(**{"e2e.pld.ngram_max": 3}),
        "suffix": key(**{"e2e.suffix.k": [32]}),
        "suffix options": key(**{"e2e.suffix.options.max_tree_depth": 32}),
        "overhead": key(**{"e2e.overhead": ["line"]}),
        "seed": key(**{"e2e.seed": 1}),
        "step pricing": key(**{"bounds.step_cost": "first_step"}),
        "steady fit": key(**{"bounds.steady_max_n": 4}),
        "repeats": key(**{"e2e.repeats": 3}),
        "threads": key(**{"e2e.threads": 2}),
        "default threads": key(**{"e2e.threads": None}),
        "fit": key(**{"e2e.fit": "quadratic"}),
        "ar grid": key(**{"e2e.ar_grid": [1, 4]}),
        "lossless": key(**{"e2e.lossless_levels": ["line", "token"]}),
        "instruction": key(dict(LINE, instruction="Capitalise b.")),
    }
    assert all(k != base for k in changed.values()), changed
    assert len(set(changed.values())) == len(changed)
    # the noisy threshold judges a run; it does not change what is measured
    assert key(**{"e2e.noisy_drift": 0.3}) == base
    assert key(**{"e2e.contention_slack": 1.0}) == base
    assert key(**{"e2e.ci.resamples": 10}) == base  # the CI is computed from the rows, after


def test_threads_default_to_one_and_null_means_torch_default():
    assert stage.settings(cfg()).environment.threads == 1
    assert stage.settings(cfg(**{"e2e.threads": None})).environment.threads is None
    assert stage.settings(cfg()).environment.rules.contention_slack == 0.5


# ---------------------------------------------------------------- order and per-pair ratios

def test_methods_run_in_the_seeded_interleaved_order_and_it_alternates():
    seed = "0/tiny/C/1"
    fake, records = e2e_measured(seed, 4)
    order = interleaved_order(E2E_PLAN.names(), 4, seed)
    assert [fake.calls[i:i + 5] for i in range(0, 20, 5)] == order
    assert all(order[r["repeat"]][r["order_index"]] == r["method"] for r in records)
    assert all(order[r] != order[r - 1] for r in range(1, 4))  # no repeat runs in its predecessor's order
    assert len({row[0] for row in order}) > 1 and len({row.index("ar") for row in order}) > 1
    assert e2e_measured(seed, 4)[0].calls == fake.calls  # the same seed, the same order
    assert fake.prompts == 2 * 4  # both prompts' prefills timed in every repeat
    assert all(r["prompt_seconds"] == 0.5 for r in records)
    others = {tuple(e2e_measured(f"{s}/tiny/C/1", 4)[0].calls) for s in range(1, 6)}
    assert others - {tuple(fake.calls)}  # the seed chooses the order


# ---------------------------------------------------------------- run environment

def test_environment_metrics_mark_a_drifting_run_noisy():
    from kernels_profile.measure.contention import EnvironmentRecorder
    from kernels_profile.measure.sidecar import environment_path

    samples = iter([1.0, 1.05, 1.3])
    recorder = EnvironmentRecorder(threshold=0.15, contention_slack=0.5, reference=lambda: next(samples), load=lambda: (1.0, 1.0, 1.0),
                                   other=lambda: 0.0, threads=lambda: 1, usable_cores=lambda: 2)
    recorder.start()
    recorder.sample()
    metrics = stage.environment_metrics(recorder.end())
    assert metrics["noisy"] is True and metrics["reference_drift"] == pytest.approx(0.3)
    assert metrics["noisy_reasons"] == ["reference drift 30% > 15%"] and metrics["contended"] is False
    assert metrics["threads"] == 1 and metrics["other_busy_cores_samples"] == [0.0, 0.0, 0.0]
    assert metrics["reference_samples"] == 3 and metrics["noisy_drift"] == 0.15
    assert environment_path(stage.E2E_MEASUREMENTS) == stage.E2E_MEASUREMENTS.with_name("measurements.environment.json")


# ---------------------------------------------------------------- on the tiny model

def test_environment_metrics_mark_a_contended_run_noisy_with_its_rule():
    from kernels_profile.measure.contention import EnvironmentRecorder

    recorder = EnvironmentRecorder(threshold=0.15, reference=lambda: 1.0, load=lambda: (1.0, 1.0, 1.0),
                                   other=lambda: 1.9, threads=lambda: 1, usable_cores=lambda: 2, contention_slack=0.5)
    recorder.start()
    metrics = stage.environment_metrics(recorder.end())
    assert metrics["noisy"] is True and metrics["contended"] is True and metrics["reference_drift"] == 0
    assert metrics["noisy_reasons"] == ["other load 1.9 busy cores > 1 free core + 0.5"]
    assert "(2 - 1 + 0.5)" in metrics["contention_rule"] and metrics["other_busy_cores"] == pytest.approx(1.9)


@pytest.mark.slow
def test_measure_job_on_the_tiny_model_fills_the_checkpoint_schema():
    pytest.importorskip("torch")
    from kernels_profile.runtime.models import build_model

    lm = build_model("tiny-qwen2", "random", "float32", "cpu")
    s = stage.settings(cfg(**{"e2e.repeats": 2, "e2e.pld.k": [4], "e2e.pld.sweep_models": [], "e2e.suffix.k": [3],
                              "e2e.pld.policies": ["latest", "earliest"], "e2e.overhead": ["line", "token"],
                              "e2e.lossless_levels": ["line", "token"], "e2e.prefill_grid": [1, 4, 16, 64],
                              "e2e.ar_steps": 8, "e2e.ar_grid": [1, 2, 4, 8]}))
    source, target = "alpha\nbeta\ngamma\n", "alpha\nBETA\ngamma\n"
    line = {"case_id": "C/1", "corpus": "C", "source": source, "target": target, "instruction": None,
            "program": '<copy lines="1-1"/><gen>BETA\n</gen><copy lines="3-3"/>'}
    job = job_for(s, line, dict(line))
    frame, curve = e2e.measure_job(lm, job, s, "run1")
    names = job.plan.names()
    assert stage.CHECKPOINT_COLUMNS <= set(frame.columns)
    assert frame.height == len(names) * 2 and set(frame["method"]) == set(names)
    assert frame["lossless_ok"].all() and (frame["run_id"] == "run1").all() and frame["lossless_levels"][0] == "line,token"
    assert curve.contexts == job.curve_contexts and curve.ar_points() == [1, 2, 4, 8]
    by = {m: frame.filter(pl.col("method") == m) for m in names}
    directive = by["copy-line-decoded"]["directive_tokens"][0]
    assert directive == len('<copy lines="1-1"/>') + len("<gen></gen>") + len('<copy lines="3-3"/>')
    # each of the two copies' tags ends with a token that rides with its prefill
    assert (by["copy-line-decoded"]["forwards"] - by["copy-line-ideal"].sort("repeat")["forwards"] == directive - 2).all()
    # every method is predicted, from its own forward log, against the same AR prediction
    assert frame["predicted_seconds"].is_not_null().all() and frame["predicted_ar_seconds"].n_unique() == 1
    assert by["copy-line-decoded"]["predicted_seconds"][0] > by["copy-line-ideal"]["predicted_seconds"][0]
    assert by["ar"]["predicted"][0] == pytest.approx(1.0)
    # AR and the drafters on the rewrite prompt, the programs on the program prompt, each prefill timed
    assert by["ar"]["prompt_tokens"][0] == len(job.prompts["rewrite"]) == by["suffix-k3"]["prompt_tokens"][0]
    assert by["copy-line-ideal"]["prompt_tokens"][0] == len(job.prompts["program"])
    assert (frame["prompt_seconds"] > 0).all()
    # the speculative methods' histograms (0..k) count every forward once
    for name, k in (("pld-latest-k4", 4), ("pld-earliest-k4", 4), ("suffix-k3", 3)):
        for hist, forwards in zip(by[name]["accept_hist"].to_list(), by[name]["forwards"].to_list()):
            assert len(hist) == k + 1 and sum(hist) == forwards
    assert by["ar"]["accept_hist"].is_null().all() and by["copy-line-ideal"]["accept_hist"].is_null().all()
    # the forward log: what the cache gained, run by run
    assert (by["ar"]["emitted"].list.sum() == len(job.gold)).all()


def fake_measure(calls):
    def measure(lm, job, s, run_id, drafters=None):
        calls.append(job.case_id)
        frame = pl.DataFrame({c: [1] * (len(job.plan.methods) * job.repeats) for c in stage.CHECKPOINT_COLUMNS})
        curve = LatencyCurve((CurvePoint(1, 5, 0.1 * len(calls)),), (CurvePoint(1, 5, 0.01),), (5, 9))
        return frame, curve
    return measure


def test_a_case_is_read_back_from_its_checkpoint_pair_and_measured_again_when_either_half_is_broken(tmp_path, monkeypatch):
    """The rows and the case's own curve are one unit: a resumed run reuses both, a missing or broken
    curve re-measures the case (its predictions came from that curve)."""
    monkeypatch.setattr(stage, "E2E_CHECKPOINTS", tmp_path)
    calls = []
    monkeypatch.setattr(stage.e2e, "measure_job", fake_measure(calls))
    s = stage.settings(cfg())
    job = job_for(s)
    key = checkpoint_key(CHECKPOINT_VERSION, job.key_parts(s, {}))
    first = stage.measured_case(None, job, s, key, "r", FromScratch())
    scratch = FromScratch()
    again = stage.measured_case(None, job, s, key, "r", scratch)
    assert len(calls) == 1 and again[1] == first[1] and again[0].equals(first[0])
    assert scratch.recorded >= 0 and scratch.measured_now == 0
    curve_file = next(tmp_path.glob("*.curve.json"))
    curve_file.write_text("{truncated")
    remeasured = stage.measured_case(None, job, s, key, "r", FromScratch())
    assert len(calls) == 2 and remeasured[1].prefill[0].median == pytest.approx(0.2)
    assert {p.suffix for p in tmp_path.iterdir()} == {".parquet", ".json"}


def test_a_very_long_case_id_gives_checkpoint_names_within_255_bytes_and_two_cut_ids_stay_apart(tmp_path, monkeypatch):
    """L2: an e2e checkpoint's name embedded the whole case id; a multi-file CommitEdits id (`<sha>:<long path>`,
    here 600 bytes with multi-byte characters across the cut) passed the 255 bytes of a file name. The id is
    cut at CASE_STEM_BYTES (on a character boundary, `/` as `_`); the key after it tells two ids apart that
    share the cut prefix. Both checkpoint pairs are written, read back, and lie in the checkpoints folder."""
    from kernels_profile.e2e.job import CASE_STEM_BYTES

    monkeypatch.setattr(stage, "E2E_CHECKPOINTS", tmp_path)
    calls = []
    monkeypatch.setattr(stage.e2e, "measure_job", fake_measure(calls))
    s = stage.settings(cfg())
    stem = "CommitEdits-express/0123456789abcdef0123456789abcdef01234567:" + "lib/" * 20 + "é" * 200
    ids = [stem + "a.js", stem + "b.js"]
    jobs = [job_for(s, dict(LINE, case_id=case_id), dict(TOKEN, case_id=case_id)) for case_id in ids]
    for job in jobs:
        assert len(job.case_id.encode()) > 255
        name = job.file_stem()
        assert "/" not in name and len(name.encode()) <= len(job.model.name) + 1 + CASE_STEM_BYTES
        name.encode("utf-8")  # the cut never splits a character
        key = checkpoint_key(CHECKPOINT_VERSION, job.key_parts(s, {}))
        stage.measured_case(None, job, s, key, "r", FromScratch())
        assert stage.measured_case(None, job, s, key, "r", FromScratch())[0].height > 0  # read back
    assert jobs[0].file_stem() == jobs[1].file_stem()  # the same cut prefix ...
    files = sorted(tmp_path.iterdir())
    assert len(files) == 4 and len(calls) == 2  # ... two pairs all the same: the keys differ, nothing overwritten
    assert all(len(f.name.encode()) <= 255 and f.parent == tmp_path for f in files)


# ---------------------------------------------------------------- the sample and the wide preset

def _corpus_table(corpus: str, lengths: list[int]) -> pl.DataFrame:
    rows = [{"corpus": corpus, "framing": "body", "case_id": f"{corpus}/{i:02d}", "level": level, "target": "x" * n}
            for i, n in enumerate(lengths) for level in ("line", "token")]
    return pl.DataFrame(rows)


def test_the_sample_is_stratified_by_output_length_and_seeded():
    # ids in an order unrelated to length: a stratum is a range of lengths, not of ids
    lengths = [50, 3, 91, 12, 77, 8, 64, 30, 99, 1, 45, 20]
    table = pl.concat([_corpus_table("A", lengths), _corpus_table("B", [5, 6])])
    by_id = {f"A/{i:02d}": n for i, n in enumerate(lengths)}
    thirds = [sorted(lengths)[0:4], sorted(lengths)[4:8], sorted(lengths)[8:12]]
    for seed in range(6):
        rows = sample_cases(table, (("A", 3), ("B", None)), "body", seed)
        chosen = sorted(set(rows.filter(pl.col("corpus") == "A")["case_id"].to_list()))
        assert len(chosen) == 3 and sorted(set(rows.filter(pl.col("corpus") == "B")["case_id"])) == ["B/00", "B/01"]
        assert sorted(by_id[c] for c in chosen) in [[a, b, c] for a in thirds[0] for b in thirds[1] for c in thirds[2]]
        again = sample_cases(table, (("A", 3), ("B", None)), "body", seed)
        assert again.equals(rows)  # seeded
    draws = {tuple(sorted(set(sample_cases(table, (("A", 3),), "body", seed)["case_id"])))
             for seed in range(6)}
    assert len(draws) > 1  # the seed draws within the strata
    plain = sample_cases(table, (("A", 3),), "body", 0, "none")
    assert plain["case_id"].n_unique() == 3
    with pytest.raises(ParamsError, match="e2e.stratify must be one of"):
        sample_cases(table, (("A", 3),), "body", 0, "by-size")
    assert strata(list(range(7)), 3) == [[0, 1, 2], [3, 4], [5, 6]]


PAPER_CORPORA = ("HEvalFix-Py", "HEvalFix-JS", "ProbeEdit-S")


def test_the_default_is_cheaper_and_the_wide_preset_holds_twelve_stratified_cases():
    default = stage.settings(BASE)
    assert default.preset is None and default.out is None and default.stratify == "target_length"
    counts = dict(default.models[0].sample)
    assert "ProbeEdit-S" not in counts and sum(counts.values()) <= 5  # the 800-token case left the default
    wide = stage.settings(BASE, preset="e2e-wide")
    assert wide.preset == "e2e-wide" and str(wide.out) == "data/e2e/e2e-wide"
    sample = dict(wide.models[0].sample)
    assert sum(sample.values()) >= 12 and all(sample[c] >= 3 for c in PAPER_CORPORA)
    assert sum(n for c, n in sample.items() if c.startswith("CommitEdits")) >= 3
    assert wide.stratify == "target_length" and wide.seed == default.seed
    assert sum(n for c, n in sample.items() if c.startswith("HEvalFix")) >= 6
    assert wide.checks.hf_pld_cases == 0 and wide.checks.constrained_cases == 0 and wide.repeats == default.repeats
    assert wide.plan("smollm2-135m", "ProbeEdit-S").names() == default.plan("smollm2-135m", "HEvalFix-Py").names()
    rehearsal = stage.settings(BASE, preset="e2e-rehearsal")
    assert sum(n for _, n in rehearsal.models[0].sample) == 2 and rehearsal.plan("smollm2-135m", "HEvalFix-Py") == \
        wide.plan("smollm2-135m", "HEvalFix-Py")  # the rehearsal measures what the wide run measures
    assert str(stage.settings(BASE, preset="e2e-wide", out="runs/w").out) == "runs/w"
    with pytest.raises(ParamsError, match="lies outside the output root"):  # issue 39, H4: inside the tree only
        stage.settings(BASE, preset="e2e-wide", out="/tmp/w")
    with pytest.raises(ParamsError, match="unknown preset 'e2e-huge'"):
        stage.settings(BASE, preset="e2e-huge")
    with pytest.raises(ParamsError, match="--out names a preset run's folder"):
        stage.settings(BASE, out="/tmp/w")


def test_the_cli_passes_the_preset_and_its_folder():
    from analysis import cli

    args = cli.build_parser().parse_args(["e2e", "--preset", "e2e-wide", "--out", "data/e2e/wide"])
    args.out = getattr(args, "raw_out", None)
    s = cli.stage_settings(stage, args, Config.load(ROOT / "params.yaml"))
    assert s.preset == "e2e-wide" and str(s.out) == "data/e2e/wide"
    assert cli.main(["--out", "/tmp/x", "e2e", "--preset", "e2e-wide"]) == 2  # not a one-off output root


def test_a_preset_run_writes_a_folder_the_reports_read_as_a_frozen_run(tmp_path, monkeypatch):
    """`copydecode e2e --preset e2e-wide --out DIR` (the measurement faked): every output lands in DIR,
    nothing under reports/, and DIR copied to reports/e2e/frozen/e2e-wide/ is what analysis.results.e2e reads."""
    from analysis.results.e2e import FROZEN_FILES, read_frozen

    frames = []
    for case_id, corpus in (("HEvalFix-Py/1", "HEvalFix-Py"), ("ProbeEdit-S/1", "ProbeEdit-S")):
        fake = FakeExecutor(E2E_COSTS, [1.0, 1.0], len(E2E_PLAN.methods))
        records = e2e.measure_case({"rewrite": fake, "program": fake}, [1, 2, 3, 4], E2E_SEGMENTS, E2E_PLAN, 2, case_id,
                                   fake_drafters)
        frames.append(pl.DataFrame(records, schema_overrides={"accept_hist": pl.List(pl.Int64)}).with_columns(
            case_id=pl.lit(case_id), corpus=pl.lit(corpus), model=pl.lit("smollm2-135m"), gold_tokens=pl.lit(4),
            predicted_seconds=pl.col("seconds") * 1.1, predicted_ar_seconds=pl.lit(8.8), predicted=pl.lit(1.0),
            extrapolated_spans=pl.lit(0), lossless_ok=pl.lit(True), lossless_rel_diff=pl.lit(1e-7),
            lossless_levels=pl.lit("line")))

    class FakeEnv:
        machine, noisy = {"cpu_model": "test", "usable_cores": 2, "torch_threads": 1}, False

        def to_json(self):
            return {"noisy": False}

    class FakeRecorder:
        run_id = "r"

        def __init__(self, **_):
            pass

        def start(self):
            pass

        def end(self):
            return FakeEnv()

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(stage, "cases_with_instructions", lambda: pl.DataFrame(
        {"corpus": ["HEvalFix-Py"], "framing": ["body"], "case_id": ["HEvalFix-Py/1"], "level": ["line"], "target": ["x"]}))
    monkeypatch.setattr(stage, "EnvironmentRecorder", FakeRecorder)
    monkeypatch.setattr(stage, "run_models", lambda *a: {"smollm2-135m": {"measurements": pl.concat(frames),
                                                                          "latency_curves": {}}})
    monkeypatch.setattr(stage, "environment_metrics", lambda env: {"noisy": False})
    monkeypatch.setattr(stage, "set_threads", lambda threads: threads)
    monkeypatch.setattr(stage, "sample_cases", lambda table, *a: table)
    s = stage.settings(BASE, preset="e2e-wide", out=str(tmp_path / "wide"))
    result = stage.run(s)
    assert result["pooled"]["smollm2-135m/pooled/copy-line-ideal"]["cases"] == 2
    assert {p.name for p in (tmp_path / "wide").iterdir()} >= set(FROZEN_FILES)
    assert not (tmp_path / "reports").exists()  # a preset run leaves the default outputs alone
    run = json.loads((tmp_path / "wide" / "run.json").read_text())
    assert run["preset"] == "e2e-wide" and run["command"].startswith("copydecode e2e --preset e2e-wide --out ")
    assert run["seconds"] >= 0 and "commit" in run and run["machine"]["cpu_model"] == "test"
    frozen = read_frozen(tmp_path / "wide" / "..", "wide")
    assert frozen.case_count == 2 and frozen.stale is None
    assert frozen.pooled.filter(pl.col("pool") == "pooled").height == len(E2E_PLAN.methods)
    assert set(frozen.pooled["pool"]) == {"HEvalFix-Py", "ProbeEdit-S", "HEvalFix", "pooled"}
