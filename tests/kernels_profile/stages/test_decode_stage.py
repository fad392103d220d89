"""kernels_profile.stages.decode: the case the decoder runs on is found by id and framing, each miss
is named, an unknown model is a ParamsError, and a case without an instruction is refused before
any model is loaded."""

import polars as pl
import pytest
from fixtures import params_with

from analysis.corpora.cases import Case, cases_frame
from analysis.errors import CorpusError, ParamsError
from analysis.layout import CASES
from kernels_profile.stages import decode
from kernels_profile.stages.decode import find_case, settings


def test_decode_stage_finds_one_case_and_names_what_is_missing():
    cases = pl.DataFrame({"case_id": ["A/1", "A/1", "B/1"], "framing": ["body", "decl", "unit"],
                          "source": ["s1", "s2", "s3"]})
    assert find_case(cases, "A/1", "decl")["source"] == "s2"
    assert find_case(cases, "B/1", "body")["source"] == "s3"  # single-framing corpora ignore the framing
    with pytest.raises(CorpusError, match="no case 'C/9'"):
        find_case(cases, "C/9", "body")
    with pytest.raises(CorpusError, match="case 'A/1' has no framing 'prompt' \\(it has body, decl\\)"):
        find_case(cases, "A/1", "prompt")


def test_an_unknown_model_is_named_with_the_known_ones():
    with pytest.raises(ParamsError, match="decode.model: unknown model 'gpt-9'; known: .*smollm2-135m"):
        settings(params_with(), model="gpt-9")
    with pytest.raises(ParamsError, match="decode.model: unknown model 'gpt-9'"):
        settings(params_with(**{"decode.model": "gpt-9"}))


def test_a_case_without_an_instruction_is_refused_before_loading_a_model(tmp_path, monkeypatch):
    from kernels_profile.decode.decoder import DecodeError

    monkeypatch.chdir(tmp_path)
    CASES.parent.mkdir(parents=True)
    cases_frame([Case("T/1", "T", "python", "body", "a\n", "b\n", "  "),
                 Case("T/2", "T", "python", "body", "a\n", "b\n")]).write_parquet(CASES)

    def must_not_load(*args):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(decode, "_decode_and_benchmark", must_not_load)
    for case_id in ("T/1", "T/2"):
        with pytest.raises(DecodeError, match=f"{case_id}: the edit instruction is empty"):
            decode.run(settings(params_with(), case_id=case_id, framing="body"))
