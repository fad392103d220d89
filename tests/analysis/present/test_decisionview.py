"""The index's first screen answers the decision (UX review C1, C5, B3 and the preprint's status): the block
"Against what you would run instead" above the paper's claims, its numbers and chips read from the claims'
decision scopes; the key charts one a row at a readable width; one method-to-colour map for every chart."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest

from fixtures import ROOT

from analysis.claims import decision as d
from analysis.claims.engine import claims
from analysis.claims.verdict import BEYOND, Claim, Scope
from analysis.layout import FIGURES, METRICS, TABLES
from analysis.present import decisionview
from analysis.present.colours import method_colour
from analysis.present.index import KEY_CHART_MAX_WIDTH, KEY_FIGURES, PREPRINT_STATUS, collapsed, index_html


def _scope(where: str, value: float, ci: tuple[float, float], decision: str, **detail) -> Scope:
    facts = {"load": d.BATCH_1, "judged": True, "kernel_source": "dev", "corpus": where, "pool": "corpus",
             "where": where, "copy": "copy-line-jump", "copy_label": "CaD line", "copy_speedup": 10.0,
             "rival": "pld-latest-kinf", "rival_label": "PLD unbounded", "rival_speedup": 20.0, "flips": [], **detail}
    return Scope(f"dev, {where}", "not in the paper", "o", BEYOND, "r", value=value, ci=ci, cases=5, decision=decision,
                 basis=d.PRICED, detail=facts)


def _claims() -> list[Claim]:
    batch = (_scope("HEvalFix-Py", 1.3, (1.1, 1.5), d.FASTER),
             _scope("every corpus", 0.53, (0.51, 0.56), d.SLOWER, pool="all", corpus="pooled",
                    flips=[{"policy": "earliest", "wins_up_to": 32, "loses_from": 64, "unbounded_wins": True}]))
    load = tuple(Scope(f"batched, C={c}", "–", "o", BEYOND, "r", value=v, ci=(v - 0.05, v + 0.05), cases=5,
                       decision=d.decide((v - 0.05, v + 0.05)), basis=d.EXTRAPOLATED,
                       detail={"load": f"C={c}", "concurrency": c, "kernel_source": "batched",
                               "basis_text": "extrapolated from batch 1", "rival_label": "suffix decoding"})
                 for c, v in ((1, 0.8), (16, 1.0)))
    engine = Scope("vLLM run", "–", "o", BEYOND, "r", value=1.4, ci=(1.2, 1.6), cases=20, decision=d.FASTER,
                   basis=d.MEASURED, detail={"load": "C=1", "copy_label": "CaD", "rival_label": "ngram"})
    return [Claim("rivals", "p", "o", BEYOND, "r", "m", scopes=batch, key="rivals"),
            Claim("serving", "p", "o", BEYOND, "r", "m", scopes=load, key="batched_serving"),
            Claim("engine", "p", "o", BEYOND, "r", "m", scopes=(engine,), key="engine")]


def test_the_block_shows_each_decision_with_its_number_interval_chip_and_source():
    html = decisionview.decision_block(_claims(), charts=False)
    assert html.index("At batch 1, under dev") < html.index("Under load") < html.index("Measured on an engine")
    assert "1.30x [1.10, 1.50]<span class='cd-dchip cd-dchip-faster'>faster</span>" in html
    assert "0.53x [0.51, 0.56]<span class='cd-dchip cd-dchip-slower'>slower</span>" in html
    assert "0.80x [0.75, 0.85]<span class='cd-dchip cd-dchip-slower'>slower</span><span class='cd-bchip'>extrapolated" in html
    assert "<span class='cd-dchip cd-dchip-tie'>tie</span>" in html and "cd-bchip'>measured" in html
    assert "it wins up to k = 32, loses from k = 64" in html
    assert decisionview.decision_block([Claim("x", "p", "o", BEYOND, "r", "m")]) == ""


def test_the_grid_points_to_the_block_instead_of_repeating_each_decision():
    rows = collapsed(_claims())
    assert [len(c.scopes) for c in rows] == [0, 0, 0]
    assert rows[0].ours.startswith("2 decisions (1 faster, 1 slower): in the first block above")


def test_the_committed_index_opens_with_the_decision_and_the_preprints_status(tmp_path):
    """The first block of the committed outputs' index: above the paper's claims, the batch-1 rows with the
    claims' own numbers and chips."""
    items = claims(ROOT / TABLES, ROOT / METRICS)
    html = index_html([], ROOT, items)
    block = html.index("Against what you would run instead")
    assert block < html.index("The preprint's claims next to this suite's") < html.index("Paper versus ours")
    assert html.index("arXiv 2604.18170 v2 (26 May 2026)") < block and "reported withdrawn" in PREPRINT_STATUS
    judged = [s for s in decisionview.decision_scopes(items) if s.detail.get("judged")]
    assert judged, "the committed rivals outputs give no decision scope"
    for s in judged:
        assert f"{s.value:.2f}x" in html and f"cd-dchip-{decisionview.DECISION_CLASSES[s.decision]}" in html


def test_key_charts_are_one_a_row_at_a_readable_width():
    """C5: two a row drew the kernel charts at 37-43% of their size; now one a row, and no committed key chart is so
    wide that the column shrinks it below 80%."""
    html = index_html([], ROOT, claims(ROOT / TABLES, ROOT / METRICS))
    assert "cd-figures-pair" not in html and "rivals.svg" in html and "under load: every method" in html
    wide = {}
    for stem, _ in KEY_FIGURES:
        path = ROOT / FIGURES / f"{stem}.svg"
        if path.is_file():
            width = decisionview.svg_width(path.read_text(errors="replace"))
            if width and width > KEY_CHART_MAX_WIDTH:
                wide[stem] = width
    assert wide == {}


def test_the_preprints_status_is_stated_where_the_paper_is_named():
    for path in ("README.md", "docs/claims.md"):
        text = (ROOT / path).read_text()
        head = text[:text.index("2604.18170") + 400]
        assert "v2" in head and "26 May 2026" in head and "withdrawn" in head, path


# ---------------------------------------------------------------- B3: one method-to-colour map


def test_every_method_has_its_own_colour_and_a_family_row_its_familys_dark_shade():
    """B3: 11 methods on a 10-colour palette drew AR and suffix decoding alike, and the two serving charts coloured
    one method two ways. The map is by method, shared, with no two methods alike, and any k or family the registry
    accepts gets a colour (none is looked up in a closed list)."""
    from analysis.pipeline.params import load_params
    from analysis.rivals.methods import stage_methods

    names = [m.name for m in stage_methods(load_params(ROOT / "params.yaml"), "rivals")]
    colours = {method_colour(n) for n in names}
    assert len(colours) == len(names) > 10
    assert method_colour("pld-earliest-k8") not in colours  # a k outside the params' list still has its own shade
    assert method_colour("pld-best-k", "pld") not in colours and method_colour("pld", "pld") == method_colour("pld-best-k", "pld")


def _scale(spec: dict, field: str) -> dict:
    for node in _walk(spec):
        if isinstance(node, dict) and node.get("field") == field and "scale" in node:
            return node["scale"]
    raise AssertionError(f"no scale on {field}")


def _walk(node):
    yield node
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else []
    for child in children:
        yield from _walk(child)


def test_both_serving_charts_draw_each_method_in_the_same_colour_and_roles_by_dash():
    from analysis.present import charts

    table = pl.read_csv(ROOT / TABLES / "serving.csv", infer_schema_length=None)
    one = table.filter(pl.col("kernel_source") == table["kernel_source"][0])
    speed = charts.serving_speedup(one, "t").to_dict()
    latency = charts.serving_throughput_latency(one, "t").to_dict()
    a, b = _scale(speed, "method"), _scale(latency, "method")
    first = dict(zip(a["domain"], a["range"]))
    assert all(first[m] == c for m, c in zip(b["domain"], b["range"]) if m in first)
    assert len(set(b["range"])) == len(b["domain"]) > 10
    dash = _scale(latency, "role")
    assert len({json.dumps(r) for r in dash["range"]}) == len(dash["domain"])
    x_axis = next(n["axis"] for n in _walk(latency) if isinstance(n, dict) and n.get("field") == "output_tokens_per_s")
    assert x_axis["labelOverlap"] == "greedy"  # "100200" was two tick labels run together
