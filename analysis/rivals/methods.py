"""The method vocabulary: one `Method` value, one spelling of its name, one parser, and the family registry.

A method is a *family* and the settings that name a member of it. Each family is one module of
analysis/rivals/families/ that subclasses `Family` and registers it with `@register`; the module holds the
family's drafter (if it drafts), its forwards on a case (the rivals simulation, analysis.rivals.simulate),
how the e2e stage runs it on a real KV cache (`executor`), its labels and its members from params. Nothing
outside a family module branches on a family's name: the simulation, the e2e runner, the tables and the
pages look the family up here. The families today:

    ar                            whole rewrite: every gold token decoded (the baseline)
    pld-<policy>-k<k>             prompt lookup (policy earliest: transformers' standard, or latest)
    ngram-simple-k<k>             llama.cpp's `ngram-simple` (the latest earlier n-gram, an m-gram draft)
    ngram-mod-k<k>                llama.cpp's `ngram-mod` (a hashed n-gram -> next-token pool, chained drafts)
    suffix-k<k>[-cache]           suffix decoding, per-request tree (`-cache`: plus the cross-request cache)
    sa-k<k>                       TensorRT-LLM's suffix automaton, longest match
    input-k<k>                    the input as the draft, re-aligned after each mismatch (predicted outputs'
                                  shape, EfficientEdit's reuse phase)
    unified-diff, search-replace  edit formats, every format token decoded
    copy-<level>-<directives>     Copy-as-Decode, line or token level; directive tokens `decoded` (what a
                                  deployment pays), `jump` (forced tokens jump-forwarded) or `ideal` (free:
                                  an upper bound, never a rival)
    copy-pld-<level>-<dir>-k<k>   Copy-as-Decode whose gen spans are drafted by prompt lookup (a hybrid)

k is a draft budget, an integer in [1, K_LIMIT], or `inf` (unbounded) where the family allows it. The e2e
stage's first spelling (`pld_earliest_k10`, `suffix_k64`, `cad_line`, `cad_line_overhead`), found in frozen
runs and tables written before this vocabulary, is read (`parse_method`, `canonical`) and never written.
How to add a family: docs/rivals.md, "Adding a method".
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

import polars as pl

from analysis.errors import ParamsError
from analysis.pipeline.params import did_you_mean, get

REWRITE_PROMPT, PROGRAM_PROMPT = "rewrite", "program"  # the unnumbered source; the numbered one (Copy-as-Decode)
# AR; Copy-as-Decode deployable; an upper bound; the others; a method built from both sides (Copy-as-Decode with a
# rival inside it), reported beside the decision but on neither side of it, so the headline stays Copy-as-Decode's own
ROLES = ("baseline", "copy", "bound", "rival", "hybrid")
EXECUTORS = ("autoregressive", "speculative", "program")  # how the e2e executor runs a family (kernels_profile.e2e)
K_LIMIT = 4096  # the largest draft budget: a bound, not a setting (a verify forward of K_LIMIT + 1 tokens)
INF = "inf"     # an unbounded draft budget's spelling: k<INF>
RULE_PACKAGE = "analysis.rivals.families"  # every module there registers a family (depgraph reads the name)


@dataclass(frozen=True)
class Method:
    """One method: its family and the settings that name it (the fields its family declares; the others None)."""

    family: str
    level: str | None = None        # copy: line | token
    directives: str | None = None   # copy: decoded | jump | ideal
    policy: str | None = None       # pld: earliest | latest
    k: int | None = None            # pld, suffix: the draft budget (None: unbounded where the family allows it)
    cache: bool = False             # suffix: the cross-request response cache on
    fmt: str | None = None          # format: unified-diff | search-replace

    def __post_init__(self):
        family_of(self.family).check(self)

    @property
    def spec(self) -> Family:
        return family_of(self.family)

    @property
    def name(self) -> str:
        return self.spec.spell(self)

    @property
    def label(self) -> str:
        """How a table names it."""
        return self.spec.label(self)

    @property
    def short(self) -> str:
        """How a chart or a sentence names it."""
        return self.spec.short(self)

    @property
    def role(self) -> str:
        """baseline, copy, bound, rival or hybrid (ROLES)."""
        return self.spec.role(self)

    @property
    def is_bound(self) -> bool:
        """An upper bound, not a method a deployment can run."""
        return self.role == "bound"

    @property
    def speculative(self) -> bool:
        """It drafts and verifies: its forwards with q > 1 are verifies (draft tokens may be rejected)."""
        return self.spec.speculative

    @property
    def prompt(self) -> str:
        """The prompt it is given: PROGRAM_PROMPT (numbered lines) or REWRITE_PROMPT."""
        return self.spec.prompt

    @property
    def budget(self) -> str:
        """The draft budget as a label says it: `64`, `unbounded`."""
        return "unbounded" if self.k is None else str(self.k)

    def drafter(self, context: list[int], drafts):
        """A fresh drafter over `context` (a speculative family's; `drafts`: analysis.rivals.settings.DraftSettings)."""
        return self.spec.drafter(self, context, drafts)

    def table_key(self) -> tuple:
        """Table order: the families' order (ar, prompt lookup, suffix, formats, Copy-as-Decode), then the members'."""
        return (self.spec.position, *self.spec.member_key(self))

    def headline_key(self) -> tuple:
        """Headline order: Copy-as-Decode with directives decoded first (what a deployment pays), the rivals,
        the upper bounds, AR last."""
        return (self.spec.headline_rank(self), self.spec.position, *self.spec.member_key(self))

    def __str__(self) -> str:
        return self.name


class Family:
    """What one family registers (subclass it in a module of analysis/rivals/families/ and decorate with
    `@register`). Class attributes declare it; the methods take the Method and answer for it."""

    name: ClassVar[str]                            # the name's first part and the `family` column
    title: ClassVar[str]                           # how a chart names the family
    position: ClassVar[int]                        # table order among the families
    fields: ClassVar[tuple[str, ...]] = ()         # the Method fields that name a member, in the name's order
    choices: ClassVar[dict[str, tuple[str, ...]]] = {}  # the values each str field may take
    unbounded: ClassVar[bool] = False              # k may be None (spelled kinf)
    prompt: ClassVar[str] = REWRITE_PROMPT
    executor: ClassVar[str | None] = None          # EXECUTORS: how the e2e stage runs it; None: not run end to end
    speculative: ClassVar[bool] = False            # it has a drafter (`drafter`) and its verifies are atomic
    # the serving simulation can schedule it (its forwards are all atomic verifies or all splittable); else the reason
    unservable: ClassVar[str | None] = None
    group: ClassVar[str | None] = None             # its params group under a stage (`rivals.<group>`), if any
    keys: ClassVar[tuple[str, ...]] = ()           # the keys of that group (DraftSettings' included)

    # ---------------------------------------------------------------- its names
    def spell(self, m: Method) -> str:
        parts = [self.name]
        for field in self.fields:
            value = getattr(m, field)
            if field == "k":
                parts.append(f"k{INF if value is None else value}")
            elif field == "cache":
                parts += ["cache"] if value else []
            else:
                parts.append(value)
        return "-".join(parts)

    def owns(self, name: str) -> bool:
        """`name` starts with this family's name (the parser then asks this family alone)."""
        return name == self.name or name.startswith(f"{self.name}-")

    def read(self, name: str) -> Method:
        """The member `name` spells (a name this family `owns`); a ParamsError naming what is wrong otherwise."""
        parts = name[len(self.name) + 1:].split("-") if name != self.name else []
        values: dict[str, Any] = {}
        for field in self.fields:
            if field == "cache":
                values["cache"] = parts[:1] == ["cache"]
                parts = parts[1:] if values["cache"] else parts
            elif not parts:
                break
            elif field == "k":
                found = re.fullmatch(rf"k([1-9]\d*|{INF})", parts[0])
                if found is None:
                    break
                parts.pop(0)
                values["k"] = None if found[1] == INF else int(found[1])
            else:
                values[field] = parts.pop(0)
        if parts or len(values) != len(self.fields):
            raise ParamsError(f"method {name!r} is not spelled {self.pattern()}")
        try:
            return Method(self.name, **values)
        except ParamsError as exc:
            raise ParamsError(f"method {name!r}: {exc}") from None

    def pattern(self) -> str:
        """How its members are spelled, e.g. `pld-<earliest|latest>-k<1..4096|inf>`."""
        text = self.name
        for field in self.fields:
            if field == "k":
                text += f"-k<1..{K_LIMIT}{'|' + INF if self.unbounded else ''}>"
            elif field == "cache":
                text += "[-cache]"
            else:
                text += f"-<{'|'.join(self.choices[field])}>"
        return text

    def check(self, m: Method) -> None:
        """Its fields set and in range, every other field unset; a ParamsError naming the first that is not."""
        for f in fields(Method):
            if f.name == "family":
                continue
            value, default = getattr(m, f.name), f.default
            if f.name not in self.fields and value != default:
                raise ParamsError(f"method family {self.name!r} has no {f.name} (got {value!r})")
            if f.name in self.choices and value not in self.choices[f.name]:
                raise ParamsError(f"method family {self.name!r}: {f.name} must be one of "
                                  f"{', '.join(self.choices[f.name])}, got {value!r}{did_you_mean(value, self.choices[f.name])}")
        if "k" in self.fields:
            check_k(m.k, f"method family {self.name!r}: k", self.unbounded)

    def member_key(self, m: Method) -> tuple:
        """Order among the family's members: each field by its place in `choices`, k ascending, unbounded last."""
        key = []
        for field in self.fields:
            value = getattr(m, field)
            if field in self.choices:
                key.append(self.choices[field].index(value))
            elif field == "k":
                key.append(K_LIMIT + 1 if value is None else value)
            else:
                key.append(int(bool(value)))
        return tuple(key)

    # ---------------------------------------------------------------- what it is
    def label(self, m: Method) -> str:
        raise NotImplementedError

    def short(self, m: Method) -> str:
        return self.label(m)

    def role(self, m: Method) -> str:
        """A draft without a budget (k unbounded: to the end of the context) is a bound, never deployable: no
        engine serves it (a verify must fit a step's token budget; engines cap a draft)."""
        return "bound" if "k" in self.fields and m.k is None else "rival"

    def headline_rank(self, m: Method) -> int:
        """0: Copy-as-Decode deployable, 1-2: rivals, 3: bounds, 4: the baseline."""
        return 1

    # ---------------------------------------------------------------- what it does
    def drafter(self, m: Method, context: list[int], drafts):
        raise ParamsError(f"method {m.name} has no drafter (it does not speculate)")

    def forwards(self, m: Method, case, drafts, env):
        """Its forwards on one case (analysis.rivals.forwards.Forwards): `case` an analysis.rivals.simulate.CaseInput,
        `drafts` the DraftSettings, `env` the simulation's tokenizer, udiff_context and response cache."""
        raise NotImplementedError

    def options(self, params: dict, where: str) -> Any:
        """Its drafter's own settings, read from its params group `where` (`<stage>.<group>`): a frozen value
        (analysis.rivals.settings.DraftSettings.of hands it to `drafter` and `forwards`); None: it needs none
        beyond prompt lookup's and suffix decoding's (DraftSettings' own fields)."""
        return None

    def response_cache(self, m: Method, drafts):
        """A cross-request state shared by one corpus's cases in id order (a member with `cache`)."""
        raise ParamsError(f"method {m.name} keeps no cross-request state")

    def members(self, params: dict, stage: str) -> tuple[Method, ...]:
        """The members the `stage`'s params name (a family without params: every member)."""
        raise NotImplementedError


FAMILIES: dict[str, Family] = {}


def register(cls: type[Family]) -> type[Family]:
    """Register a family class (a decorator); a name registered twice is an error."""
    name = cls.name
    if name in FAMILIES and type(FAMILIES[name]) is not cls:
        raise ParamsError(f"method family {name!r} is registered twice ({type(FAMILIES[name]).__module__}, {cls.__module__})")
    if cls.executor is not None and cls.executor not in EXECUTORS:
        raise ParamsError(f"method family {name!r}: executor must be one of {EXECUTORS}, got {cls.executor!r}")
    FAMILIES[name] = cls()
    return cls


def family_of(name: str) -> Family:
    try:
        return FAMILIES[name]
    except (KeyError, TypeError):
        raise ParamsError(f"unknown method family {name!r}; registered: {', '.join(FAMILIES)}"
                          f"{did_you_mean(name, FAMILIES)}") from None


def families() -> tuple[Family, ...]:
    """Every registered family, in table order."""
    return tuple(sorted(FAMILIES.values(), key=lambda f: f.position))


def check_k(k: Any, where: str, unbounded: bool) -> None:
    """A draft budget: an integer in [1, K_LIMIT], or None where `unbounded` allows it."""
    if k is None and unbounded:
        return
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= K_LIMIT:
        allowed = f"an integer in [1, {K_LIMIT}]" + (" or unbounded" if unbounded else "")
        raise ParamsError(f"{where} must be {allowed}, got {k!r}")


def draft_budgets(params: dict, dotted: str, unbounded: str | None = None, nonempty: bool = True) -> tuple[int | None, ...]:
    """A params list of draft budgets (distinct integers in [1, K_LIMIT]), then None (unbounded) when the
    boolean at `unbounded` is true: every value is simulated or refused here by name, none dropped."""
    values = get(params, dotted, list)
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= K_LIMIT]
    if (nonempty and not values) or bad or len(set(values)) != len(values):
        raise ParamsError(f"params: {dotted!r} must be a {'non-empty ' if nonempty else ''}list of distinct integers "
                          f"in [1, {K_LIMIT}] (draft budgets{'; unbounded: ' + repr(unbounded) if unbounded else ''}), "
                          f"got {values!r}" + (f" ({bad[0]!r} is out of range)" if bad else ""))
    return tuple(values) + ((None,) if unbounded and get(params, unbounded, bool) else ())


# ---------------------------------------------------------------- the one parser

_LEGACY = re.compile(r"pld_(?P<policy>[a-z]+)_k(?P<pk>\d+)|suffix_k(?P<sk>\d+)|cad_(?P<level>[a-z]+)(?P<decoded>_overhead)?")


def _legacy(name: str) -> Method | None:
    """The e2e stage's first spelling (frozen runs, tables written before this vocabulary)."""
    found = _LEGACY.fullmatch(name)
    if found is None:
        return None
    if found["policy"] is not None:
        return Method("pld", policy=found["policy"], k=int(found["pk"]))
    if found["sk"] is not None:
        return Method("suffix", k=int(found["sk"]))
    return Method("copy", level=found["level"], directives="decoded" if found["decoded"] else "ideal")


def parse_method(name: str) -> Method:
    """The Method a name stands for (the old e2e spelling too); a ParamsError naming it and the spellings otherwise.
    The family whose name is the longest prefix of `name` reads it (a family named like another's prefix is fine)."""
    if isinstance(name, str):
        owners = sorted((f for f in FAMILIES.values() if f.owns(name)), key=lambda f: -len(f.name))
        if owners:
            return owners[0].read(name)
        try:
            found = _legacy(name)
        except ParamsError as exc:
            raise ParamsError(f"method {name!r}: {exc}") from None
        if found is not None:
            return found
    raise ParamsError(f"unknown method {name!r}; methods are spelled {', '.join(f.pattern() for f in families())} "
                      "(analysis.rivals.methods)" + did_you_mean(name, [f.name for f in families()]))


def method_name(name: str) -> str:
    """A name in this vocabulary's spelling (an old e2e name read and respelled)."""
    return parse_method(name).name


def method_label(name: str) -> str:
    return parse_method(name).label


def headline_order(names) -> list[str]:
    """Method names in headline order (`Method.headline_key`)."""
    return sorted(names, key=lambda n: parse_method(n).headline_key())


def table_order(names) -> list[str]:
    """Method names in table order (`Method.table_key`)."""
    return sorted(names, key=lambda n: parse_method(n).table_key())


def canonical(frame: pl.DataFrame, column: str = "method") -> pl.DataFrame:
    """`frame` with its method names respelled in this vocabulary (a table written with the old e2e names);
    an unknown name is a ParamsError naming it."""
    if column not in frame.columns or frame.height == 0:
        return frame
    names = frame[column].unique().drop_nulls().to_list()
    mapping = {n: method_name(n) for n in names}
    if all(k == v for k, v in mapping.items()):
        return frame
    return frame.with_columns(pl.col(column).replace_strict(mapping, default=None))


def stage_methods(params: dict, stage: str) -> tuple[Method, ...]:
    """Every registered family's members named by params `<stage>` (`rivals`), in table order."""
    get(params, stage, dict)
    out = [m for family in families() for m in family.members(params, stage)]
    return tuple(sorted(out, key=Method.table_key))


def load_families() -> list[str]:
    """Import every module of the families package (each registers its family on import)."""
    folder = Path(__file__).parent / "families"
    names = sorted(m.name for m in pkgutil.iter_modules([str(folder)]))
    for name in names:
        importlib.import_module(f"{RULE_PACKAGE}.{name}")
    return names


load_families()
