"""The e2e headline is pooled over every measured case (ratio of summed times, with the count), per
corpus and overall, never the best case; a frozen e2e-wide run shows beside the default when its
folder exists, and "not yet run" otherwise."""

from __future__ import annotations

import json

import polars as pl
import pytest

from analysis.claims import e2e as claims
from analysis.claims import verdict
from analysis.results.e2e import FROZEN_FILES, not_yet_run, pooled_from_speedup, pooled_sentence, read_frozen
from analysis.errors import CorpusError
from analysis.present.headline import HeadlineSettings, build_headline
from analysis.layout import E2E_FROZEN, E2E_WIDE, METRICS, REPORTS, TABLES

# one short case that wins 19.5x (the old "up to" headline) and three longer ones that win less
SPEEDUP = [
    # model, corpus, method, label, cases, speedup_total, total_seconds
    ("m", "ProbeEdit-S", "ar", "AR", 1, 1.0, 39.0),
    ("m", "ProbeEdit-S", "cad_line", "CaD line", 1, 19.5, 2.0),
    ("m", "ProbeEdit-S", "cad_line_overhead", "CaD line, directives", 1, 13.0, 3.0),
    ("m", "ProbeEdit-S", "pld_latest_k10", "PLD (latest) with gold acceptance, k=10", 1, 1.5, 26.0),
    ("m", "HEvalFix-Py", "ar", "AR", 3, 1.0, 30.0),
    ("m", "HEvalFix-Py", "cad_line", "CaD line", 3, 3.0, 10.0),
    ("m", "HEvalFix-Py", "cad_line_overhead", "CaD line, directives", 3, 2.0, 15.0),
    ("m", "HEvalFix-Py", "pld_latest_k10", "PLD (latest) with gold acceptance, k=10", 3, 1.2, 25.0),
    ("m", "HEvalFix-Py", "pld_latest_k64", "PLD (latest) with gold acceptance, k=64", 1, 1.9, 5.0),  # a sweep, 1 case
]
COLUMNS = ["model", "corpus", "method", "label", "cases", "speedup_total", "total_seconds"]


def speedup_frame(rows=SPEEDUP) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=COLUMNS, orient="row")


def test_the_pool_is_the_ratio_of_summed_times_with_its_count_never_the_best_case():
    pooled = pooled_from_speedup(speedup_frame())
    whole = {r["method"]: r for r in pooled.filter(pl.col("pool") == "pooled").iter_rows(named=True)}
    assert whole["cad_line"]["cases"] == 4 and whole["cad_line"]["speedup_pooled"] == pytest.approx(69 / 12)
    assert whole["pld_latest_k10"]["speedup_pooled"] == pytest.approx(69 / 51)
    assert "pld_latest_k64" not in whole  # measured on 1 of AR's 4 cases: no overall pool
    assert whole["cad_line"]["speedup_pooled"] < 19.5
    text = pooled_sentence(pooled)
    assert text.startswith("m, pooled over 4 cases (HEvalFix-Py 3, ProbeEdit-S 1): Copy-as-Decode line 5.8x")
    assert "PLD (latest) with gold acceptance, k=10 1.4x" in text and "19.5" not in text
    with pytest.raises(CorpusError, match="no total_seconds column"):
        pooled_from_speedup(speedup_frame().drop("total_seconds"))


def write_frozen(root, speedup: pl.DataFrame, commit: str = "abcdef1234567") -> None:
    """A frozen e2e-wide run as `copydecode e2e --preset e2e-wide --out DIR` writes it."""
    folder = root / E2E_WIDE
    folder.mkdir(parents=True)
    speedup.write_csv(folder / "e2e_speedup.csv")
    pooled_from_speedup(speedup).write_csv(folder / "e2e_pooled.csv")
    cases = [{"model": r["model"], "corpus": r["corpus"], "case_id": f"{r['corpus']}/{i}", "method": r["method"],
              "ar_seconds": 1.0, "seconds": 1.0, "tokens": 10, "forwards": 10, "tokens_per_forward": 1.0}
             for r in speedup.iter_rows(named=True) for i in range(r["cases"])]
    pl.DataFrame(cases).write_csv(folder / "e2e_cases.csv")
    (folder / "metrics.json").write_text(json.dumps({"pooled": {}}))
    (folder / "run.json").write_text(json.dumps({"command": "copydecode e2e --preset e2e-wide --out w", "commit": commit,
                                                 "started": "2026-12-01T10:00:00+00:00",
                                                 "ended": "2026-12-01T11:20:00+00:00", "seconds": 4800.0}))


WIDE = [("m", "CommitEdits-click", "ar", "AR", 3, 1.0, 60.0), ("m", "CommitEdits-click", "cad_line", "CaD line", 3, 6.0, 10.0),
        ("m", "HEvalFix-JS", "ar", "AR", 9, 1.0, 40.0), ("m", "HEvalFix-JS", "cad_line", "CaD line", 9, 4.0, 10.0)]


def test_a_frozen_wide_run_is_read_and_a_missing_one_is_not_yet_run(tmp_path):
    assert read_frozen(tmp_path / "none") is None
    assert "e2e-wide: not yet run" in not_yet_run()
    write_frozen(tmp_path, speedup_frame(WIDE))
    run = read_frozen(tmp_path)
    assert run.case_count == 12 and run.label() == "e2e-wide (frozen run, commit abcdef1234, 2026-12-01, 12 cases)"
    (tmp_path / E2E_WIDE / "e2e_cases.csv").unlink()
    with pytest.raises(CorpusError, match="lacks e2e_cases.csv"):
        read_frozen(tmp_path)
    assert "e2e_cases.csv" in FROZEN_FILES


def test_a_frozen_run_that_marked_itself_noisy_says_so_in_its_label(tmp_path):
    write_frozen(tmp_path, speedup_frame(WIDE))
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
    speedup_frame().write_csv(tables / "e2e_speedup.csv")
    spec = verdict.paper_claims()["end_to_end"]
    claim = claims.e2e_claim(spec, tables, tmp_path / METRICS)
    assert claim.verdict == verdict.BEYOND and "pooled" in spec["rule"] and "best" not in spec["rule"].split("never")[0]
    assert "default run: m, pooled over 4 cases (HEvalFix-Py 3, ProbeEdit-S 1): Copy-as-Decode line 5.8x" in claim.ours
    assert "19.5" not in claim.ours and "up to" not in claim.ours
    assert "e2e-wide: not yet run" in claim.ours
    write_frozen(tmp_path / E2E_FROZEN, speedup_frame(WIDE))  # reports/e2e/frozen beside reports/tables
    claim = claims.e2e_claim(spec, tables, tmp_path / METRICS)
    assert "e2e-wide (frozen run, commit abcdef1234, 2026-12-01, 12 cases): m, pooled over 12 cases " \
           "(CommitEdits-click 3, HEvalFix-JS 9): Copy-as-Decode line 5.0x" in claim.ours
    assert "not yet run" not in claim.ours
    assert str(E2E_FROZEN).startswith(str(REPORTS))


def test_the_headline_rows_carry_the_pool_and_the_frozen_run(tmp_path):
    tables = tmp_path / TABLES
    tables.mkdir(parents=True)
    speedup_frame().write_csv(tables / "e2e_speedup.csv")
    frozen = tmp_path / E2E_FROZEN
    head = build_headline(HeadlineSettings(), [], tables, tmp_path / METRICS, frozen)
    assert head.rows["e2e_m_line"] == {"hepy": 3.0, "probe": 19.5, "pooled": pytest.approx(5.75)}
    assert head.rows["e2e_m_pld"]["pooled"] == pytest.approx(1.353)
    assert head.rows["e2e_m_n"] == {"hepy": 3, "probe": 1, "pooled": 4}
    assert not any(k.startswith("e2ew-") for k in head.rows)
    write_frozen(frozen, speedup_frame(WIDE))
    head = build_headline(HeadlineSettings(), [], tables, tmp_path / METRICS, frozen)
    assert head.rows["e2ew-m_line"] == {"click": 6.0, "hejs": 4.0, "pooled": 5.0}
    assert head.rows["e2ew-m_n"]["pooled"] == 12


def test_the_per_case_rows_carry_ar_pld_and_program_seconds_with_plds_acceptance():
    from analysis.results.e2e import case_rows

    rows = []
    for case, ar in (("P/1", 10.0), ("P/2", 20.0)):
        for method, seconds, per_forward, hist in (("ar", ar, 1.0, None), ("cad_line", ar / 5, 30.0, None),
                                                   ("cad_token", ar / 8, 40.0, None),
                                                   ("pld_earliest_k10", ar / 1.5, 2.0, "0:4 10:1"),
                                                   ("pld_latest_k10", ar / 2, 3.0, "0:2 3:1 10:2")):
            rows.append({"model": "m", "corpus": "P", "case_id": case, "method": method, "gold_tokens": 120,
                         "ar_seconds": ar, "seconds": seconds, "tokens": 120, "forwards": int(120 / per_forward),
                         "tokens_per_forward": per_forward, "accept_hist": hist})
    wide = case_rows(pl.DataFrame(rows))
    assert wide.columns == ["model", "corpus", "case_id", "gold_tokens", "AR s", "line program s", "token program s",
                            "PLD s", "PLD tokens per forward", "PLD accepted per forward (n:count)"]
    first = wide.row(0, named=True)
    assert first["AR s"] == 10.0 and first["PLD s"] == 5.0 and first["line program s"] == 2.0
    assert first["PLD tokens per forward"] == 3.0 and first["PLD accepted per forward (n:count)"] == "0:2 3:1 10:2"
    assert wide.height == 2
