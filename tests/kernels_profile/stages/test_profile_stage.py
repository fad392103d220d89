"""kernels_profile.stages.profile: the command line over kernels.profile (--contexts/--ns as integers
in any spelling, --weights), the spec built from exactly its fields, and where the raw timings go
(params, preset, --model, --out)."""

import pytest
from fixtures import params_with

from analysis.errors import ParamsError
from analysis.layout import KERNELS_RAW
from kernels_profile.stages.profile import command_line, kernel_source_name, settings, spec_of

GROUP = params_with()["kernels"]["profile"]


@pytest.mark.parametrize("given, parsed", [("256,2048", [256, 2048]), ("256 2048", [256, 2048]),
                                           (["1,2", "3"], [1, 2, 3]), (("7",), [7])])
def test_contexts_and_ns_take_integers_in_any_spelling(given, parsed):
    group = command_line(GROUP, None, None, None, given, given, None)
    assert group["contexts"] == parsed == group["ns"]


def test_the_command_line_replaces_only_what_it_names():
    group = command_line(GROUP, "org/Model", "cuda", None, None, None, "real")
    assert (group["models"], group["device"], group["weights"]) == (["org/Model"], "cuda", "real")
    assert {k: v for k, v in group.items() if k not in ("models", "device", "weights")} == \
        {k: v for k, v in GROUP.items() if k not in ("models", "device", "weights")}
    assert command_line(GROUP, None, None, None, None, None, None) == GROUP


@pytest.mark.parametrize("options, message", [
    ({"contexts": "256,two"}, "--contexts takes integers \\(e.g. --contexts 256,2048\\), got '256 two'"),
    ({"ns": "1.5"}, "--ns takes integers"),
    ({"weights": "pretrained"}, "--weights must be one of random, real, got 'pretrained'"),
    ({"weights": "real"}, "--weights real loads the weights of --model"),
])
def test_bad_command_line_values_are_named(options, message):
    with pytest.raises(ParamsError, match=message):
        settings(params_with(), **options)


@pytest.mark.parametrize("change, message", [
    ({"device": "tpu"}, "kernels.profile.device must be one of cpu, cuda, got 'tpu'"),
    ({"colour": "red"}, "kernels.profile: unknown settings \\['colour'\\]"),
    ({"ns": 8}, "kernels.profile.ns must be a list, got 8"),
])
def test_the_spec_takes_exactly_its_fields(change, message):
    with pytest.raises(ParamsError, match=message):
        spec_of({**GROUP, **change})
    missing = dict(GROUP)
    missing.pop("contexts")
    with pytest.raises(ParamsError, match="kernels.profile: missing settings \\['contexts'\\]"):
        spec_of(missing)


def test_the_raw_file_is_named_by_out_model_preset_or_params(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # --out names a file inside the tree (issue 39, H4)
    params = params_with()
    assert settings(params).out == KERNELS_RAW and settings(params).source is None
    own = settings(params, model="meta-llama/Llama-3.2-1B", device="cpu")
    assert own.source == kernel_source_name("meta-llama/Llama-3.2-1B", "cpu") == "llama-3.2-1b-cpu"
    assert own.out == KERNELS_RAW.parent / "llama-3.2-1b-cpu.parquet" and own.spec.models == ("meta-llama/Llama-3.2-1B",)
    assert settings(params, model="x/y", out=tmp_path / "mine.parquet").out == tmp_path / "mine.parquet"
    params["kernels"]["presets"]["bare"] = {"ns": [1, 2]}
    bare = settings(params, "bare")
    assert str(bare.out) == "data/kernels/bare.parquet" and bare.spec.ns == (1, 2) and bare.preset == "bare"
