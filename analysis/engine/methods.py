"""The methods an engine run measures, and how each maps onto the engine and onto the simulator's vocabulary.

    ar              greedy decoding, one token per forward (the baseline; its output at concurrency 1 in the
                    first repeat is the gold every other method must reproduce)
    ngram-k<k>      vLLM's prompt lookup (`speculative_config.method: ngram`) with k = num_speculative_tokens
    suffix          vLLM's suffix decoding (`method: suffix`; needs the arctic-inference package)
    copy            Copy-as-Decode emulated with public mechanisms (analysis.engine.plan): line-level oracle
                    programs, directive tokens decoded

`Method` of analysis.rivals.methods names what the simulator runs for each: `ar`, prompt lookup at the
same k (vLLM's n-gram window), suffix decoding and `copy-line-decoded`.
"""

from __future__ import annotations

from dataclasses import dataclass

from analysis.engine.requests import EngineRunError

AR, NGRAM, SUFFIX, COPY = "ar", "ngram", "suffix", "copy"
KINDS = {AR: "ar", NGRAM: "spec", SUFFIX: "spec", COPY: "copy"}


@dataclass(frozen=True)
class EngineMethod:
    family: str
    k: int | None = None

    @property
    def name(self) -> str:
        return f"{NGRAM}-k{self.k}" if self.family == NGRAM else self.family

    @property
    def kind(self) -> str:
        return KINDS[self.family]

    @property
    def label(self) -> str:
        return {AR: "AR (greedy)", NGRAM: f"vLLM ngram, k={self.k}", SUFFIX: "vLLM suffix decoding",
                COPY: "Copy-as-Decode (emulated)"}[self.family]

    def speculative_config(self, lookup_min: int, lookup_max: int) -> dict | None:
        if self.family == NGRAM:
            return {"method": "ngram", "num_speculative_tokens": self.k, "prompt_lookup_min": lookup_min,
                    "prompt_lookup_max": lookup_max}
        if self.family == SUFFIX:
            return {"method": "suffix", "num_speculative_tokens": 32}
        return None


def parse_engine_method(name: object) -> EngineMethod:
    """The method a record names; a named error for any other string."""
    if name in (AR, SUFFIX, COPY):
        return EngineMethod(name)
    if isinstance(name, str) and name.startswith(f"{NGRAM}-k") and name[len(NGRAM) + 2:].isdigit():
        k = int(name[len(NGRAM) + 2:])
        if k >= 1:
            return EngineMethod(NGRAM, k)
    raise EngineRunError(f"unknown engine method {name!r}: known are {AR}, {NGRAM}-k<k> (k >= 1), {SUFFIX}, {COPY}")


def run_methods(ngram_ks: tuple[int, ...], suffix: bool, copy: bool) -> list[EngineMethod]:
    return [EngineMethod(AR), *(EngineMethod(NGRAM, k) for k in ngram_ks), *([EngineMethod(SUFFIX)] if suffix else []),
            *([EngineMethod(COPY)] if copy else [])]


def run_id(method: EngineMethod, concurrency: int, repeat: int) -> str:
    return f"{method.name}-c{concurrency}-r{repeat}"
