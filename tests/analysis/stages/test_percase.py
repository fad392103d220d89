"""`copydecode percase`: the run's per-case tables committed under reports/percase/, samples.jsonl one line
per case and method, and reading a per-case table back (data/ first, then the committed copy)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from analysis.cli import main
from analysis.errors import MissingOutputError, ParamsError
from analysis.layout import PERCASE, PERCASE_MANIFEST, SAMPLES
from analysis.results.percase import BY_NAME, e2e_lines, oracle_lines, pilot_lines, read_table, where


def test_the_stage_copies_what_the_run_has_and_lists_the_rest(stage_scratch):
    stale = BY_NAME["e2e"].committed
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_bytes(b"an earlier run's copy")
    assert main(["--params", "params.yaml", "percase"]) == 0
    manifest = json.loads(PERCASE_MANIFEST.read_text())
    assert sorted(manifest["tables"]) == ["cases", "coverage", "programs", "spans"]
    assert {a["table"] for a in manifest["absent"]} == {"case_costs", "perturb", "e2e", "pilot", "rivals"}
    assert not stale.exists()  # never a mix of two runs
    for name, entry in manifest["tables"].items():
        copy = pl.read_parquet(BY_NAME[name].committed)
        assert copy.equals(pl.read_parquet(BY_NAME[name].source)), name
        assert entry["rows"] == copy.height and entry["bytes"] == BY_NAME[name].committed.stat().st_size
    assert manifest["bytes"] == sum(p.stat().st_size for p in PERCASE.iterdir() if p.name != "manifest.json")


def test_the_copies_are_byte_identical_from_run_to_run(stage_scratch):
    assert main(["--params", "params.yaml", "percase"]) == 0
    first = {p.name: p.read_bytes() for p in PERCASE.iterdir()}
    assert main(["--params", "params.yaml", "percase"]) == 0
    assert {p.name: p.read_bytes() for p in PERCASE.iterdir()} == first


def test_samples_hold_one_line_per_case_framing_and_level(stage_scratch):
    assert main(["--params", "params.yaml", "percase"]) == 0
    lines = [json.loads(line) for line in SAMPLES.read_text().splitlines()]
    programs = pl.read_parquet(BY_NAME["programs"].source)
    assert len(lines) == programs.height
    assert {(x["case_id"], x["framing"], x["method"]) for x in lines} == {
        (r["case_id"], r["framing"], f"copy-{r['level']}-ideal") for r in programs.iter_rows(named=True)}
    first = programs.sort("corpus", "case_id", "framing", "level").row(0, named=True)
    assert lines[0]["program"] == first["program"] and lines[0]["task"] == "oracle"


def test_oracle_lines_carry_coverage_bounds_and_em_per_rate():
    programs = pl.DataFrame({"case_id": ["a"], "corpus": ["C"], "framing": ["unit"], "level": ["line"],
                             "program": ['<copy lines="1-2"/>'], "n_ops": [1]})
    costs = pl.DataFrame({"case_id": ["a", "a"], "framing": ["unit"] * 2, "level": ["line"] * 2,
                          "gold_tokens": [10, 10], "copied_tokens": [8, 8], "regen": [10.0, 20.0],
                          "program_ideal": [2.0, 4.0], "program_overhead": [5.0, 5.0],
                          "extrapolated_spans": [0, 1], "kernel_source": ["fit", "paper"],
                          "baseline": ["eager", "paper"]})
    perturb = pl.DataFrame({"case_id": ["a"] * 4, "framing": ["unit"] * 4, "level": ["line"] * 4,
                            "kind": ["both", "both", "both", "start"], "rate": [1.0, 1.0, 0.5, 1.0],
                            "seed": [0, 1, 0, 0], "outcome": ["match", "mismatch", "match", "match"]})
    (line,) = oracle_lines(programs, costs, perturb)
    assert line["coverage"] == 0.8 and line["gold_tokens"] == 10
    assert line["bound"] == {"fit/eager": {"ideal": 5.0, "directives_decoded": 2.0, "extrapolated_spans": 0},
                             "paper/paper": {"ideal": 5.0, "directives_decoded": 4.0, "extrapolated_spans": 1}}
    assert line["em_under_span_noise"] == {"0.5": {"exact_match": 1.0, "seeds": 1},
                                           "1": {"exact_match": 0.5, "seeds": 2}}


def test_e2e_and_pilot_lines():
    rows = [{"model": "m", "corpus": "C", "case_id": "a", "method": method, "repeat": r, "seconds": s,
             "forwards": 3, "tokens": 9, "predicted_seconds": 1.0, "directive_tokens": 2, "gold_tokens": 9,
             "prompt_tokens": 20, "lossless_ok": True}
            for method, times in (("ar", (4.0, 6.0)), ("copy-line-ideal", (1.0, 3.0))) for r, s in enumerate(times)]
    lines = {x["method"]: x for x in e2e_lines(pl.DataFrame(rows))}
    assert lines["copy-line-ideal"]["seconds_median"] == 2.0 and lines["copy-line-ideal"]["speedup_over_ar"] == 2.5
    assert lines["ar"]["speedup_over_ar"] == 1.0 and lines["copy-line-ideal"]["repeats"] == 2
    from fixtures import pilot_record

    (pilot,) = pilot_lines(pl.DataFrame([pilot_record(phase="after", seed=0, case_id="h/1", exact_match=True)]))
    assert (pilot["method"], pilot["exact_match"], pilot["task"]) == ("pilot_program_after", True, "pilot")


def test_a_per_case_table_is_read_from_data_then_from_its_committed_copy(tmp_path):
    frame = pl.DataFrame({"case_id": ["a"], "framing": ["unit"]})
    with pytest.raises(MissingOutputError, match=r"data/corpora/cases.parquet not found; run `copydecode corpora`"):
        read_table("cases", tmp_path)
    committed = tmp_path / BY_NAME["cases"].committed
    committed.parent.mkdir(parents=True)
    frame.write_parquet(committed)
    assert where("cases", tmp_path) == committed and read_table("cases", tmp_path).equals(frame)
    own = tmp_path / BY_NAME["cases"].source
    own.parent.mkdir(parents=True)
    frame.with_columns(framing=pl.lit("body")).write_parquet(own)
    assert where("cases", tmp_path) == own and read_table("cases", tmp_path)["framing"][0] == "body"
    with pytest.raises(ParamsError, match="no per-case table 'case'"):
        read_table("case", tmp_path)


def test_settings_and_an_empty_root_are_named(tmp_path, monkeypatch):
    from fixtures import params_with

    from analysis.stages.percase import settings

    assert settings(params_with()).compression_level == 19
    with pytest.raises(ParamsError, match="zstd level 1-22"):
        settings(params_with(**{"percase.compression_level": 30}))
    monkeypatch.chdir(tmp_path)
    assert main(["percase"]) == 2  # nothing to copy: a named error, no empty success


def test_the_committed_run_stays_small():
    """The committed copies of the shipped run are well under 50 MB."""
    from fixtures import ROOT

    manifest = ROOT / PERCASE_MANIFEST
    assert manifest.is_file(), f"no committed {PERCASE_MANIFEST}: `dvc repro percase` writes it"
    assert json.loads(manifest.read_text())["bytes"] < 20e6


def test_the_documented_edit_count_counts_each_edit_once():
    """UX review C8: docs/percase.md's example printed "1522 of 3476", rows of case x framing x level that a reader
    takes for edits. Run as written on the committed samples, it counts one row per edit of the headline pool: every
    case's line-level program in the headline framing, the single-framing corpora joining it."""
    import re
    import subprocess

    from fixtures import ROOT

    from analysis.pooling import SINGLE_FRAMINGS

    if not (ROOT / SAMPLES).is_file():
        pytest.skip("no committed samples.jsonl yet (the integrator's dvc repro writes it)")
    text = (ROOT / "docs/percase.md").read_text()
    block = re.search(r"```bash\n(grep '\"task\": \"oracle\"'.*?)```", text, flags=re.S)
    assert block, "docs/percase.md lost its counting example"
    done = subprocess.run(["bash", "-c", block.group(1)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    counted, total = map(int, re.fullmatch(r"(\d+) of (\d+) edits\n", done.stdout).groups())
    cases = pl.read_parquet(ROOT / PERCASE / "cases.parquet")
    headline = cases.filter(pl.col("framing").is_in(["body", *SINGLE_FRAMINGS]))
    assert total == headline.height == headline["case_id"].n_unique()
    assert 0 < counted <= total
