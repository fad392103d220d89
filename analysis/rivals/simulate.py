"""The rival simulation: per case, the forwards each method needs to produce the gold output.

Model-free: every method reaches exactly the gold output's tokens (the Qwen2.5 tokenizer, as the bounds
use), so only the forwards differ. Per case and method one row of the forwards table
(analysis.serving.forwards: `new_tokens`, `emitted` per forward, plus `prefill`: whether it is a
prefill-type forward, which analysis.rivals.pricing reads):

* `ar` (whole rewrite): one decode step per gold token.
* prompt lookup and suffix decoding (analysis.rivals.pld, analysis.rivals.suffix) with **gold
  acceptance**: before each forward the drafter proposes up to k tokens (never more than the gold tokens
  still to come, less one); the forward verifies the draft and yields the longest prefix equal to the
  gold continuation plus one corrected token: q = draft + 1 new tokens, emitted = accepted + 1. An empty
  draft is a plain decode step. Draft context: the unnumbered source (the rewrite prompt's text) plus
  the output so far.
* edit formats `unified-diff`, `search-replace` (analysis.coverage.formats): one decode step per token of
  the format's text; `emitted` counts format tokens (what enters the cache), the apply step is free.
* Copy-as-Decode at line and token level from the oracle programs' spans (analysis.coverage.spans, the
  rows the bounds price), each op in order: its directive tokens (the bounds price them at the op's start
  context, so they come first and emit nothing), then its payload: a copy is one prefill of the source
  tokens it forwards (emitting its gold tokens; a copy that forwards no token has no forward), a gen op
  one decode step per gold token. `decoded`: every directive token is a decode step (what a deployment
  without grammar jump-forward pays); `jump`: the tokens the grammar forces (analysis.rivals.forced) are
  not decoded but prefilled with the next forward, which then has q = 1 + those tokens (a prefill-type
  forward); `ideal`: directive tokens free (an upper bound, never a rival).

No EOS step is counted for any method (the bounds count none either).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from analysis.coverage.formats import search_replace_text, unified_diff_text
from analysis.coverage.spans import SpanRow
from analysis.rivals.forced import OpForcing
from analysis.rivals.methods import AR, COPY, FORMAT, PLD, SUFFIX, Method
from analysis.rivals.pld import PromptLookup
from analysis.rivals.suffix import ResponseCache, SuffixDecoder, SuffixSettings


@dataclass
class Forwards:
    """One method's forwards on one case."""

    new_tokens: list[int] = field(default_factory=list)
    emitted: list[int] = field(default_factory=list)
    prefill: list[bool] = field(default_factory=list)

    def add(self, q: int, emitted: int, prefill: bool) -> None:
        self.new_tokens.append(int(q))
        self.emitted.append(int(emitted))
        self.prefill.append(bool(prefill))

    def __len__(self) -> int:
        return len(self.new_tokens)


def decode_forwards(n: int) -> Forwards:
    """n decode steps, one token each (AR over the gold output, or an edit format's text)."""
    return Forwards([1] * n, [1] * n, [False] * n)


def speculative_forwards(drafter, gold: Sequence[int], k: int | None) -> Forwards:
    """Gold-acceptance speculation (module docstring) with a drafter that has `draft(k)` and
    `extend(tokens)`; k None: no cap but the tokens still to come."""
    out = Forwards()
    pos, total = 0, len(gold)
    while pos < total:
        room = total - pos - 1
        draft = drafter.draft(room if k is None else min(k, room))
        accepted = 0
        while accepted < len(draft) and draft[accepted] == gold[pos + accepted]:
            accepted += 1
        out.add(len(draft) + 1, accepted + 1, bool(draft))
        drafter.extend(gold[pos:pos + accepted + 1])
        pos += accepted + 1
    return out


def copy_forwards(ops: Sequence[SpanRow], forcing: Sequence[OpForcing], variant: str) -> Forwards:
    """A program's forwards (module docstring); `forcing` per op (used by `jump` only)."""
    out = Forwards()
    carry = 0  # jump-forwarded tokens waiting for the next forward

    def step(emitted: int) -> None:
        nonlocal carry
        out.add(1 + carry, emitted, carry > 0)
        carry = 0

    for op, forced in zip(ops, forcing, strict=True):
        if variant != "ideal":
            flags = list(forced.flags) if variant == "jump" else []
            if len(flags) > op.directive_tokens:
                raise ValueError(f"op {op.op_index}: {len(flags)} forcing flags for {op.directive_tokens} directive tokens")
            flags += [False] * (op.directive_tokens - len(flags))  # escapes' extra tokens: decoded
            for is_forced in flags:
                if is_forced:
                    carry += 1
                else:
                    step(0)
        if op.kind == "copy":
            if op.n_tokens_src > 0:
                out.add(op.n_tokens_src + carry, op.n_tokens, True)
                carry = 0
        else:
            for _ in range(op.n_tokens):
                step(1)
    return out


@dataclass(frozen=True)
class DraftSettings:
    """The speculative rivals' settings (params rivals.pld, rivals.suffix)."""

    pld_policies: tuple[str, ...]
    pld_ks: tuple[int | None, ...]
    ngram_max: int
    suffix_k: int | None
    suffix: SuffixSettings
    response_cache: bool


@dataclass(frozen=True)
class CaseInput:
    """What the simulation needs of one case (torch-free, picklable for the workers)."""

    case_id: str
    corpus: str
    framing: str
    source: str
    target: str
    source_ids: tuple[int, ...]
    gold: tuple[int, ...]
    prompt_tokens: int
    programs: dict[str, tuple[tuple[SpanRow, ...], tuple[OpForcing, ...]]]  # level -> (ops, forcing)


def method_forwards(method: Method, case: CaseInput, drafts: DraftSettings, tokenizer, udiff_context: int,
                    cache: ResponseCache | None = None) -> Forwards:
    """The forwards of one method on one case."""
    if method.family == AR:
        return decode_forwards(len(case.gold))
    if method.family == PLD:
        return speculative_forwards(PromptLookup(case.source_ids, policy=method.policy, max_ngram=drafts.ngram_max),
                                    case.gold, method.k)
    if method.family == SUFFIX:
        decoder = SuffixDecoder(case.source_ids, drafts.suffix, cache if method.cache else None)
        out = speculative_forwards(decoder, case.gold, drafts.suffix_k)
        decoder.finish()
        return out
    if method.family == FORMAT:
        text = (unified_diff_text(case.source, case.target, udiff_context) if method.fmt == "unified-diff"
                else search_replace_text(case.source, case.target))
        return decode_forwards(len(tokenizer.encode(text).ids))
    if method.family == COPY:
        ops, forcing = case.programs[method.level]
        return copy_forwards(ops, forcing, method.variant)
    raise ValueError(f"no simulation for method {method}")


def forward_row(method: Method, case: CaseInput, forwards: Forwards) -> dict:
    return {"case_id": case.case_id, "corpus": case.corpus, "framing": case.framing, "method": method.name,
            "prompt_tokens": case.prompt_tokens, "gold_tokens": len(case.gold),
            "new_tokens": forwards.new_tokens, "emitted": forwards.emitted, "prefill": forwards.prefill}
