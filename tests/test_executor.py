import pytest

torch = pytest.importorskip("torch")

from analysis.errors import ProgramError  # noqa: E402
from analysis.program import Copy, Gen, Program  # noqa: E402
from kernels_profile.equivalence import rel_diff  # noqa: E402
from kernels_profile.executor import Executor, lookup_draft, program_segments  # noqa: E402
from kernels_profile.models import build_model  # noqa: E402

SOURCE = "alpha\nbeta\ngamma\n"


def encode(text):  # a toy tokenizer: one id per byte, within the tiny model's vocabulary
    return [b for b in text.encode()]


@pytest.fixture(scope="module")
def executor():
    lm = build_model("tiny-qwen2", "random", "float32", "cpu")
    return Executor(lm, encode("edit this:\n" + SOURCE))


def test_segments_spell_the_resolved_output():
    program = Program((Copy(1, 2), Gen("BETA\n"), Copy(3, 3)))
    segments = program_segments(program, SOURCE, None, encode)
    assert [s.kind for s in segments] == ["copy", "gen", "copy"]
    assert bytes(t for s in segments for t in s.ids).decode() == "alpha\nbeta\nBETA\ngamma\n"
    with pytest.raises(ProgramError, match="out of range"):
        program_segments(Program((Copy(2, 7),)), SOURCE, None, encode)


def test_executor_is_lossless_and_uses_fewer_forwards(executor):
    segments = program_segments(Program((Copy(1, 2), Gen("X\n"), Copy(3, 3))), SOURCE, None, encode)
    run, cad_logits = executor.copy_as_decode(segments)
    sequence = [t for s in segments for t in s.ids]
    ar_run, ar_logits = executor.autoregressive(sequence)
    assert run.forwards == 2 + 2 and ar_run.forwards == len(sequence) == run.tokens
    assert rel_diff(cad_logits, ar_logits) < 1e-4
    assert executor.cache.get_seq_length() == len(executor.prompt_ids) + len(sequence)


def test_pld_oracle_covers_every_gold_token(executor):
    gold = encode("alpha\nbeta\nBETA\ngamma\n")
    run = executor.pld_oracle(gold, k=8, ngram_max=3)
    assert run.tokens == len(gold) and 1 <= run.forwards < len(gold)
    # every gold token ended in the cache exactly once
    assert executor.cache.get_seq_length() == len(executor.prompt_ids) + len(gold)


def test_lookup_draft():
    assert lookup_draft([1, 2, 3, 4, 1, 2], k=2, ngram_max=2) == [3, 4]
    assert lookup_draft([5, 6, 7], k=3, ngram_max=2) == []


def test_measure_case_times_every_method_per_repeat_and_summarises(executor):
    import polars as pl

    from kernels_profile.e2e import (
        METHODS,
        PldSettings,
        losslessness,
        measure_case,
        speedup_summary,
    )

    gold = encode("alpha\nbeta\nBETA\ngamma\n")
    segments = {
        "line": program_segments(Program((Copy(1, 2), Gen("BETA\n"), Copy(3, 3))), SOURCE, None, encode),
        "token": program_segments(Program((Copy(1, 2), Gen("BETA\n"), Copy(3, 3))), SOURCE, None, encode),
    }
    records = measure_case(executor, gold, segments, PldSettings(k=8, ngram_max=3), repeats=2)
    assert sorted((r["method"], r["repeat"]) for r in records) == sorted((m, k) for m in METHODS for k in range(2))
    assert all(r["seconds"] > 0 and r["tokens"] == len(gold) for r in records)
    check = losslessness(executor, segments["line"], tolerance=1e-4)
    assert check["ok"] and check["logits_rel_diff"] < 1e-4
    frame = pl.DataFrame(records).with_columns(model=pl.lit("tiny"), corpus=pl.lit("C"), case_id=pl.lit("C/1"),
                                               predicted_line=pl.lit(2.0), predicted_token=pl.lit(3.0))
    summary = speedup_summary(frame)
    ar = summary.filter(pl.col("method") == "ar").row(0, named=True)
    assert ar["speedup_total"] == pytest.approx(1.0) and ar["predicted"] is None
    line = summary.filter(pl.col("method") == "cad_line").row(0, named=True)
    assert line["predicted"] == 2.0 and line["forwards"] < ar["forwards"]


def test_a_model_whose_vocabulary_is_smaller_than_its_tokenizer_is_refused(executor):
    from kernels_profile.models import ModelError, check_vocabulary, load_hf_tokenizer

    with pytest.raises(ModelError, match="tiny-qwen2: its vocabulary .* smaller than its tokenizer"):
        check_vocabulary(executor.lm, load_hf_tokenizer("tiny-qwen2"))
