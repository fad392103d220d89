"""The rule registry (lm-evaluation-harness's pattern): each rule module registers its rule under the key
of its paper_claims.json entry with `@register("key")`; the engine only looks a key up and runs it.

A rule is `rule(spec, tables, metrics_dir) -> Claim`: `spec` is the claim's JSON entry, `tables` and
`metrics_dir` the stage outputs it reads. It raises MissingOutputError when an output it needs is absent
(the engine turns that into `not run`)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from analysis.claims.verdict import Claim
from analysis.errors import ParamsError

Rule = Callable[[dict, Path, Path], Claim]
RULES: dict[str, Rule] = {}


def register(key: str) -> Callable[[Rule], Rule]:
    """Register the decorated function as the rule of claim `key`; a key registered twice is an error."""
    def add(fn: Rule) -> Rule:
        if key in RULES and RULES[key] is not fn:
            raise ParamsError(f"claim rule {key!r} is registered twice ({RULES[key].__module__}, {fn.__module__})")
        RULES[key] = fn
        return fn
    return add
