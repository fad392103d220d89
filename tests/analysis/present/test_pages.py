"""analysis.present.pages: tables (show, pivot_wide, the stand-in mark) and page blocks as escaped HTML, the
index's claims grid (grid_rows, clip_cell, claim_page, judged_figure). Inputs are small frames and claims
built here; every value a page shows is escaped."""

from __future__ import annotations

import dataclasses
import re

import polars as pl
from fixtures import ATTACK

from analysis.present import notebook as present
from analysis.present.pages import CELL_LIMIT, claim_page, clip_cell, judged_figure, mark_stand_in


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


def test_grid_rows_split_per_corpus_clip_long_cells_and_ignore_new_fields():
    import dataclasses as dc

    from analysis.present.pages import grid_rows

    @dc.dataclass(frozen=True)
    class Later(present.Claim):  # a Claim with a field added later by claims.py
        setup_differences: str = "bf16 on an H200, not an A100"

    ours = ("paper kernel x this suite's spans: ProbeEdit-S* 61.7x [53.8, 70.5]; HEvalFix-Py 3.5x [3.0, 3.9]; "
            "pooled 25.5x (ratio of sums). Beside it, fit: ProbeEdit-S* 13.5x")
    bound = Later(claim="3. bound", paper="29.0x ProbeEdit / 3.4x HEvalFix-Py / 13.0x pooled", ours=ours,
                  verdict=present.DIFFERS, reason="r", method="spans x kernel [bounds]")
    long = present.Claim(claim="9. long", paper="p", ours="; ".join(f"figure {i} " + "x" * 30 for i in range(12)),
                         verdict=present.REPRODUCED, reason="r", method="m [spans]")
    rows = grid_rows([bound, long], {"ProbeEdit-S", "HEvalFix-Py"}, {"ProbeEdit-S": 154, "HEvalFix-Py": 164})
    by_scope = {r.scope: r for r in rows if r.claim == "3. bound"}
    assert set(by_scope) == {"ProbeEdit-S*", "HEvalFix-Py", "pooled"}
    assert by_scope["ProbeEdit-S*"].ours == "61.7x [53.8, 70.5] · 154 cases"
    assert by_scope["ProbeEdit-S*"].paper == "29.0x ProbeEdit" and by_scope["pooled"].paper == "13.0x pooled"
    assert all("Beside it" not in r.ours for r in rows) and by_scope["HEvalFix-Py"].page == "bounds"
    clipped = [r for r in rows if r.claim == "9. long"][0]
    assert len(clipped.ours) <= CELL_LIMIT and clipped.ours.endswith("… (more on the page)")


def test_clip_cell_keeps_short_text_and_cuts_long_text_at_a_separator():
    assert clip_cell("a  b\n c") == "a b c"  # whitespace folded, nothing cut
    parts = [f"part {i} " + "y" * 20 for i in range(20)]
    clipped = clip_cell("; ".join(parts), limit=100)
    assert len(clipped) <= 100 and clipped.endswith(" … (more on the page)")
    kept = clipped.removesuffix(" … (more on the page)")
    assert kept in "; ".join(parts) and not kept.endswith(";") and "; ".join(parts).startswith(kept + "; ")
    assert len(clip_cell("z" * (CELL_LIMIT + 1))) <= CELL_LIMIT


def test_claim_page_follows_the_methods_stage_tag_then_the_title():
    def claim(title, method):
        return present.Claim(claim=title, paper="p", ours="o", verdict=present.REPRODUCED, reason="r", method=method)

    assert claim_page(claim("1. anything", "m [spans]")) == "coverage"
    assert claim_page(claim("1. anything", "m [spans, bounds]")) == "bounds"  # the last known stage wins
    assert claim_page(claim("7. the round trip", "m [nothing]")) == "losslessness"
    assert claim_page(claim("8. other", "")) == "summary"


def test_judged_figure_drops_the_figures_set_beside_it():
    assert judged_figure("HEvalFix-Py 3.5x. Beside it, fit: 2.0x") == "HEvalFix-Py 3.5x"
    assert judged_figure("74.3%; for comparison 80%") == "74.3%"
    assert judged_figure(" 74.3% ") == "74.3%"


def test_mark_stand_in_stars_probeedit_s_only_where_there_is_a_corpus_column():
    frame = pl.DataFrame({"corpus": ["ProbeEdit-S", "HEvalFix-Py"], "v": [1, 2]})
    assert mark_stand_in(frame)["corpus"].to_list() == ["ProbeEdit-S*", "HEvalFix-Py"]
    other = pl.DataFrame({"name": ["ProbeEdit-S"]})
    assert mark_stand_in(other).equals(other)


def test_the_summary_table_cells_stay_short_and_the_full_text_follows():
    """P2: no summary-table cell over CELL_LIMIT characters (plus its marker); claim_details keeps every word."""
    import re

    from analysis.claims.engine import REPRODUCED, Claim
    from analysis.present.pages import CELL_LIMIT, FULL_TEXT_BELOW, claim_details, summary_table

    long = "; ".join(f"HEvalFix-Py body {i}: 12.3x [11.0, 13.5] · 164 cases" for i in range(40))
    items = [Claim("3. bound", "29.0x <ProbeEdit>", long, REPRODUCED, "within " + long, "bounds [bounds]")]
    page = summary_table(items).as_raw_html()
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", page, flags=re.S)]
    assert cells and max(len(c) for c in cells) <= CELL_LIMIT
    assert any(c.endswith(FULL_TEXT_BELOW.strip(" …").strip()) or FULL_TEXT_BELOW.strip() in c for c in cells)
    details = claim_details(items).text
    assert long in details and "29.0x &lt;ProbeEdit&gt;" in details and "<ProbeEdit>" not in details
