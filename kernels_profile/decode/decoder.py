"""Copy-as-Decode as a working decoder: the model writes the program, copies are served by prefill.

Greedy decoding under the grammar FSM (analysis.grammar.fsm, public walker API only). Every decoded token
advances the walker; the logits row is masked with a boolean tensor precomputed per FSM state (cached
for the whole decode, and across decodes through shared `MaskTables`, kernels_profile.decode.masks). When a copy directive closes
(the walker is back between ops right after the directive's last byte), the copied lines (or tokens)
are tokenized and appended to the KV cache in ONE forward together with the directive's last token,
and decoding continues from that forward's logits. Decoding stops at EOS between ops, or when the
walker's budget runs out (its margin forces a whole program first).

The sequence the model sees is exactly kernels_profile.decode.sequence's layout: prompt, then each op's own
tokens, with the copied text's tokens right after each directive. To keep op boundaries on token
boundaries, a token may close a copy directive only with its last byte (a token such as '"/><' is
masked in states where it would close the directive and start the next op in one go); the FSM itself
allows such tokens, the decoder's table removes them.

Timings are split into the prompt prefill, one-token decode steps, copy prefills and mask time
(lookup or computation of the state's mask, and applying it to the logits row).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from analysis.errors import ParamsError, ProgramError
from analysis.grammar.fsm import FsmWalker
from analysis.grammar.program import COPY_OPEN, Copy, Program, parse
from analysis.grammar.resolver import resolve
from analysis.text.lines import Source
from kernels_profile.decode.llg_engine import LlguidanceEngine, LlgVocabulary
from kernels_profile.decode.masks import MaskTable, MaskTables, apply_mask, closes_copy, logits_width
from kernels_profile.runtime.models import LoadedModel, cache_kwarg
from kernels_profile.runtime.hf import ModelTokenizer, PromptTemplate, prompt_ids
from kernels_profile.runtime.loading import load_model


class DecodeError(ParamsError):
    """A case the decoder cannot run: empty instruction, prompt past the context, budget too small."""


@dataclass(frozen=True)
class DecodeTimings:
    prompt_s: float   # the prompt's prefill
    decode_s: float   # one-token forwards
    copy_s: float     # copy prefills (directive's last token + copied tokens, one forward each)
    mask_s: float     # mask lookup/computation and application
    total_s: float


@dataclass(frozen=True)
class DecodeCounts:
    prompt_tokens: int
    program_tokens: int   # tokens the model wrote (EOS included when it stopped on one)
    copied_tokens: int
    decode_forwards: int
    copy_forwards: int
    masks_computed: int   # states whose mask was built during this decode (cold steps)


@dataclass(frozen=True)
class DecodeResult:
    text: str
    program: Program
    output: str
    stopped: str  # "eos" (the model ended the program) | "forced" (EOS forced by the budget margin) | "budget"
    timings: DecodeTimings
    counts: DecodeCounts
    sequence: tuple[int, ...]  # every id fed to the model, prompt first
    prompt_length: int
    final_logits: Any = field(default=None, compare=False, repr=False)


# ---------------------------------------------------------------- checks

def model_context(lm: LoadedModel) -> int:
    return int(getattr(lm.config, "max_position_embeddings", 0) or 0)


def check_inputs(lm: LoadedModel, prompt: list[int], instruction: str, budget: int, margin: int,
                 case: str) -> None:
    if not instruction.strip():
        raise DecodeError(f"{case}: the edit instruction is empty")
    if budget <= margin:
        raise DecodeError(
            f"{case}: budget {budget} tokens is too small for any program: the walker forces the end "
            f"within its margin of {margin} tokens, so no op could start (use a budget > {margin})"
        )
    context = model_context(lm)
    if context and len(prompt) + budget > context:
        raise DecodeError(
            f"{case}: the prompt ({len(prompt)} tokens) plus the budget ({budget}) exceeds "
            f"{lm.name}'s context of {context} tokens"
        )


def last_copy(program_bytes: bytes) -> Copy:
    text = program_bytes.decode("utf-8")
    op = parse(text[text.rindex(COPY_OPEN):]).ops[0]
    assert isinstance(op, Copy)
    return op


# ---------------------------------------------------------------- the decoder

class _Runner:
    """The KV cache and forward counting of one decode."""

    def __init__(self, lm: LoadedModel):
        import torch
        from transformers import DynamicCache

        self.lm, self.torch = lm, torch
        self.kw = cache_kwarg(lm.model)
        self.cache = DynamicCache(config=lm.config)
        self.fed: list[int] = []

    def forward(self, ids: list[int]):
        x = self.torch.tensor([ids], device=self.lm.device)
        out = self.lm.model(input_ids=x, use_cache=True, logits_to_keep=1, **{self.kw: self.cache})
        self.fed.extend(ids)
        return out.logits[0, -1]

    def sync(self) -> None:
        if str(self.lm.device).startswith("cuda"):
            self.torch.cuda.synchronize()


MASK_ENGINES = ("suite", "llguidance")


class SuiteEngine:
    """The suite's FSM as the decoder's mask engine: a walker, masks cached per FSM state (MaskTable)."""

    name = "suite"

    def __init__(self, masks: MaskTable, walker: FsmWalker):
        self.masks, self.walker = masks, walker

    @property
    def remaining(self) -> int | None:
        return self.walker.remaining

    @property
    def forcing(self) -> bool:
        return self.walker.forcing

    @property
    def margin(self) -> int:
        return self.walker.margin

    @property
    def computed(self) -> int:
        return self.masks.computed

    def done(self) -> bool:
        return self.walker.is_accepting() or self.walker.finished

    def mask_logits(self, logits):
        return apply_mask(logits, self.masks.bias(self.walker))

    def closing(self, token: int) -> bool:
        return closes_copy(self.masks.fsm, self.walker.state, token)

    def advance(self, token: int) -> None:
        self.walker.advance(token)

    def piece(self, token: int) -> bytes:
        return self.masks.fsm.piece(token)

    def copy_ids(self, op: Copy, text: str, tok: ModelTokenizer) -> list[int]:
        """The tokens of a copied span: its text tokenized on its own (the sequence layout)."""
        return list(tok.encode(text))


def decode(lm: LoadedModel, tok: ModelTokenizer, source: str, instruction: str, template: PromptTemplate,
           budget: int, *, unit: str = "lines", margin: int | None = None, masks: MaskTables | None = None,
           case: str = "case", mask_engine: str = "suite", llg=None) -> DecodeResult:
    """Greedy Copy-as-Decode under the FSM (module docstring), or under llguidance's matcher over the
    source's forced-span grammar (`mask_engine="llguidance"`, kernels_profile.decode.llg_engine; `llg`: its
    vocabulary, shared between decodes). `masks` (the model's `MaskTables`) may be shared between decodes:
    it keeps one FSM and mask table per unit count."""
    if mask_engine not in MASK_ENGINES:
        raise DecodeError(f"{case}: mask engine must be one of {', '.join(MASK_ENGINES)}, got {mask_engine!r}")
    src = Source.of(source)  # its lines split once: the line count, the prompt and every copy read them
    if unit == "lines":
        limits = {"lines": src.n_lines}
    elif unit == "tokens" and mask_engine == "suite":
        encoded = tok.fsm_tokenizer.encode(source)
        limits, src = {"tokens": len(encoded)}, Source.of(src, encoded.char_bounds)
    elif unit == "tokens":
        raise DecodeError(f"{case}: the llguidance engine's forced-span grammar copies lines; unit 'tokens' runs on "
                          "the suite engine only")
    else:
        raise DecodeError(f"{case}: unit must be 'lines' or 'tokens', got {unit!r}")
    if mask_engine == "llguidance":
        if llg is None:
            llg = LlgVocabulary.build(tok, logits_width(lm) or tok.fsm_tokenizer.vocab_size, lm.device)
        engine = LlguidanceEngine(llg, src, budget, margin, tok.eos_ids)
    else:
        table = (masks if masks is not None else MaskTables.for_model(lm, tok)).table(limits)
        engine = SuiteEngine(table, table.fsm.walker(budget=budget, margin=margin))
    prompt = prompt_ids(tok, template, src, instruction)
    check_inputs(lm, prompt, instruction, budget, engine.margin, case)
    return _greedy(lm, tok, engine, prompt, src, case)


def _greedy(lm, tok: ModelTokenizer, engine, prompt: list[int], source: Source, case: str) -> DecodeResult:
    runner = _Runner(lm)
    context = model_context(lm)
    computed_before = engine.computed
    written: list[int] = []
    program = bytearray()
    t = {"prompt": 0.0, "decode": 0.0, "copy": 0.0, "mask": 0.0}
    copied_tokens = decode_forwards = copy_forwards = 0
    stopped = "budget"
    with runner.torch.inference_mode():
        started = time.perf_counter()
        logits = runner.forward(prompt)
        runner.sync()
        t["prompt"] = time.perf_counter() - started
        while engine.remaining is None or engine.remaining > 0:
            m0 = time.perf_counter()
            token = int(engine.mask_logits(logits).argmax())
            t["mask"] += time.perf_counter() - m0
            closing = engine.closing(token)
            forcing = engine.forcing  # the budget's margin was forcing the program's end
            engine.advance(token)
            written.append(token)
            if token in tok.eos_ids:
                stopped = "forced" if forcing else "eos"
                break
            program += engine.piece(token)
            ids = [token]
            if closing:
                op = last_copy(bytes(program))
                ids += engine.copy_ids(op, resolve(Program((op,)), source), tok)
                if context and len(runner.fed) + len(ids) > context:
                    raise DecodeError(f"{case}: copying {op.unit} {op.start}-{op.end} would take the "
                                      f"sequence past {lm.name}'s context of {context} tokens")
            f0 = time.perf_counter()
            logits = runner.forward(ids)
            runner.sync()
            elapsed = time.perf_counter() - f0
            if closing:
                t["copy"] += elapsed
                copy_forwards += 1
                copied_tokens += len(ids) - 1
            else:
                t["decode"] += elapsed
                decode_forwards += 1
        total = time.perf_counter() - started
    if not engine.done():
        raise ProgramError(f"{case}: the budget ran out inside an op ({bytes(program)[-40:]!r}); the walker "
                           "margin should have prevented this")
    text = bytes(program).decode("utf-8")
    parsed = parse(text)
    return DecodeResult(
        text=text, program=parsed, output=resolve(parsed, source), stopped=stopped,
        timings=DecodeTimings(t["prompt"], t["decode"], t["copy"], t["mask"], total),
        counts=DecodeCounts(len(prompt), len(written), copied_tokens, decode_forwards, copy_forwards,
                            engine.computed - computed_before),
        sequence=tuple(runner.fed), prompt_length=len(prompt), final_logits=logits.detach().clone(),
    )


def decode_rewrite(lm: LoadedModel, tok: ModelTokenizer, source: str, instruction: str, template: PromptTemplate,
                   budget: int, case: str = "case") -> tuple[str, float, int, str]:
    """Plain greedy decoding of the whole edited text (the rewrite baseline): (text, seconds, tokens, stopped)."""
    prompt = prompt_ids(tok, template, source, instruction)
    if not instruction.strip():
        raise DecodeError(f"{case}: the edit instruction is empty")
    context = model_context(lm)
    if context and len(prompt) + budget > context:
        raise DecodeError(f"{case}: the prompt ({len(prompt)} tokens) plus the budget ({budget}) exceeds "
                          f"{lm.name}'s context of {context} tokens")
    runner = _Runner(lm)
    written: list[int] = []
    stopped = "budget"
    with runner.torch.inference_mode():
        started = time.perf_counter()
        logits = runner.forward(prompt)
        vocab = tok.fsm_tokenizer.vocab_size  # embedding rows past the tokenizer spell nothing
        for _ in range(budget):
            token = int(logits[:vocab].argmax())
            if token in tok.eos_ids:
                stopped = "eos"
                break
            written.append(token)
            logits = runner.forward([token])
        runner.sync()
        seconds = time.perf_counter() - started
    text = tok.decode_bytes(written).decode("utf-8", errors="replace")
    return text, seconds, len(written) + (stopped == "eos"), stopped



def load_for_decoding(name: str, weights: str, dtype: str, device: str):
    """The model (kernels_profile.runtime.loading.load_model, the one loader) and its ModelTokenizer."""
    loaded = load_model(name, weights, dtype, device)
    return loaded.lm, ModelTokenizer.from_hf(loaded.hf_tok, loaded.eos_ids, name)


def result_record(result: DecodeResult, target: str | None = None) -> dict:
    """A flat, JSON-able summary of one decode."""
    from dataclasses import asdict

    return {"program": result.text, "output": result.output, "stopped": result.stopped,
            "exact_match": None if target is None else result.output == target,
            **{f"t_{k}": v for k, v in asdict(result.timings).items()}, **asdict(result.counts)}
