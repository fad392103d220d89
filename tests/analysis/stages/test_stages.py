"""The stage layer: settings validated up front, named errors for bad inputs, atomic outputs, no run
times in the DVC-tracked metrics. Stages run in a scratch folder on a handful of HumanEvalPack cases."""

import json
import os
import signal
import subprocess
import sys

import polars as pl
import pytest
import yaml
from fixtures import ROOT, params_with

from analysis.cli import main
from analysis.pipeline.config import Config
from analysis.errors import CorpusError, ParamsError

pytestmark = pytest.mark.slow  # stage runs in scratch folders, one per test

BASE = yaml.safe_load((ROOT / "params.yaml").read_text())


def write_params(folder, **changes) -> None:
    (folder / "params.yaml").write_text(yaml.safe_dump(params_with(**changes)))


@pytest.fixture()
def scratch(tmp_path, monkeypatch, hep_dir):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("COPYDECODE_HUMANEVALPACK_DIR", raising=False)
    write_params(tmp_path, **{
        "corpora.humanevalpack.languages": ["python"], "corpora.humanevalpack.framings": ["body"],
        "corpora.humanevalpack.local_dir": str(hep_dir), "corpora.probeedit.enabled": False, "corpora.commits": [],
        "corpora.datasets": [],
        "spans.bootstrap_resamples": 20, "perturb.seeds": 1, "perturb.rates": [0.0, 1.0],
    })
    return tmp_path


def run(*args) -> int:
    return main(["--params", "params.yaml", *args])


def test_stages_run_and_keep_run_times_out_of_tracked_metrics(scratch):
    for stage in ("corpora", "programs", "roundtrip", "spans", "perturb", "formats"):
        assert run(stage) == 0, stage
    for name in ("corpora", "roundtrip", "coverage", "perturbation", "formats"):
        text = (scratch / "reports/metrics" / f"{name}.json").read_text()
        assert "seconds" not in text, name
    assert json.loads((scratch / "data/timings/spans.json").read_text())["seconds"] > 0
    roundtrip = json.loads((scratch / "reports/metrics/roundtrip.json").read_text())
    assert roundtrip["programs"] == 2 * 164 and roundtrip["failed"] == 0


@pytest.mark.parametrize("key, value, message", [
    ("spans.ci", -0.5, "'spans.ci' is a confidence level"),
    ("spans.ci", 1.5, "'spans.ci' is a confidence level"),
    ("bounds.ci", -0.5, "'bounds.ci' is a confidence level"),
    ("perturb.levels", ["line", "chars"], "'perturb.levels' has unknown values ['chars']"),
    ("perturb.levels", ["char"], "'perturb.levels' has unknown values ['char']"),
    ("perturb.framings", ["bogus"], "'perturb.framings' has unknown values ['bogus']"),
    ("perturb.kinds", [], "'perturb.kinds' must not be empty"),
    ("perturb.rates", ["abc"], "'perturb.rates' must hold numbers, got 'abc'"),
    ("spans.chart_framing", "bogus", "'spans.chart_framing' must be one of"),
    ("kernel.baselines", [], "'kernel.baselines' must not be empty"),
    ("corpora.probeedit.mix", {"delete_line": "abc"}, "'corpora.probeedit.mix.delete_line' must be a number"),
    ("e2e.hf_pld.cases", -1, "'e2e.hf_pld.cases' must be >= 0"),
    ("e2e.lossless_levels", ["char"], "'e2e.lossless_levels' has unknown values ['char']"),
    ("e2e.models", [{"name": "smollm2-135m", "weights": "gguf", "dtype": "float32", "sample": {"HEvalFix-Py": -2}}],
     "e2e.models[0].sample.HEvalFix-Py must be an integer >= 1"),
])
def test_bad_params_are_named_before_anything_is_written(scratch, key, value, message):
    write_params(scratch, **{key: value, "corpora.probeedit.enabled": True})
    cfg = Config.load(scratch / "params.yaml")
    stage = key.split(".")[0]
    module = {"spans": "analysis.stages.spans", "bounds": "analysis.stages.bounds", "kernel": "analysis.stages.bounds", "perturb": "analysis.stages.perturb",
              "corpora": "analysis.stages.corpora", "e2e": "kernels_profile.stages.e2e"}[stage]
    import importlib

    with pytest.raises(ParamsError) as info:
        importlib.import_module(module).settings(cfg.params)
    assert message in str(info.value)
    assert not (scratch / "reports").exists() and not (scratch / "data").exists()


def test_unknown_profile_device_is_a_params_error():
    from kernels_profile.stages.profile import settings

    params = json.loads(json.dumps(BASE))
    params["kernels"]["profile"]["device"] = "tpu"
    with pytest.raises(ParamsError, match="kernels.profile.device must be one of cpu, cuda, got 'tpu'"):
        settings(params)


def test_malformed_params_yaml_is_a_named_error(scratch, capsys):
    (scratch / "params.yaml").write_text("spans: [unclosed\n")
    assert run("spans") == 2
    assert "params.yaml: not valid YAML" in capsys.readouterr().err


def test_an_empty_corpus_is_an_error(scratch, capsys):
    write_params(scratch, **{"corpora.humanevalpack.languages": [], "corpora.probeedit.enabled": False,
                             "corpora.commits": [], "corpora.datasets": []})
    assert run("corpora") == 2
    assert "no corpus selected" in capsys.readouterr().err
    assert not (scratch / "data").exists()


@pytest.mark.parametrize("damage", ["truncate", "garbage", "missing"])
def test_damaged_programs_table_is_named(scratch, capsys, damage):
    assert run("corpora") == 0 and run("programs") == 0
    path = scratch / "data/programs/programs.parquet"
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:200])
    elif damage == "garbage":
        path.write_bytes(b"not a parquet file at all")
    else:
        path.unlink()
    assert run("spans") == 2
    err = capsys.readouterr().err
    assert "data/programs/programs.parquet" in err and "Traceback" not in err


def test_null_source_in_cases_is_named(scratch, capsys):
    assert run("corpora") == 0
    path = scratch / "data/corpora/cases.parquet"
    frame = pl.read_parquet(path)
    frame.with_columns(source=pl.when(pl.col("case_id") == frame["case_id"][0]).then(None).otherwise(pl.col("source"))
                       ).write_parquet(path)
    with pytest.raises(CorpusError, match="source"):
        from analysis.corpora.cases import cases_from_frame, read_cases

        cases_from_frame(read_cases(path))


def test_outputs_are_written_atomically(tmp_path):
    from analysis.pipeline.io import write_json, write_table

    target = tmp_path / "t.json"
    write_json({"a": 1}, target)

    class Boom(Exception):
        pass

    class Exploding(dict):
        def items(self):
            raise Boom

    with pytest.raises(Exception):
        write_json(Exploding(), target)
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]  # no temporary file left behind
    write_table(pl.DataFrame({"x": [1.0]}), tmp_path / "tab")
    assert (tmp_path / "tab.csv").read_text().startswith("x")


def test_a_killed_stage_leaves_every_output_whole(scratch):
    """SIGKILL while `spans` writes: each output is the old file or the new one, never a torn one."""
    assert run("corpora") == 0 and run("programs") == 0 and run("spans") == 0
    outputs = sorted((scratch / "reports").rglob("*.*")) + sorted((scratch / "data/spans").glob("*"))
    before = {p: p.read_bytes() for p in outputs}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "analysis.cli", "spans"], cwd=scratch, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc.wait(timeout=4)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    for path, old in before.items():
        data = path.read_bytes()
        if path.suffix == ".parquet":
            pl.read_parquet(path)  # whole
        elif path.suffix == ".json":
            json.loads(data)
        assert len(data) > 0
    assert not [p for p in scratch.rglob(".*") if p.is_file() and p.name.startswith(".") and p.suffix in (".json", ".csv", ".md", ".parquet")
                and p.parent.name != ".dvc"] or proc.returncode != 0
