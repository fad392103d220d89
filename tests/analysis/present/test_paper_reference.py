"""P11 (issue 41): the kernel speedup charts carried no paper reference points (6.8x at N = 8, 303x at N = 512),
so "against what" needed the text. The chart draws them (charts.paper_reference) where it is given them, and
both places that draw the chart give them: the kernel report (notebooks/kernel.ipynb) and the kernels fit
stage's figure."""

from __future__ import annotations

import ast
import json
import shutil

import polars as pl
import pytest
from fixtures import ROOT, params_with

from analysis.latency.model import paper_kernel_points
from analysis.present import charts

PAPER = list(paper_kernel_points())


def _speedups() -> pl.DataFrame:
    return pl.DataFrame([{"kernel_source": "fit", "model": "qwen2.5-0.5b", "dtype": "float32", "device": "cpu",
                          "context": 256, "n": n, "baseline": "eager", "prefill": "eager", "speedup": n / 2.0,
                          "speedup_q25": n / 2.2, "speedup_q75": n / 1.8, "is_strongest": True} for n in (8, 64, 512)])


def _layers(spec: dict, data: dict | None = None) -> list[tuple[dict, dict | None]]:
    """Every leaf layer with the data it draws (its own, else its nearest parent's)."""
    out = []
    for layer in spec.get("layer", []):
        own = layer.get("data", data)
        out += _layers(layer, own) if "layer" in layer else [(layer, own)]
    return out


def _diamond_values(chart) -> set[tuple[int, float]]:
    spec = chart.to_dict()
    datasets = spec.get("datasets", {})
    found = set()
    for layer, data in _layers(spec, spec.get("data")):
        mark = layer.get("mark", {})
        if isinstance(mark, dict) and mark.get("shape") == "diamond":
            rows = datasets[data["name"]] if "name" in data else data["values"]
            found |= {(int(r["n"]), float(r["speedup"])) for r in rows}
    return found


def test_the_paper_points_are_from_the_claims_file():
    claims = json.loads((ROOT / "analysis/data/paper_claims.json").read_text())
    assert PAPER == [tuple(p) for p in claims["kernel_speedup"]["points"]] == [(8, 6.8), (512, 303.0)]


def test_the_chart_draws_the_paper_points_as_labelled_diamonds():
    chart = charts.kernel_speedup(_speedups(), "fit", PAPER)
    assert _diamond_values(chart) == set(PAPER)
    assert "the paper" in json.dumps(chart.to_dict()["title"])
    assert _diamond_values(charts.kernel_speedup(_speedups(), "fit")) == set()  # drawn only where given
    vl_convert = pytest.importorskip("vl_convert")
    svg = vl_convert.vegalite_to_svg(chart.to_dict())
    assert "paper 6.8x" in svg and "paper 303x" in svg  # the labels are in the rendered figure


def test_the_kernel_report_gives_the_paper_points_to_every_speedup_chart():
    cells = [c for c in json.loads((ROOT / "notebooks/kernel.ipynb").read_text())["cells"] if c["cell_type"] == "code"]
    tree = ast.parse("\n".join("".join(c["source"]) for c in cells if not "".join(c["source"]).startswith("%")))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "kernel_speedup"]
    assert calls, "the kernel report draws no speedup chart"
    for call in calls:
        paper = call.args[2] if len(call.args) > 2 else next((k.value for k in call.keywords if k.arg == "paper"), None)
        assert isinstance(paper, ast.Name) and paper.id == "PAPER_POINTS", ast.unparse(call)
    defined = [n for n in ast.walk(tree) if isinstance(n, ast.Assign)
               and any(isinstance(t, ast.Name) and t.id == "PAPER_POINTS" for t in n.targets)]
    assert [ast.unparse(n.value) for n in defined] == ["list(paper_kernel_points())"]


def test_the_kernels_fit_stage_figure_carries_the_paper_points(tmp_path, monkeypatch):
    """The stage run on the golden CPU profile (a few seconds): its kernel_speedup figure is drawn with them."""
    from kernels_profile.stages import fit

    drawn, saved = [], []
    real = charts.kernel_speedup
    monkeypatch.setattr(charts, "kernel_speedup", lambda *a, **k: drawn.append((a, k)) or real(*a, **k))
    monkeypatch.setattr(fit, "save_chart", lambda chart, path: saved.append((chart, str(path))))
    monkeypatch.chdir(tmp_path)
    golden = ROOT / "tests/golden/kernel_profile"
    (tmp_path / "data/kernels").mkdir(parents=True)
    for name in ("raw.parquet", "raw.environment.json"):
        shutil.copy(golden / name, tmp_path / "data/kernels" / name)
    fit.run(fit.settings(params_with(**{"kernels.fit.raw": [{"source": "fit", "path": "data/kernels/raw.parquet"}],
                                        "kernel.device_time": []})))
    assert len(drawn) == 1 and (drawn[0][0][2:] or (drawn[0][1].get("paper"),))[0] == PAPER
    figure = next(chart for chart, path in saved if path.endswith("kernel_speedup"))
    assert _diamond_values(figure) == set(PAPER)
