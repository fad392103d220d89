"""Copy-as-Decode inside a stock engine, emulated with public mechanisms: the plan of one request.

The program is the project's line oracle of (source, the engine's own greedy output): the copies and gens that
reproduce that output exactly. The engine has no copy primitive (jump-forward for llguidance is an unmerged
vLLM branch), so one request becomes a chain of engine requests (stages):

* stage 0: the program prompt, then the program's tokens up to and including the first copy's directive,
  decoded one forward each and forced to exactly those token ids by a structured-output grammar;
* stage i > 0: re-submitted with everything in its KV cache so far (prompt, the tokens decoded) plus the copied
  source lines' tokens (`append_ids`). vLLM's prefix cache finds the cached part and prefills only what is
  new: the copied tokens, plus the tail of the last partly filled cache block (recomputed, up to block_size - 1
  tokens), under the same token budget as any prefill. That prefill forward yields the stage's first forced
  token; the rest are decoded;
* the last stage ends with the end-of-sequence token where the engine's own output ended with it (the
  rewrite paid that forward too); a program that ends with a copy gets one forced end token, so that the
  copy's prefill forward runs.

What the emulation does not pay that a native executor would: nothing of the model (each directive and gen
token is one forward, each copy one prefill). What it pays that a native one would not: a new engine request
per copy (admission, a grammar compile, the prefix-cache lookup), the recomputed tail of a partial block, and
the decoded directive tokens of a copy whose grammar could jump-forward them (the `decoded` variant).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from analysis.grammar.program import Copy, render, render_op
from analysis.grammar.resolver import resolve
from analysis.oracle.covmax import line_oracle
from analysis.text.lines import split_lines

Encode = Callable[[str], Sequence[int]]


@dataclass(frozen=True)
class Stage:
    append_ids: tuple[int, ...]  # copied source tokens prefilled before this stage's decoding (stage 0: none)
    forced_ids: tuple[int, ...]  # program tokens decoded in this stage, one forward each


@dataclass(frozen=True)
class CopyPlan:
    program: str                 # the program text (analysis.grammar.program)
    stages: tuple[Stage, ...]

    @property
    def decoded_tokens(self) -> int:
        return sum(len(s.forced_ids) for s in self.stages)

    @property
    def copied_tokens(self) -> int:
        return sum(len(s.append_ids) for s in self.stages)

    def to_record(self) -> dict:
        return {"program": self.program,
                "chain": [{"append_ids": list(s.append_ids), "forced_ids": list(s.forced_ids)} for s in self.stages]}


def copy_plan(source: str, output: str, encode: Encode, end_id: int, ended: bool) -> CopyPlan:
    """The plan of one request (module docstring); `ended`: the engine's own output ended with `end_id`."""
    program = line_oracle(source, output)
    if resolve(program, source) != output:  # the oracle's own guarantee, checked where the plan is made
        raise ValueError("the line oracle's program does not reproduce the engine output")
    lines = split_lines(source)
    stages: list[Stage] = []
    append: list[int] = []
    forced: list[int] = []
    for op in program.ops:
        forced += encode(render_op(op))
        if isinstance(op, Copy):
            stages.append(Stage(tuple(append), tuple(forced)))
            append, forced = list(encode("".join(lines[op.start - 1:op.end]))), []
    if ended or not forced:
        forced.append(end_id)
    stages.append(Stage(tuple(append), tuple(forced)))
    return CopyPlan(render(program), tuple(stages))

