"""analysis.present.pages: tables (show, pivot_wide, the stand-in mark) and page blocks as escaped HTML, the
index's claims grid (grid_rows, claims_grid, clip_cell, anchor). Inputs are small frames and claims
built here; every value a page shows is escaped."""

from __future__ import annotations

import dataclasses
import re

import polars as pl
from fixtures import ATTACK

from analysis.present import notebook as present
from analysis.present.pages import CELL_LIMIT, anchor, claims_grid, clip_cell, grid_rows, mark_stand_in, section_href


def _html(view) -> str:
    return view.as_raw_html()


def test_show_has_no_index_folds_the_interval_and_lifts_shared_columns():
    frame = pl.DataFrame({"corpus": ["HEvalFix-Py", "ProbeEdit-S"], "model": ["m1", "m1"], "coverage": [0.7432, 0.987],
                          "ci_low": [0.702, 0.985], "ci_high": [0.774, 0.989], "bound": [2.887, 11.17]})
    view = present.show(frame, title="t", pct=["coverage"], x=["bound"], ci=[("coverage", "ci_low", "ci_high")])
    text = _html(view)
    assert "74.3%" in text and "[70.2, 77.4]" in text and "11.2x" in text
    assert "ci_low" not in text and "ci low" not in text
    assert "model m1" in text  # the shared column moved to the subtitle ...
    assert text.count(">m1<") == 0  # ... and is not repeated on every row
    assert "ProbeEdit-S*" in text and present.STAND_IN_NOTE.split(" is ")[0].lstrip("* ") in text
    header = re.findall(r"<th[^>]*>(.*?)</th>", text, flags=re.S)
    assert not any(h.strip() in ("", "0") for h in header)  # no index column


def test_show_escapes_cell_text_titles_and_notes():
    frame = pl.DataFrame({"case_id": [ATTACK], "value": [1.0]})
    text = _html(present.show(frame, title=ATTACK, note=ATTACK, lift_constants=False))
    assert ATTACK not in text and "&lt;img src=x onerror=alert(1)&gt;" in text


def test_page_blocks_escape_every_value():
    blocks = [present.note("<b>{case}</b>", case=ATTACK), present.pre(ATTACK), present.lead(ATTACK, [(ATTACK, ATTACK)]),
              present.provenance_html(present.Provenance(*([ATTACK] * len(dataclasses.fields(present.Provenance)))))]
    for block in blocks:
        assert ATTACK not in block._repr_html_() and "&lt;img" in block._repr_html_()


def test_pivot_wide_makes_one_column_per_value_in_first_seen_order():
    long = pl.DataFrame({"corpus": ["a", "a", "b", "b"], "rate": ["1.0", "0.0", "1.0", "0.0"], "em": [0.1, 1.0, 0.2, 1.0]})
    wide = present.pivot_wide(long, index=["corpus"], on="rate", values="em")
    assert wide.columns == ["corpus", "1.0", "0.0"] and wide.height == 2


def _bound_claim():
    scopes = (present.Scope("ProbeEdit-S*", "29.0x", "61.7x [53.8, 70.5]", present.NOT_COMPARABLE, "the stand-in",
                            cases=154),
              present.Scope("HEvalFix-Py", "3.4x", "3.5x [3.0, 3.9]", present.REPRODUCED, "inside the widened CI"),
              present.Scope("pooled over the paper's three corpora", "13.0x", "19.0x", present.NOT_COMPARABLE,
                            "holds the stand-in " + "because " * 60, cases=482))
    return present.Claim(claim="3. bound", paper="29.0x ProbeEdit / 3.4x HEvalFix-Py / 13.0x pooled",
                         ours="unused by the grid", verdict=present.REPRODUCED, reason="1 of 1 judged reproduced",
                         method="m [bounds]", scopes=scopes, section="bounds#like-with-like")


def test_grid_rows_are_the_claims_scopes_each_with_its_verdict_and_reason():
    long = present.Claim(claim="9. long", paper="p", ours="; ".join(f"figure {i} " + "x" * 30 for i in range(12)),
                         verdict=present.REPRODUCED, reason="r", method="m")
    rows = grid_rows([_bound_claim(), long], {"HEvalFix-Py": 164})
    by_scope = {r.scope: r for r in rows if r.claim == "3. bound"}
    assert list(by_scope) == ["ProbeEdit-S*", "HEvalFix-Py", "pooled over the paper's three corpora"]
    assert by_scope["ProbeEdit-S*"].ours == "61.7x [53.8, 70.5] · 154 cases"
    assert by_scope["HEvalFix-Py"].ours == "3.5x [3.0, 3.9] · 164 cases"  # the run's count where the scope had none
    assert by_scope["HEvalFix-Py"].judged and not by_scope["ProbeEdit-S*"].judged
    assert {r.verdict for r in by_scope.values()} == {present.REPRODUCED, present.NOT_COMPARABLE}
    assert all(r.claim_verdict == present.REPRODUCED and r.section == "bounds#like-with-like" for r in by_scope.values())
    clipped = [r for r in rows if r.claim == "9. long"][0]
    assert clipped.scope == "" and clipped.section == "summary"  # a claim without scopes is one row
    assert len(clipped.ours) <= CELL_LIMIT and clipped.ours.endswith("… (more on the page)")


def test_the_grid_shows_why_visibly_marks_the_judged_row_and_links_each_row_to_its_section():
    text = claims_grid(grid_rows([_bound_claim()]), lambda page: f"html/{page}.html").text
    body = re.sub(r"<style>.*?</style>", "", text, flags=re.S)
    assert "title=" not in body  # the reason is in the row, not only a hover
    assert "the stand-in</td>" in body and "inside the widened CI" in body
    assert body.count("href='html/bounds.html#like-with-like'") == 3  # every row, not only the first
    assert body.count("<tr class='cd-judged'>") == 1 and "HEvalFix-Py (judged)" in body
    assert "cd-chip-not-comparable" in body and body.count("rowspan='3'") == 1


def test_a_heading_anchor_is_its_text_slugged():
    assert anchor("Like with like: the paper&#39;s kernel, this suite&#39;s spans") == \
        "like-with-like-the-paper-s-kernel-this-suite-s-spans"
    assert section_href("kernel#on-a-gpu", lambda p: f"{p}.html") == "kernel.html#on-a-gpu"
    assert section_href("", lambda p: f"{p}.html") == "summary.html"


def test_clip_cell_keeps_short_text_and_cuts_long_text_at_a_separator():
    assert clip_cell("a  b\n c") == "a b c"  # whitespace folded, nothing cut
    parts = [f"part {i} " + "y" * 20 for i in range(20)]
    clipped = clip_cell("; ".join(parts), limit=100)
    assert len(clipped) <= 100 and clipped.endswith(" … (more on the page)")
    kept = clipped.removesuffix(" … (more on the page)")
    assert kept in "; ".join(parts) and not kept.endswith(";") and "; ".join(parts).startswith(kept + "; ")
    assert len(clip_cell("z" * (CELL_LIMIT + 1))) <= CELL_LIMIT


def test_mark_stand_in_stars_probeedit_s_only_where_there_is_a_corpus_column():
    frame = pl.DataFrame({"corpus": ["ProbeEdit-S", "HEvalFix-Py"], "v": [1, 2]})
    assert mark_stand_in(frame)["corpus"].to_list() == ["ProbeEdit-S*", "HEvalFix-Py"]
    other = pl.DataFrame({"name": ["ProbeEdit-S"]})
    assert mark_stand_in(other).equals(other)


def test_a_table_with_no_rows_says_it_was_not_run():
    """B8: the pilot page's wall-clock section drew a header and no rows."""
    import polars as pl

    from analysis.present.pages import show

    shown = show(pl.DataFrame(schema={"case_id": pl.String, "ratio": pl.Float64}), title="Rewrite <s> / program s")
    assert "not run in this run" in shown.text and "Rewrite &lt;s&gt; / program s" in shown.text


def test_the_summary_table_cells_stay_short_and_the_full_text_follows():
    """P2: no summary-table cell over CELL_LIMIT characters (plus its marker); claim_details keeps every word."""
    import re

    from analysis.claims.verdict import REPRODUCED, Claim
    from analysis.present.pages import CELL_LIMIT, FULL_TEXT_BELOW, claim_details, summary_table

    long = "; ".join(f"HEvalFix-Py body {i}: 12.3x [11.0, 13.5] · 164 cases" for i in range(40))
    items = [Claim("3. bound", "29.0x <ProbeEdit>", long, REPRODUCED, "within " + long, "bounds [bounds]")]
    page = summary_table(items).as_raw_html()
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", page, flags=re.S)]
    assert cells and max(len(c) for c in cells) <= CELL_LIMIT
    assert any(c.endswith(FULL_TEXT_BELOW.strip(" …").strip()) or FULL_TEXT_BELOW.strip() in c for c in cells)
    details = claim_details(items).text
    assert long in details and "29.0x &lt;ProbeEdit&gt;" in details and "<ProbeEdit>" not in details
