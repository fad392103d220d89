"""C2 (issue 41): the summary page put a claim's rule (analysis/data/paper_claims.json) beside the verdict reason
its rule module writes, and the two contradicted each other: the end-to-end rule said "the best measured ratio
with its case count", the reason "never a best case" (pooled). A rule and its reason state one method."""

from __future__ import annotations

import json
import re

import pytest
from fixtures import ROOT

from analysis.claims import e2e
from analysis.claims.engine import claims
from analysis.layout import METRICS, TABLES

RULES = {key: entry for key, entry in json.loads((ROOT / "analysis/data/paper_claims.json").read_text()).items()
         if not key.startswith("_")}

# Statements of opposite methods: a rule that says one and a reason that says the other (either way) contradict.
OPPOSITES = (
    ("a best case", r"(?<!never a )\bbest (measured )?(case|ratio|single case)\b", r"\bnever a best case\b"),
    ("a mean of ratios", r"\bmean of (the )?(per-case )?(ratios|speedups)\b", r"\bratio of (sums|summed times)\b"),
)


def contradictions(rule: str, reasons: list[str]) -> list[str]:
    """Each opposite pair one side of which the rule states and the other a reason."""
    found = []
    for name, one, other in OPPOSITES:
        for a, b in ((one, other), (other, one)):
            if re.search(a, rule) and any(re.search(b, r) for r in reasons):
                found.append(f"{name}: the rule says {a!r}, a reason {b!r}")
    return found


def test_the_opposites_catch_the_reported_contradiction():
    reported = "an extension: the best measured ratio with its case count"  # the rule text C2 found
    assert contradictions(reported, [e2e.REASON])
    assert not contradictions(RULES["end_to_end"]["rule"], [e2e.REASON])


def test_the_end_to_end_rule_and_reason_both_say_pooled_never_a_best_case():
    rule = RULES["end_to_end"]["rule"]
    for text in (rule, e2e.REASON):
        assert "pooled" in text and "never a best case" in text and "ratio of summed times" in text, text
        assert not re.search(r"(?<!never a )\bbest (measured )?(case|ratio)\b", text), text


@pytest.fixture(scope="module")
def evaluated():
    return claims(ROOT / TABLES, ROOT / METRICS)


def test_no_claims_rule_contradicts_the_reasons_its_module_writes(evaluated):
    """Every claim evaluated on the committed outputs: its rule (as the engine attaches it, the json's text)
    against its reason and every scope's reason."""
    assert {c.key for c in evaluated} == set(RULES)
    for claim in evaluated:
        assert claim.rule == RULES[claim.key]["rule"]
        reasons = [claim.reason, *(s.reason for s in claim.scopes)]
        assert not contradictions(claim.rule, reasons), (claim.key, contradictions(claim.rule, reasons))
