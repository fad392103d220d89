"""kernels_profile.tools.bench_mask: the mask benchmark's settings (params decode.mask_benchmark, the
command line replacing what it names, bad values named) and what a run returns and writes."""

import json

import pytest
from fixtures import params_with

from analysis.errors import ParamsError
from kernels_profile.decode import maskbench
from kernels_profile.tools.bench_mask import run, settings


def test_bench_mask_settings_come_from_params_and_the_command_line_replaces_what_it_names():
    params = params_with(**{"decode.mask_benchmark.threads": 2})
    plain = settings(params)
    assert plain.threads == 2 and plain.programs == params["decode"]["mask_benchmark"]["programs"]
    over = settings(params, programs=3, models=["smollm2-135m"])
    assert (over.programs, over.models, over.lines) == (3, ("smollm2-135m",), plain.lines)


@pytest.mark.parametrize("options, message", [
    ({"programs": -1}, "decode.mask_benchmark.programs"),
    ({"lines": 0}, "decode.mask_benchmark.lines"),
    ({"models": ["gpt-9"]}, "decode.mask_benchmark.models.*gpt-9"),
])
def test_bad_values_are_named(options, message):
    with pytest.raises(ParamsError, match=message):
        settings(params_with(), **options)


def test_a_run_returns_each_vocabularys_apply_costs_and_writes_the_results(tmp_path, monkeypatch, capsys):
    seen = {}
    results = [{"vocabulary": "llguidance", "apply": {"median_us": 1.0}},
               {"vocabulary": "smollm2-135m", "apply": {"median_us": 2.0}}]

    def run_models(models, programs, lines, apply_repeats, threads, cases=()):
        seen.update(models=models, programs=len(programs), lines=lines, threads=threads, cases=len(cases))
        return results

    monkeypatch.setattr(maskbench, "run_models", run_models)
    monkeypatch.setattr(maskbench, "line_programs", lambda n, lines: [f"program {k}" for k in range(n)])
    monkeypatch.setattr(maskbench, "line_cases", lambda n, lines: [(f"program {k}", "source") for k in range(n)])
    monkeypatch.setattr(maskbench, "summary_rows", lambda rs: [{"vocabulary": r["vocabulary"]} for r in rs])
    out = tmp_path / "mask.json"
    s = settings(params_with(), programs=2, lines=5, models=["smollm2-135m"], out=str(out))
    assert run(s) == {"llguidance": {"median_us": 1.0}, "smollm2-135m": {"median_us": 2.0}}
    assert seen == {"models": ("smollm2-135m",), "programs": 2, "lines": 5, "threads": s.threads, "cases": 2}
    assert json.loads(out.read_text()) == {"results": results}
    assert "llguidance" in capsys.readouterr().err
