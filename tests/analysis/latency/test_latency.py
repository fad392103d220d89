import json

import numpy as np
import pytest

from analysis.errors import ParamsError
from analysis.latency.model import (
    LatencyModel,
    from_document,
    paper_kernel_points,
    paper_model,
    paper_points,
    paper_speedup,
    select_model,
    to_document,
)
from analysis.latency.fit import FitOptions, fit_latency
from fixtures import TRUE_AR, TRUE_PREFILL, raw_from


# ---------------------------------------------------------------- paper

def test_paper_curve_goes_through_the_abstracts_points():
    assert float(paper_speedup(8)) == pytest.approx(6.8)
    assert float(paper_speedup(512)) == pytest.approx(303)
    model = paper_model()
    assert float(model.t_step(5000).seconds) == 1.0
    assert float(model.t_prefill(64, 12345).seconds) == pytest.approx(64 / float(paper_speedup(64)))
    assert float(model.speedup(512, 0).seconds) == pytest.approx(303)
    with pytest.raises(ParamsError, match=r"N=4.*N in \[8, 512\]"):
        model.t_prefill(4, 0)
    assert bool(model.t_prefill(4, 0, extrapolate=True).extrapolated)


# ---------------------------------------------------------------- records and repeats

def test_models_round_trip_through_json():
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [256, 1024], repeats=2)
    models = [*fit_latency(raw, FitOptions("interp", (4,))), *fit_latency(raw, FitOptions("quadratic")),
              *fit_latency(raw, FitOptions("roofline")), paper_model()]
    document = json.loads(json.dumps(to_document(models, "synthetic", [])))
    again = from_document(document)
    n, c = np.array([1, 7, 100, 512], dtype=float), np.array([256, 300, 700, 1024], dtype=float)
    for before, after in zip(models, again):
        assert after == before
        assert np.array_equal(after.t_prefill(n, c, extrapolate=True).seconds, before.t_prefill(n, c, extrapolate=True).seconds)
        assert len(after.repeat_models()) == len(before.repeat_models())
    assert LatencyModel.from_record(models[0].to_record()) == models[0]

def test_a_document_of_another_schema_is_refused_by_name():
    legacy = {"fits": [{"model": "m", "weights": "random", "dtype": "float32", "device": "cpu", "baseline": "eager"}]}
    with pytest.raises(ParamsError, match="unknown schema None"):
        from_document(legacy)


def test_select_model_by_key_and_form():
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [256, 1024], repeats=1)
    models = [*fit_latency(raw, FitOptions("interp")), *fit_latency(raw, FitOptions("quadratic"))]
    assert select_model(models, "m", "float32", "cpu", "eager", form="quadratic").form == "quadratic"
    with pytest.raises(ParamsError, match="name the form"):
        select_model(models, "m", "float32", "cpu", "eager")
    with pytest.raises(ParamsError, match="no latency model"):
        select_model(models, "m", "float32", "cpu", "static")


# ---------------------------------------------------------------- the paper's kernel points (one reader)

def test_paper_kernel_points_follow_the_json(tmp_path):
    from analysis.latency.model import PAPER_CLAIMS

    doc = json.loads(PAPER_CLAIMS.read_text())
    doc["kernel_speedup"]["points"] = [[4, 2.0], [256, 100.0]]
    path = tmp_path / "claims.json"
    path.write_text(json.dumps(doc))
    assert paper_kernel_points(path) == ((4, 2.0), (256, 100.0))

def test_paper_points_are_the_ends_of_the_n_range():
    assert paper_points({"points": [[4, 2.0], [16, 5.5], [256, 100.0]]}) == ((4, 2.0), (256, 100.0))


@pytest.mark.parametrize("points", [None, [], [[8, 6.8]], [[512, 303.0], [8, 6.8]], [[8, 0.0], [512, 303.0]],
                                    [[8, "x"], [512, 303.0]], [[8], [512, 303.0]]])
def test_malformed_paper_points_are_a_named_error(points):
    with pytest.raises(ParamsError, match="kernel_speedup.points"):
        paper_points({"points": points})
