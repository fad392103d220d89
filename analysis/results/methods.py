"""The e2e stage's methods as one typed value: `Method` (kind, level, directive handling, draft policy,
draft cap), spelled as a name in every table and checkpoint (`Method.name`), read back from it in one
place (`Method.parse`), labelled in one place (`label`, `short`), and ordered for a headline in one
place (`headline_key`).

  ar                      autoregressive regeneration of the gold output, teacher-forced
  pld_<policy>_k<k>       prompt lookup decoding, gold acceptance, `policy` earliest (transformers'
                          PromptLookupCandidateGenerator, the standard) or latest, drafts of at most k
  suffix_k<k>             suffix decoding (a per-request suffix tree over the prompt and the output),
                          gold acceptance, drafts of at most k tokens
  cad_<level>_overhead    Copy-as-Decode, directive tokens decoded: what a deployment pays
  cad_<level>             Copy-as-Decode, directive tokens free: the ideal variant, its upper bound

AR and the speculative methods are timed on the rewrite prompt (unnumbered source: what they would be
given), Copy-as-Decode on the program prompt (numbered source lines). Torch-free: the stage, its
summary, the reports and the claims all read methods through this module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from analysis.errors import ParamsError

AR, PLD, SUFFIX, CAD = "ar", "pld", "suffix", "cad"
KINDS = (AR, PLD, SUFFIX, CAD)
LEVELS = ("line", "token")
POLICIES = ("earliest", "latest")
STANDARD_POLICY = "earliest"  # transformers' PromptLookupCandidateGenerator takes the first match
IDEAL, DECODED = "ideal", "decoded"
DIRECTIVES = (IDEAL, DECODED)
REWRITE_PROMPT, PROGRAM_PROMPT = "rewrite", "program"
_DECODED_SUFFIX = "_overhead"  # the name's spelling of DECODED (the bound's `overhead` variant)
_NAME = re.compile(r"ar|pld_(?P<policy>[a-z]+)_k(?P<pk>\d+)|suffix_k(?P<sk>\d+)|cad_(?P<level>[a-z]+)(?P<decoded>_overhead)?")


@dataclass(frozen=True)
class Method:
    kind: str
    level: str | None = None        # cad: line | token
    directives: str | None = None   # cad: ideal | decoded
    policy: str | None = None       # pld: earliest | latest
    k: int | None = None            # pld, suffix: the draft cap

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ParamsError(f"e2e method: unknown kind {self.kind!r}; known: {', '.join(KINDS)}")
        wants = {AR: (), PLD: ("policy", "k"), SUFFIX: ("k",), CAD: ("level", "directives")}[self.kind]
        for field in ("level", "directives", "policy", "k"):
            if (getattr(self, field) is not None) != (field in wants):
                raise ParamsError(f"e2e method {self.kind}: {field} must be {'set' if field in wants else 'unset'}, "
                                  f"got {getattr(self, field)!r}")
        for field, allowed in (("level", LEVELS), ("directives", DIRECTIVES), ("policy", POLICIES)):
            value = getattr(self, field)
            if value is not None and value not in allowed:
                raise ParamsError(f"e2e method {self.kind}: {field} must be one of {', '.join(allowed)}, got {value!r}")
        if self.k is not None and (isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1):
            raise ParamsError(f"e2e method {self.kind}: the draft cap k must be an integer >= 1, got {self.k!r}")

    # ---------------------------------------------------------------- constructors
    @classmethod
    def ar(cls) -> Method:
        return cls(AR)

    @classmethod
    def pld(cls, policy: str, k: int) -> Method:
        return cls(PLD, policy=policy, k=k)

    @classmethod
    def suffix(cls, k: int) -> Method:
        return cls(SUFFIX, k=k)

    @classmethod
    def cad(cls, level: str, directives: str) -> Method:
        return cls(CAD, level=level, directives=directives)

    @classmethod
    def parse(cls, name: str) -> Method:
        """The method a table or checkpoint names; an unknown name is a ParamsError naming it."""
        found = _NAME.fullmatch(name) if isinstance(name, str) else None
        if found is None:
            raise ParamsError(f"e2e: unknown method name {name!r} (ar, pld_<policy>_k<k>, suffix_k<k>, "
                              "cad_<level>, cad_<level>_overhead)")
        if name == AR:
            return cls.ar()
        if found["policy"] is not None:
            return cls.pld(found["policy"], int(found["pk"]))
        if found["sk"] is not None:
            return cls.suffix(int(found["sk"]))
        return cls.cad(found["level"], DECODED if found["decoded"] else IDEAL)

    # ---------------------------------------------------------------- what it is
    @property
    def name(self) -> str:
        if self.kind == AR:
            return AR
        if self.kind == PLD:
            return f"pld_{self.policy}_k{self.k}"
        if self.kind == SUFFIX:
            return f"suffix_k{self.k}"
        return f"cad_{self.level}" + (_DECODED_SUFFIX if self.directives == DECODED else "")

    @property
    def speculative(self) -> bool:
        """Drafts and verifies (PLD, suffix decoding): it has an acceptance histogram over 0..k."""
        return self.kind in (PLD, SUFFIX)

    @property
    def prompt(self) -> str:
        """The prompt it is timed on: the program prompt (numbered lines) for Copy-as-Decode, else the
        rewrite prompt (what AR and a drafter would be given)."""
        return PROGRAM_PROMPT if self.kind == CAD else REWRITE_PROMPT

    @property
    def label(self) -> str:
        """The name a table shows."""
        if self.kind == AR:
            return "AR (teacher-forced)"
        if self.kind == PLD:
            standard = ", the standard policy" if self.policy == STANDARD_POLICY else ""
            return f"PLD ({self.policy}{standard}) with gold acceptance, k={self.k}"
        if self.kind == SUFFIX:
            return f"suffix decoding with gold acceptance, k={self.k}"
        if self.directives == DECODED:
            return f"Copy-as-Decode, {self.level} level, directive tokens decoded"
        return f"Copy-as-Decode, {self.level} level, directives free (upper bound)"

    @property
    def short(self) -> str:
        """A chart's or a sentence's name for it."""
        if self.kind == AR:
            return "AR"
        if self.kind == PLD:
            return f"PLD {self.policy}, k={self.k}"
        if self.kind == SUFFIX:
            return f"suffix decoding, k={self.k}"
        return (f"Copy-as-Decode {self.level}, directives decoded" if self.directives == DECODED
                else f"Copy-as-Decode {self.level}, ideal (upper bound)")

    def headline_key(self) -> tuple:
        """Headline order: Copy-as-Decode with directives decoded first (what a deployment pays), then the
        rivals (PLD standard policy before latest, by k; suffix decoding), then the ideal variants
        (upper bounds), AR last."""
        rank = {CAD: 0 if self.directives == DECODED else 3, PLD: 1, SUFFIX: 2, AR: 4}[self.kind]
        return (rank, LEVELS.index(self.level) if self.level else 0,
                POLICIES.index(self.policy) if self.policy else 0, self.k or 0)


def method_label(name: str) -> str:
    return Method.parse(name).label


def headline_order(names) -> list[str]:
    """Method names in headline order (`Method.headline_key`)."""
    return sorted(names, key=lambda n: Method.parse(n).headline_key())
