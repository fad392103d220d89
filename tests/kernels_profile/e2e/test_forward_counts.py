"""Audit M1: a forward per token a program produces, the same accounting in the rivals simulation
(analysis.rivals.families.copy.copy_forwards), the bounds (analysis.bounds.charged_forwards) and the e2e executor
(kernels_profile.e2e.executor), set beside each other on hand-worked programs: each copy's tag is decoded but its
last token rides with the copy's prefill, so the directive-decoded program needs the directive tokens less one per
copy that forwards tokens, beyond the ideal program's forwards; AR needs one per gold token everywhere."""

import polars as pl
import pytest

torch = pytest.importorskip("torch")

from analysis.bounds import charged_forwards  # noqa: E402
from analysis.coverage.spans import SpanRow  # noqa: E402
from analysis.grammar.program import Copy, Gen, Program  # noqa: E402
from analysis.rivals.families.copy import copy_forwards  # noqa: E402
from analysis.rivals.forced import OpForcing  # noqa: E402
from analysis.rivals.forwards import decode_forwards  # noqa: E402
from kernels_profile.e2e.executor import Executor, program_segments  # noqa: E402
from kernels_profile.runtime.models import build_model  # noqa: E402

SOURCE = "alpha\nbeta\ngamma\n"
PROGRAMS = {
    "copy, gen, copy": Program((Copy(1, 2), Gen("X\n"), Copy(3, 3))),
    "gen first": Program((Gen("new\n"), Copy(2, 3))),
    "two copies in a row": Program((Copy(1, 1), Copy(2, 3), Gen("end\n"))),
}


def encode(text):  # one id per byte, within the tiny model's vocabulary
    return list(text.encode())


@pytest.fixture(scope="module")
def executor():
    return Executor(build_model("tiny-qwen2", "random", "float32", "cpu"), encode("edit:\n" + SOURCE))


def span_rows(segments) -> list[SpanRow]:
    """The executor's segments as the spans the rivals and the bounds read (one token per byte)."""
    return [SpanRow(i, s.kind, len(s.ids), len(s.ids) if s.kind == "copy" else 0, 1, s.directive_tokens)
            for i, s in enumerate(segments)]


def bounds_forwards(rows: list[SpanRow], variant: str) -> int:
    frame = pl.DataFrame([{"case_id": "c", "corpus": "x", "framing": "body", "level": "line", "op_index": r.op_index,
                           "kind": r.kind, "n_tokens": r.n_tokens, "n_tokens_src": r.n_tokens_src,
                           "directive_tokens": r.directive_tokens} for r in rows])
    return int(charged_forwards(frame, variant)["forwards"][0])


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_three_count_the_same_forwards(executor, name):
    segments = program_segments(PROGRAMS[name], SOURCE, None, encode)
    rows = span_rows(segments)
    unforced = [OpForcing(())] * len(rows)
    for variant, directives, directives_flag in (("ideal", "ideal", False), ("overhead", "decoded", True)):
        run, _ = executor.copy_as_decode(segments, directives=directives_flag)
        simulated = copy_forwards(rows, unforced, directives)
        assert len(simulated) == run.forwards == bounds_forwards(rows, variant), (name, variant)
        # the same query lengths, forward by forward (the copy's prefill carries the tag's last token)
        assert simulated.new_tokens == list(run.new_tokens), (name, variant)
    gold = [t for s in segments for t in s.ids]
    ar, _ = executor.autoregressive(gold)
    assert ar.forwards == len(decode_forwards(len(gold))) == sum(r.n_tokens for r in rows)
    copies = sum(1 for r in rows if r.kind == "copy" and r.n_tokens_src > 0)
    decoded, _ = executor.copy_as_decode(segments, directives=True)
    ideal, _ = executor.copy_as_decode(segments)
    assert decoded.forwards - ideal.forwards == sum(r.directive_tokens for r in rows) - copies
