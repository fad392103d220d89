"""The e2e stage's measurement plan, run order, per-pair ratios, like-for-like summary, checkpoint key
and run environment; the model-running parts on the tiny random model with a byte tokenizer."""

import json

import polars as pl
import pytest
import yaml
from fixtures import E2E_COSTS, E2E_PLAN, E2E_SEGMENTS, ROOT, FakeExecutor, ToyTokenizer, e2e_measured, params_with

from analysis.pipeline.config import Config
from analysis.errors import ParamsError
from kernels_profile.e2e import methods as e2e
from kernels_profile.e2e import predict as e2e_predict
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
    swept = s.plan("smollm2-135m", "HEvalFix-Py").methods()
    plain = s.plan("qwen2.5-0.5b", "HEvalFix-Py").methods()
    assert s.plan("smollm2-135m", "ProbeEdit-S").methods() == plain
    assert {m for m in swept if m.startswith("pld_")} == {f"pld_{p}_k{k}" for p in ("latest", "earliest") for k in (10, 64, 256)}
    assert {m for m in plain if m.startswith("pld_")} == {"pld_latest_k10", "pld_earliest_k10"}
    for methods in (swept, plain):
        assert methods[0] == "ar" and {"cad_line", "cad_token", "cad_line_overhead", "cad_token_overhead"} <= set(methods)
    assert stage.settings(cfg(**{"e2e.overhead": []})).plan("qwen2.5-0.5b", "C").methods()[-1] == "cad_token"
    assert e2e.method_label("pld_earliest_k64") == "PLD (earliest) with gold acceptance, k=64"
    assert e2e.method_label("cad_token_overhead") == "Copy-as-Decode, token level, directive tokens decoded"


@pytest.mark.parametrize("key, value, message", [
    ("e2e.pld.policies", ["nearest"], "'e2e.pld.policies' has unknown values ['nearest']"),
    ("e2e.pld.k", [10, 10], "'e2e.pld.k' lists a value twice"),
    ("e2e.pld.k", [0], "'e2e.pld.k' values must lie in [1, inf)"),
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
])
def test_bad_e2e_params_are_named(key, value, message):
    with pytest.raises(ParamsError) as info:
        stage.settings(cfg(**{key: value}))
    assert message in str(info.value)


def test_the_checkpoint_key_changes_with_every_setting_that_changes_a_measurement():
    line = {"case_id": "C/1", "corpus": "HEvalFix-Py", "source": "a\n", "target": "a\n", "program": '<copy lines="1-1"/>'}
    token = dict(line, program='<copy tokens="1-1"/>')

    def key(**changes):
        # with a k sweep and both policies, so that each of those settings has something to change
        s = stage.settings(cfg(**{"e2e.pld.sweep_k": [64, 256], "e2e.pld.policies": ["latest", "earliest"], **changes}))
        return checkpoint_key(stage.CHECKPOINT_VERSION,
                              stage.case_key_parts(s.models[0], s, line, token, [1, 2], {"curve": 1}, 2, True))

    base = key()
    changed = {
        "policies": key(**{"e2e.pld.policies": ["latest"]}),
        "k": key(**{"e2e.pld.k": [12]}),
        "sweep_k": key(**{"e2e.pld.sweep_k": [64]}),
        "sweep_corpora": key(**{"e2e.pld.sweep_corpora": []}),
        "ngram": key(**{"e2e.pld.ngram_max": 2}),
        "overhead": key(**{"e2e.overhead": ["line"]}),
        "seed": key(**{"e2e.seed": 1}),
        "repeats": key(**{"e2e.repeats": 3}),
        "threads": key(**{"e2e.threads": 2}),
        "default threads": key(**{"e2e.threads": None}),
        "fit": key(**{"e2e.fit": "quadratic"}),
    }
    assert all(k != base for k in changed.values()), changed
    assert len(set(changed.values())) == len(changed)
    # the noisy threshold judges a run; it does not change what is measured
    assert key(**{"e2e.noisy_drift": 0.3}) == base
    assert key(**{"e2e.contention_slack": 1.0}) == base
    # the default fit form is not in the key: checkpoints written before it was a setting stay valid
    s = stage.settings(cfg())
    assert s.fit == stage.KEYLESS_FIT and "fit" not in stage.case_key_parts(s.models[0], s, line, token, [1], {}, 2, True)


def test_threads_default_to_one_and_null_means_torch_default():
    assert stage.settings(cfg()).threads == 1
    assert stage.settings(cfg(**{"e2e.threads": None})).threads is None
    assert stage.settings(cfg()).contention_slack == 0.5


# ---------------------------------------------------------------- order and per-pair ratios

def test_methods_run_in_the_seeded_interleaved_order_and_it_alternates():
    seed = e2e.order_seed(0, "tiny", "C/1")
    fake, records = e2e_measured(seed, 4)
    order = interleaved_order(E2E_PLAN.methods(), 4, seed)
    assert [fake.calls[i:i + 5] for i in range(0, 20, 5)] == order
    assert all(order[r["repeat"]][r["order_index"]] == r["method"] for r in records)
    assert all(order[r] != order[r - 1] for r in range(1, 4))  # no repeat runs in its predecessor's order
    assert len({row[0] for row in order}) > 1 and len({row.index("ar") for row in order}) > 1
    assert e2e_measured(seed, 4)[0].calls == fake.calls  # the same seed, the same order
    others = {tuple(e2e_measured(e2e.order_seed(s, "tiny", "C/1"), 4)[0].calls) for s in range(1, 6)}
    assert others - {tuple(fake.calls)}  # the seed chooses the order


# ---------------------------------------------------------------- run environment

def test_environment_metrics_mark_a_drifting_run_noisy():
    from kernels_profile.measure.contention import EnvironmentRecorder
    from kernels_profile.measure.session import environment_path

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

def synthetic_model():
    curve = {"context": 16,
             "prefill": [{"n": n, "context": 16, "median": 0.01 + 0.001 * n} for n in (1, 4, 16, 64, 256)],
             "ar": [{"n": n, "context": 16, "median": 0.01 * n} for n in (1, 2, 4, 8, 16, 32)]}
    return e2e_predict.curve_model(curve, "tiny", "interp")


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
def test_measure_one_on_the_tiny_model_fills_the_checkpoint_schema(qwen):
    pytest.importorskip("torch")
    from kernels_profile.runtime.models import build_model

    lm = build_model("tiny-qwen2", "random", "float32", "cpu")
    loaded = ModelAndTokenizer(lm, ToyTokenizer.bytes_then(), ())
    s = stage.settings(cfg(**{"e2e.repeats": 2, "e2e.pld.k": [4], "e2e.pld.sweep_models": [],
                              "e2e.pld.policies": ["latest", "earliest"], "e2e.overhead": ["line", "token"]}))
    source, target = "alpha\nbeta\ngamma\n", "alpha\nBETA\ngamma\n"
    line = {"case_id": "C/1", "corpus": "C", "source": source, "target": target,
            "program": '<copy lines="1-1"/><gen>BETA\n</gen><copy lines="3-3"/>'}
    token = dict(line)
    prompt = list(b"edit:\n" + source.encode())
    frame = stage.measure_one(loaded, s.models[0], s, line, token, prompt, synthetic_model(), 16, True, qwen, "run1")
    methods = s.plan(s.models[0].name, "C").methods()
    assert stage.CHECKPOINT_COLUMNS <= set(frame.columns)
    assert frame.height == len(methods) * 2 and set(frame["method"]) == set(methods)
    assert frame["lossless_ok"].all() and (frame["run_id"] == "run1").all()
    by = {m: frame.filter(pl.col("method") == m) for m in methods}
    directive = by["cad_line_overhead"]["directive_tokens"][0]
    assert directive == len('<copy lines="1-1"/>') + len("<gen></gen>") + len('<copy lines="3-3"/>')
    assert (by["cad_line_overhead"]["forwards"] - by["cad_line"].sort("repeat")["forwards"]
            == directive).all()
    ideal, overhead = by["cad_line"]["predicted"][0], by["cad_line_overhead"]["predicted"][0]
    assert overhead < ideal
    # the same regeneration cost under both variants; the overhead adds d * t_step to the program
    assert by["cad_line"]["predicted_ar_seconds"][0] == by["cad_line_overhead"]["predicted_ar_seconds"][0]
    t_step = float(synthetic_model().t_step(16, extrapolate=True).seconds)
    assert (by["cad_line_overhead"]["predicted_seconds"][0] - by["cad_line"]["predicted_seconds"][0]
            == pytest.approx(directive * t_step))
    assert by["ar"]["predicted"].is_null().all() and by["pld_latest_k4"]["predicted"].is_null().all()
    # PLD drafts from the plain source: its acceptance histogram (0..k) counts every forward once
    for pld in ("pld_latest_k4", "pld_earliest_k4"):
        for hist, forwards in zip(by[pld]["accept_hist"].to_list(), by[pld]["forwards"].to_list()):
            assert len(hist) == 5 and sum(hist) == forwards
    assert sum(by["pld_latest_k4"]["accept_hist"][0][1:]) > 0  # some draft was accepted
    assert by["ar"]["accept_hist"].is_null().all() and by["cad_line"]["accept_hist"].is_null().all()


def test_the_latency_curve_is_measured_once_and_reused_on_resume(tmp_path, monkeypatch):
    """Its timings key every case's checkpoint, so a resumed run must get the very same curve back."""
    monkeypatch.setattr(stage, "E2E_CHECKPOINTS", tmp_path)
    calls = []

    def fake_curve(lm, grid, ar_grid, ar_steps, contexts, repeats):
        calls.append(1)
        return {"prefill": [{"n": 1, "context": contexts[0], "median": 0.1 * len(calls)}],
                "ar": [{"n": n, "context": contexts[0], "median": 0.01 * n} for n in e2e_predict.ar_points(ar_grid, ar_steps)],
                "contexts": list(contexts)}

    monkeypatch.setattr(e2e_predict, "latency_curve", fake_curve)
    settings = stage.settings(Config.load(ROOT / "params.yaml").params)
    choice = settings.models[0]
    loaded = ModelAndTokenizer(lm=None, hf_tok=None, eos_ids=())
    first = stage.cached_curve(loaded, choice, settings, (300, 900))
    again = stage.cached_curve(loaded, choice, settings, (300, 900))
    assert first == again and len(calls) == 1
    other = stage.cached_curve(loaded, choice, settings, (301, 900))  # another context is another curve
    assert len(calls) == 2 and other != first
    before = {p.name for p in tmp_path.glob("*-curve-*.json")}
    for path in tmp_path.glob("*-curve-*.json"):
        if json.loads(path.read_text())["contexts"][0] == 300:
            path.write_text("{truncated")
    scratch = FromScratch()
    remeasured = stage.cached_curve(loaded, choice, settings, (300, 900), scratch)
    assert len(calls) == 3 and remeasured["prefill"][0]["median"] == pytest.approx(0.3)
    stage.cached_curve(loaded, choice, settings, (301, 900), scratch)  # read back: its recorded seconds count
    assert scratch.measured_now > 0 and scratch.recorded > scratch.measured_now
    assert {p.name for p in tmp_path.glob("*-curve-*.json")} == before


def test_the_curve_keeps_the_ar_steps_params_name():
    assert e2e_predict.ar_points((1, 2, 4, 8, 16, 32), 32) == [1, 2, 4, 8, 16, 32]
    assert e2e_predict.ar_points((1, 4, 64), 10) == [1, 4, 10]
    s = stage.settings(cfg(**{"e2e.ar_grid": [1, 3], "e2e.fit": "quadratic"}))
    assert s.ar_grid == (1, 3) and s.fit == "quadratic"


def test_a_changed_ar_grid_measures_the_curve_again(tmp_path, monkeypatch):
    """The AR grid is not part of the curve's key (the key format is kept): a curve holding other AR
    steps than params ask for is measured again, and its new timings then re-key every case."""
    monkeypatch.setattr(stage, "E2E_CHECKPOINTS", tmp_path)
    calls = []

    def fake_curve(lm, grid, ar_grid, ar_steps, contexts, repeats):
        calls.append(ar_grid)
        return {"prefill": [], "contexts": list(contexts),
                "ar": [{"n": n, "context": c, "median": 0.01 * n} for c in contexts for n in e2e_predict.ar_points(ar_grid, ar_steps)]}

    monkeypatch.setattr(e2e_predict, "latency_curve", fake_curve)
    loaded = ModelAndTokenizer(lm=None, hf_tok=None, eos_ids=())
    default = stage.settings(cfg())
    first = stage.cached_curve(loaded, default.models[0], default, (300, 900))
    assert stage.cached_curve(loaded, default.models[0], default, (300, 900)) == first and len(calls) == 1
    coarse = stage.settings(cfg(**{"e2e.ar_grid": [1, 8]}))
    again = stage.cached_curve(loaded, coarse.models[0], coarse, (300, 900))
    assert len(calls) == 2 and e2e_predict.curve_ar_points(again) == [1, 8, 32]


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
        rows = e2e.sample_cases(table, (("A", 3), ("B", None)), "body", seed)
        chosen = sorted(set(rows.filter(pl.col("corpus") == "A")["case_id"].to_list()))
        assert len(chosen) == 3 and sorted(set(rows.filter(pl.col("corpus") == "B")["case_id"])) == ["B/00", "B/01"]
        assert sorted(by_id[c] for c in chosen) in [[a, b, c] for a in thirds[0] for b in thirds[1] for c in thirds[2]]
        again = e2e.sample_cases(table, (("A", 3), ("B", None)), "body", seed)
        assert again.equals(rows)  # seeded
    draws = {tuple(sorted(set(e2e.sample_cases(table, (("A", 3),), "body", seed)["case_id"])))
             for seed in range(6)}
    assert len(draws) > 1  # the seed draws within the strata
    plain = e2e.sample_cases(table, (("A", 3),), "body", 0, "none")
    assert plain["case_id"].n_unique() == 3
    with pytest.raises(ParamsError, match="e2e.stratify must be one of"):
        e2e.sample_cases(table, (("A", 3),), "body", 0, "by-size")
    assert e2e._strata(list(range(7)), 3) == [[0, 1, 2], [3, 4], [5, 6]]


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
    assert wide.hf_pld_cases == 0 and wide.constrained_cases == 0 and wide.repeats == default.repeats
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
        fake = FakeExecutor(E2E_COSTS, [1.0, 1.0], len(E2E_PLAN.methods()))
        frames.append(pl.DataFrame(e2e.measure_case(fake, [1, 2, 3, 4], E2E_SEGMENTS, E2E_PLAN, 2, case_id),
                                   schema_overrides={"accept_hist": pl.List(pl.Int64)}).with_columns(
            case_id=pl.lit(case_id), corpus=pl.lit(corpus), model=pl.lit("smollm2-135m"), gold_tokens=pl.lit(4),
            lossless_ok=pl.lit(None, dtype=pl.Boolean), lossless_rel_diff=pl.lit(None, dtype=pl.Float64)))

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
    monkeypatch.setattr(stage, "run_model", lambda *a: {"measurements": pl.concat(frames), "latency_curve": {}})
    monkeypatch.setattr(stage, "environment_metrics", lambda env: {"noisy": False})
    monkeypatch.setattr(stage, "set_threads", lambda threads: threads)
    monkeypatch.setattr(stage.e2e, "sample_cases", lambda table, *a: table)
    s = stage.settings(BASE, preset="e2e-wide", out=str(tmp_path / "wide"))
    result = stage.run(s)
    assert result["pooled"]["smollm2-135m/pooled/cad_line"]["cases"] == 2
    assert {p.name for p in (tmp_path / "wide").iterdir()} >= set(FROZEN_FILES)
    assert not (tmp_path / "reports").exists()  # a preset run leaves the default outputs alone
    run = json.loads((tmp_path / "wide" / "run.json").read_text())
    assert run["preset"] == "e2e-wide" and run["command"].startswith("copydecode e2e --preset e2e-wide --out ")
    assert run["seconds"] >= 0 and "commit" in run and run["machine"]["cpu_model"] == "test"
    frozen = read_frozen(tmp_path / "wide" / "..", "wide")
    assert frozen.case_count == 2 and frozen.pooled.filter(pl.col("pool") == "pooled").height == len(E2E_PLAN.methods())
