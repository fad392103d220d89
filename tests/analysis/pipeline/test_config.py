"""analysis.pipeline.config: params.yaml read once, and the settings several stages share."""

import pytest

from analysis.pipeline.config import MIN_BOOTSTRAP_RESAMPLES, Bootstrap, Config, bootstrap_settings, tokenizer_spec
from analysis.errors import ParamsError


def group(**values) -> dict:
    return {"spans": {"bootstrap_resamples": 200, "seed": 7, "ci": 0.95, **values}}


def test_bootstrap_settings_read_the_group():
    assert bootstrap_settings(group(), "spans") == Bootstrap(resamples=200, seed=7, ci=0.95)
    assert bootstrap_settings(group(bootstrap_resamples=0), "spans").resamples == 0  # 0: no CIs


@pytest.mark.parametrize(("values", "message"), [
    ({"bootstrap_resamples": 1}, rf"'spans.bootstrap_resamples' must be 0 \(no CIs\) or >= {MIN_BOOTSTRAP_RESAMPLES}"),
    ({"bootstrap_resamples": MIN_BOOTSTRAP_RESAMPLES - 1}, "must be 0"),
    ({"bootstrap_resamples": -1}, "must be >= 0"),
    ({"ci": 1.0}, "'spans.ci' is a confidence level"),
    ({"seed": -3}, "'spans.seed' must be >= 0"),
    ({"seed": "x"}, "'spans.seed' must be"),
])
def test_bad_bootstrap_settings_name_the_key(values, message):
    with pytest.raises(ParamsError, match=message):
        bootstrap_settings(group(**values), "spans")


def test_a_missing_group_key_is_named():
    with pytest.raises(ParamsError, match="missing 'optimal.bootstrap_resamples'"):
        bootstrap_settings(group(), "optimal")


def test_tokenizer_spec_refuses_an_empty_spec():
    assert tokenizer_spec({"tokenizer": {"spec": "qwen2.5"}}) == "qwen2.5"
    with pytest.raises(ParamsError, match="'tokenizer.spec' is empty"):
        tokenizer_spec({"tokenizer": {"spec": "  "}})


def test_config_load_keeps_the_path_and_refuses_a_missing_file(tmp_path):
    from fixtures import ROOT

    config = Config.load(ROOT / "params.yaml")
    assert config.path == ROOT / "params.yaml" and "spans" in config.params
    with pytest.raises(ParamsError, match="no params file"):
        Config.load(tmp_path / "params.yaml")
