"""The e2e headline reads e2e_pooled.csv: Copy-as-Decode with directives decoded first, prompt lookup at
its standard policy and best k, suffix decoding, the ideal programs as upper bounds, the HEvalFix pool
beside the all-case pool, each figure a ratio of summed times with its CI and case count, never the best
case; a frozen e2e-wide run shows beside the default when its folder exists, "stale" when it predates these
tables, and "not yet run" otherwise."""

from __future__ import annotations

import json

import polars as pl
import pytest

from analysis.claims import e2e as claims
from analysis.claims import verdict
from analysis.errors import CorpusError
from analysis.layout import E2E_FROZEN, E2E_WIDE, METRICS, REPORTS, TABLES
from analysis.present.headline import HeadlineSettings, build_headline
from analysis.results.e2e import (
    FROZEN_FILES,
    POOLED_COLUMNS,
    best_standard_pld,
    acceptance_rows,
    case_rows,
    not_yet_run,
    pooled_headline,
    pooled_sentence,
    read_frozen,
)
from analysis.rivals.methods import method_label

# AR seconds per pool; each method's seconds per pool. ProbeEdit-S/1 alone wins 19.5x (a best case)
AR = {"HEvalFix-Py": (3, 30.0), "ProbeEdit-S": (1, 39.0), "HEvalFix": (3, 30.0), "pooled": (4, 69.0)}
SECONDS = {  # method -> pool -> seconds
    "copy-line-ideal": {"HEvalFix-Py": 10.0, "ProbeEdit-S": 2.0, "HEvalFix": 10.0, "pooled": 12.0},
    "copy-line-decoded": {"HEvalFix-Py": 15.0, "ProbeEdit-S": 3.0, "HEvalFix": 15.0, "pooled": 18.0},
    "pld-earliest-k10": {"HEvalFix-Py": 25.0, "ProbeEdit-S": 26.0, "HEvalFix": 25.0, "pooled": 51.0},
    "pld-earliest-k64": {"HEvalFix-Py": 12.0, "ProbeEdit-S": 9.0, "HEvalFix": 12.0, "pooled": 21.0},
    "pld-latest-k64": {"HEvalFix-Py": 6.0, "ProbeEdit-S": 4.0, "HEvalFix": 6.0, "pooled": 10.0},  # not the standard
    "suffix-k64": {"HEvalFix-Py": 11.0, "ProbeEdit-S": 8.0, "HEvalFix": 11.0, "pooled": 19.0},
}


def pooled_frame(ar=AR, seconds=SECONDS, model="m") -> pl.DataFrame:
    rows = []
    for method, by_pool in {"ar": {p: s for p, (_, s) in ar.items()}, **seconds}.items():
        for pool, (cases, ar_s) in ar.items():
            s = by_pool[pool]
            rows.append({"model": model, "pool": pool, "method": method, "label": method_label(method), "cases": cases,
                         "ar_seconds": ar_s, "seconds": s, "speedup_pooled": ar_s / s, "ci_low": 0.8 * ar_s / s,
                         "ci_high": 1.2 * ar_s / s, "prompt_seconds": 1.0 * cases,
                         "speedup_with_prompt": (ar_s + cases) / (s + cases), "predicted_pooled": ar_s / s,
                         "abs_error": -0.1})
    return pl.DataFrame(rows).select(POOLED_COLUMNS)


def test_the_sentence_leads_with_directives_decoded_and_pools_never_pick_the_best_case():
    text = pooled_sentence(pooled_frame())
    assert text.startswith("m, pooled over HEvalFix (3 cases): Copy-as-Decode line with directives decoded 2.0x [1.6, 2.4]")
    hevalfix, whole = text.split("; all 4 cases (HEvalFix-Py 3, ProbeEdit-S 1): ")
    # the rivals: the standard policy at its best measured k (64 beats 10), never the latest policy's better 6.9x
    assert "PLD (earliest) at its best k=64 of 10/64 2.5x" in hevalfix and "6.9x" not in text
    assert "suffix decoding, k=64 2.7x" in hevalfix
    assert whole.index("with directives decoded 3.8x") < whole.index("PLD (earliest)") < whole.index("upper bound")
    assert "upper bound (directives free) line 5.8x [4.6, 6.9]" in whole and "19.5" not in text
    assert "including the prompt's prefill: Copy-as-Decode line, directives decoded 1.8x" in hevalfix  # (30 + 3) / (15 + 3)
    assert best_standard_pld(pooled_frame().filter(pl.col("pool") == "pooled")) == "pld-earliest-k64"


def test_a_run_of_hevalfix_cases_only_names_its_pool_once():
    ar = {"HEvalFix-Py": (3, 30.0), "HEvalFix": (3, 30.0), "pooled": (3, 30.0)}
    seconds = {m: {p: v[p] for p in ar} for m, v in SECONDS.items()}
    text = pooled_sentence(pooled_frame(ar, seconds))
    assert text.startswith("m, pooled over all 3 cases (HEvalFix-Py 3): ") and "HEvalFix (" not in text


def write_frozen(root, pooled: pl.DataFrame, commit: str = "abcdef1234567") -> None:
    """A frozen e2e-wide run as `copydecode e2e --preset e2e-wide --out DIR` writes it."""
    folder = root / E2E_WIDE
    folder.mkdir(parents=True)
    pooled.write_csv(folder / "e2e_pooled.csv")
    corpora = pooled.filter(~pl.col("pool").is_in(["pooled", "HEvalFix"]))
    corpora.rename({"pool": "corpus", "speedup_pooled": "speedup_total", "abs_error": "abs_error_total"}).write_csv(
        folder / "e2e_speedup.csv")
    cases = [{"model": r["model"], "corpus": r["pool"], "case_id": f"{r['pool']}/{i}", "method": r["method"],
              "ar_seconds": 1.0, "seconds": 1.0, "speedup": 1.0, "prompt_seconds": 0.1, "tokens": 10, "forwards": 10,
              "tokens_per_forward": 1.0, "accept_hist": None}
             for r in corpora.iter_rows(named=True) for i in range(r["cases"])]
    pl.DataFrame(cases).write_csv(folder / "e2e_cases.csv")
    (folder / "metrics.json").write_text(json.dumps({"pooled": {}}))
    (folder / "run.json").write_text(json.dumps({"command": "copydecode e2e --preset e2e-wide --out w", "commit": commit,
                                                 "started": "2026-12-01T10:00:00+00:00",
                                                 "ended": "2026-12-01T11:20:00+00:00", "seconds": 4800.0}))


WIDE_AR = {"CommitEdits-click": (3, 60.0), "HEvalFix-JS": (9, 40.0), "HEvalFix": (9, 40.0), "pooled": (12, 100.0)}
WIDE = {"copy-line-ideal": {"CommitEdits-click": 10.0, "HEvalFix-JS": 10.0, "HEvalFix": 10.0, "pooled": 20.0},
        "copy-line-decoded": {"CommitEdits-click": 12.0, "HEvalFix-JS": 20.0, "HEvalFix": 20.0, "pooled": 32.0}}


def test_a_frozen_wide_run_is_read_a_missing_one_is_not_yet_run_and_an_old_one_is_stale(tmp_path):
    assert read_frozen(tmp_path / "none") is None
    assert "e2e-wide: not yet run" in not_yet_run()
    write_frozen(tmp_path, pooled_frame(WIDE_AR, WIDE))
    run = read_frozen(tmp_path)
    assert run.case_count == 12 and run.stale is None
    assert run.label() == "e2e-wide (frozen run, commit abcdef1234, 2026-12-01, 12 cases)"
    old = pl.read_csv(tmp_path / E2E_WIDE / "e2e_pooled.csv").drop("ci_low", "ci_high")
    old.write_csv(tmp_path / E2E_WIDE / "e2e_pooled.csv")
    run = read_frozen(tmp_path)
    assert run.stale == "e2e_pooled.csv ci_low, e2e_pooled.csv ci_high"
    assert "written before this code's e2e tables" in run.stale_text() and "rerun `copydecode e2e --preset" in run.stale_text()
    (tmp_path / E2E_WIDE / "e2e_cases.csv").unlink()
    with pytest.raises(CorpusError, match="lacks e2e_cases.csv"):
        read_frozen(tmp_path)
    assert "e2e_cases.csv" in FROZEN_FILES


def test_a_stale_default_table_is_named_not_misread(tmp_path):
    text = pooled_headline(pooled_frame().drop("speedup_with_prompt"), tmp_path)
    assert text.startswith("default run: reports/tables/e2e_pooled.csv was written before this code's e2e tables "
                           "(it lacks speedup_with_prompt); rerun `copydecode e2e`")


def test_a_frozen_run_that_marked_itself_noisy_says_so_in_its_label(tmp_path):
    write_frozen(tmp_path, pooled_frame(WIDE_AR, WIDE))
    metrics = tmp_path / E2E_WIDE / "metrics.json"
    metrics.write_text(json.dumps({"pooled": {}, "environment": {"noisy": True, "noisy_reasons": ["other load 2.0"]}}))
    assert read_frozen(tmp_path).label().endswith("12 cases; marked NOISY: other load 2.0)")
    metrics.write_text(json.dumps({"pooled": {}, "environment": {"noisy": False, "noisy_reasons": []}}))
    assert "NOISY" not in read_frozen(tmp_path).label()
    default = tmp_path / "metrics"
    default.mkdir()
    (default / "e2e.json").write_text(json.dumps({"environment": {"noisy": True, "noisy_reasons": ["drift 20%"]}}))
    assert claims.e2e_noise(default) == "; marked NOISY: drift 20%"


def test_the_claims_row_pools_and_shows_the_frozen_run_beside_the_default(tmp_path):
    tables = tmp_path / TABLES
    tables.mkdir(parents=True)
    pooled_frame().write_csv(tables / "e2e_pooled.csv")
    spec = verdict.paper_claims()["end_to_end"]
    claim = claims.e2e_claim(spec, tables, tmp_path / METRICS)
    assert claim.verdict == verdict.BEYOND and "pooled" in spec["rule"] and "best" not in spec["rule"].split("never")[0]
    assert "default run: m, pooled over HEvalFix (3 cases): Copy-as-Decode line with directives decoded 2.0x" in claim.ours
    assert "19.5" not in claim.ours and "up to" not in claim.ours
    assert "e2e-wide: not yet run" in claim.ours
    write_frozen(tmp_path / E2E_FROZEN, pooled_frame(WIDE_AR, WIDE))  # reports/e2e/frozen beside reports/tables
    claim = claims.e2e_claim(spec, tables, tmp_path / METRICS)
    assert "e2e-wide (frozen run, commit abcdef1234, 2026-12-01, 12 cases): m, pooled over HEvalFix (9 cases): " \
           "Copy-as-Decode line with directives decoded 2.0x" in claim.ours
    assert "all 12 cases (CommitEdits-click 3, HEvalFix-JS 9): Copy-as-Decode line with directives decoded 3.1x" in claim.ours
    assert "not yet run" not in claim.ours
    assert str(E2E_FROZEN).startswith(str(REPORTS))


def test_the_headline_rows_carry_the_pools_and_the_frozen_run(tmp_path):
    tables = tmp_path / TABLES
    tables.mkdir(parents=True)
    pooled_frame().write_csv(tables / "e2e_pooled.csv")
    frozen = tmp_path / E2E_FROZEN
    head = build_headline(HeadlineSettings(decimals=3), [], tables, tmp_path / METRICS, frozen)
    assert head.rows["e2e_m_linedec_x"] == {"hepy": 2.0, "probe": 13.0, "he": 2.0, "pooled": pytest.approx(3.833)}
    assert head.rows["e2e_m_line_x"]["pooled"] == pytest.approx(5.75)
    assert head.rows["e2e_m_pld_x"]["pooled"] == pytest.approx(3.286)  # earliest at its best k over every case
    assert head.rows["e2e_m_suffix_x"]["pooled"] == pytest.approx(3.632)
    assert head.rows["e2e_m_cases_n"] == {"hepy": 3, "probe": 1, "he": 3, "pooled": 4}
    # P8: the model's case counts head its rows, never between two ratio rows (DVC sorts rows by name)
    e2e = sorted(k for k in head.rows if k.startswith("e2e_m_"))
    assert e2e[0] == "e2e_m_cases_n" and all(k.endswith("_x") for k in e2e[1:])
    assert not any(k.startswith("e2ew") for k in head.rows)
    write_frozen(frozen, pooled_frame(WIDE_AR, WIDE))
    head = build_headline(HeadlineSettings(), [], tables, tmp_path / METRICS, frozen)
    assert head.rows["e2ew_m_line_x"] == {"he": 4.0, "pooled": 5.0}  # the frozen run: its two pools only
    assert head.rows["e2ew_m_cases_n"]["pooled"] == 12
    assert "noisy_e2ew" not in head.rows  # the run recorded no environment: no flag made up
    # UX review C11: the frozen run's NOISY mark reaches `dvc metrics show` beside its rows
    metrics = frozen / E2E_WIDE / "metrics.json"
    metrics.write_text(json.dumps({"pooled": {}, "environment": {"noisy": True, "noisy_reasons": ["drift 64%"]}}))
    head = build_headline(HeadlineSettings(), [], tables, tmp_path / METRICS, frozen)
    assert head.rows["noisy_e2ew"] == {"pooled": 1}
    assert all(not k.startswith("e2ew-") for k in head.rows)  # one prefix style: e2e_, e2ew_


def test_the_per_case_rows_carry_every_methods_speedup_in_headline_order():
    rows = []
    for case, ar in (("P/1", 10.0), ("P/2", 20.0)):
        for method, speedup, per_forward, hist in (("ar", 1.0, 1.0, None), ("copy-line-ideal", 5.0, 30.0, None),
                                                   ("copy-line-decoded", 2.0, 3.0, None),
                                                   ("pld-earliest-k10", 1.5, 2.0, "0:4 10:1"),
                                                   ("pld-earliest-k64", 2.5, 3.0, "0:2 3:1 64:2")):
            rows.append({"model": "m", "corpus": "P", "case_id": case, "method": method, "gold_tokens": 120,
                         "ar_seconds": ar, "seconds": ar / speedup, "speedup": speedup, "prompt_seconds": 0.3,
                         "tokens": 120, "forwards": int(120 / per_forward), "tokens_per_forward": per_forward,
                         "accept_hist": hist})
    wide = case_rows(pl.DataFrame(rows))
    assert wide.columns == ["model", "corpus", "case_id", "gold_tokens", "AR s", "AR prompt s",
                            "Copy-as-Decode line, directives decoded (x)", "PLD earliest, k=10 (x)", "PLD earliest, k=64 (x)",
                            "Copy-as-Decode line, ideal (upper bound) (x)", "PLD earliest, k=64: tokens per forward"]
    first = wide.row(0, named=True)
    assert first["AR s"] == 10.0 and first["PLD earliest, k=64 (x)"] == 2.5 and wide.height == 2
    # UX review P6: the acceptance histogram is a drawn table, not `n:count` strings in a narrow column
    hist = acceptance_rows(pl.DataFrame(rows)).filter(pl.col("method") == "pld-earliest-k64")
    assert hist.select("accepted", "forwards").rows() == [("0", 4), ("2-3", 2), ("64-127", 4)]
    assert hist["share"].sum() == pytest.approx(1.0) and hist["label"][0] == "PLD earliest, k=64"


def test_the_page_tiles_lead_with_directives_decoded_and_put_the_hevalfix_pool_first():
    from analysis.results.e2e import chart_methods, page_tiles

    tiles = page_tiles(pooled_frame(), "pooled", None)
    labels = [label for label, _ in tiles]
    assert labels[0] == "Copy-as-Decode line, directives decoded (m, HEvalFix)"
    assert tiles[0][1] == "2.00x [1.60-2.40], 3 cases"  # numbers, not sentences
    assert labels.index("Copy-as-Decode line, directives decoded (m, pooled)") > labels.index("suffix decoding, k=64 (m, HEvalFix)")
    assert "PLD latest, k=64 (m, pooled)" not in labels and "PLD earliest, k=64 (m, pooled)" in labels
    assert tiles[-1] == ("e2e-wide (frozen run)", "not yet run")
    assert ("Copy-as-Decode line, directives decoded, including the prompt's prefill (m, HEvalFix)", "1.83x") in tiles
    assert chart_methods(["ar", "copy-line-ideal", "copy-line-decoded"]) == [
        ("copy-line-decoded", "Copy-as-Decode line, directives decoded"), ("copy-line-ideal", "Copy-as-Decode line, ideal (upper bound)")]


def test_a_pool_of_the_same_cases_as_a_narrower_one_gets_no_panel_of_its_own():
    """UX review P9: the index's e2e chart drew the HEvalFix and pooled panels of the same 5 cases."""
    from analysis.results.e2e import distinct_pools

    def ar(counts):
        return pl.DataFrame([{"model": "m", "pool": p, "method": "ar", "cases": n} for p, n in counts.items()])

    only_hevalfix = ar({"HEvalFix-JS": 2, "HEvalFix-Py": 3, "HEvalFix": 5, "pooled": 5})
    assert distinct_pools(only_hevalfix)["pool"].to_list() == ["HEvalFix-JS", "HEvalFix-Py", "HEvalFix"]
    one_corpus = ar({"HEvalFix-Py": 3, "HEvalFix": 3, "pooled": 3})
    assert distinct_pools(one_corpus)["pool"].to_list() == ["HEvalFix-Py"]
    wider = ar({"HEvalFix-Py": 3, "ProbeEdit-S": 2, "HEvalFix": 3, "pooled": 5})
    assert distinct_pools(wider)["pool"].to_list() == ["HEvalFix-Py", "ProbeEdit-S", "pooled"]
    two_models = pl.concat([only_hevalfix, ar({"HEvalFix-Py": 3, "ProbeEdit-S": 2, "HEvalFix": 3,
                                               "pooled": 5}).with_columns(model=pl.lit("n"))])
    assert "pooled" in distinct_pools(two_models)["pool"].to_list()  # another model's pooled differs: kept
