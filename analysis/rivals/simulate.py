"""The rival simulation: per case, the forwards each method needs to produce the gold output.

Model-free: every method reaches exactly the gold output's tokens (the Qwen2.5 tokenizer, as the bounds
use), so only the forwards differ. Per case and method one row of the forwards table
(analysis.serving.forwards: `new_tokens`, `emitted` per forward, plus `prefill`: whether it is a
prefill-type forward, which analysis.rivals.pricing reads), with the method's own prompt length
(`prompt_tokens`: the numbered source for Copy-as-Decode, the plain one for the others, each with the template
overhead spans.prompt_overhead_tokens), which the pricing starts its context at and the serving simulation
prefills (time to first token). Each method's forwards are its family's
(`Family.forwards`, one module per family in analysis/rivals/families/: the whole rewrite, prompt lookup and
suffix decoding with gold acceptance drafting from the unnumbered source and the output so far, the edit
formats, Copy-as-Decode's programs); this module looks the family up and writes the row.

No EOS step is counted for any method (the bounds count none either).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analysis.coverage.spans import SpanRow
from analysis.rivals.forced import OpForcing
from analysis.rivals.forwards import Forwards
from analysis.rivals.methods import PROGRAM_PROMPT, Method
from analysis.rivals.settings import DraftSettings


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
    prompt_tokens: int             # the rewrite prompt (the unnumbered source): AR's, the drafters', the formats'
    program_prompt_tokens: int     # the program prompt (the numbered source): Copy-as-Decode's
    programs: dict[str, tuple[tuple[SpanRow, ...], tuple[OpForcing, ...]]]  # level -> (ops, forcing)


@dataclass(frozen=True)
class SimulationEnv:
    """What a family's forwards may use beside the case and the drafts."""

    tokenizer: Any                 # the suite tokenizer (an edit format's text is encoded with it)
    udiff_context: int             # params formats.udiff_context
    cache: Any = None              # a cross-request member's state for this corpus (Family.response_cache)


def method_forwards(method: Method, case: CaseInput, drafts: DraftSettings, env: SimulationEnv) -> Forwards:
    """The forwards of one method on one case (its family's)."""
    return method.spec.forwards(method, case, drafts, env)


def method_prompt_tokens(method: Method, case: CaseInput) -> int:
    """The prompt a method is given and charged for: the numbered source for Copy-as-Decode, the plain one else."""
    return case.program_prompt_tokens if method.prompt == PROGRAM_PROMPT else case.prompt_tokens


def forward_row(method: Method, case: CaseInput, forwards: Forwards) -> dict:
    return {"case_id": case.case_id, "corpus": case.corpus, "framing": case.framing, "method": method.name,
            "prompt_tokens": method_prompt_tokens(method, case), "gold_tokens": len(case.gold),
            "new_tokens": forwards.new_tokens, "emitted": forwards.emitted, "prefill": forwards.prefill}
