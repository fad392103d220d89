"""The field's edit benchmarks in the default run (CanItEdit, EditEval): their field mappings on small files shaped
like the real records, the sha256 pin refusing a changed file, the named decision for each text problem (kept and
counted, lossless through the round trip; or refused by name), and the shipped params and dvc.yaml that read the
real files in place."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest
import yaml
from fixtures import (CANITEDIT_RECORDS, EDITEVAL_RECORDS, ROOT, SHARED_EDITS, params_with, write_field_benchmarks,
                      write_jsonl_records)

from analysis.corpora import registry
from analysis.corpora.entries import corpus_names
from analysis.corpora.cases import Case, cases_frame
from analysis.corpora.checks import DECISIONS, KEPT, REFUSED, data_checks
from analysis.corpora.hfdataset import HFDatasetSettings, load_hfdataset
from analysis.corpora.settings import settings
from analysis.errors import CorpusError, ParamsError
from analysis.pooling import ALL_POOL, FIELD_BENCHMARK, PAPER_CORPORA, corpus_group, paper_cases, pooled_groups

ONLY_DATASETS = {"corpora.humanevalpack.languages": [], "corpora.probeedit.enabled": False, "corpora.commits": [],
                 "corpora.pairs": []}


def built(entries: list[dict]) -> dict[str, list[Case]]:
    """Each corpus of `entries` (corpora.datasets), built through the stage's settings and the registry."""
    s = settings(params_with(**{**ONLY_DATASETS, "corpora.datasets": entries}))
    out = {}
    for kind, build in s.builds:
        result = registry.build_corpus(kind, build)
        out[corpus_names(kind, build)[0]] = result.cases
    return out


def test_the_field_mappings_read_records_shaped_like_the_real_ones(tmp_path):
    corpora = built(write_field_benchmarks(tmp_path))
    canitedit, editeval = corpora["CanItEdit"], corpora["EditEval"]
    # CanItEdit's integer ids become their decimal strings; EditEval's own ids are kept, not doubled
    assert [c.case_id for c in canitedit] == ["CanItEdit/10", "CanItEdit/11"]
    assert [c.case_id for c in editeval] == ["EditEval/0", "EditEval/2"]
    first = canitedit[0]
    assert (first.source, first.target) == (CANITEDIT_RECORDS[0]["before"], CANITEDIT_RECORDS[0]["after"])
    assert first.instruction == CANITEDIT_RECORDS[0]["instruction_descriptive"]  # not the lazy one
    assert editeval[1].instruction == EDITEVAL_RECORDS[1]["instruction"] and editeval[1].source.startswith("print ")
    assert {(c.language, c.framing) for c in canitedit + editeval} == {("python", "pair")}


def test_the_report_names_the_pinned_file_and_what_no_field_reads(tmp_path):
    entry = write_field_benchmarks(tmp_path)[1]
    cases, report = load_hfdataset(HFDatasetSettings(**entry))
    assert report.pinned and report.sha256 == entry["sha256"] and len(cases) == 2
    assert report.ignored_fields == ("META", "context", "test")  # `context`, absent in one record, read as null


def test_a_changed_file_is_refused_by_its_pin_before_it_is_read(tmp_path):
    entry = write_field_benchmarks(tmp_path)[0]
    path = tmp_path / "canitedit_test.jsonl"
    path.write_text(path.read_text().replace("first row", "first line"))  # one word of one record changed
    with pytest.raises(CorpusError, match=f"not the pinned {entry['sha256']}: its contents changed"):
        load_hfdataset(HFDatasetSettings(**entry))
    unpinned = {**entry, "sha256": None}
    cases, report = load_hfdataset(HFDatasetSettings(**unpinned))  # without a pin it reads, and says so
    assert not report.pinned and "first line" in cases[0].instruction


@pytest.mark.parametrize("pin, dataset, message", [
    ("abc", "x.jsonl", "'corpora.datasets\\[0\\].sha256': sha256 must be 64 hex digits"),
    ("g" * 64, "x.jsonl", "must be 64 hex digits"),
    ("0" * 64, "nuprl/CanItEdit", "pin a hub dataset with revision"),
])
def test_a_bad_pin_is_named_at_settings_time(pin, dataset, message):
    entry = {"dataset": dataset, "sha256": pin, "fields": {"source": "a", "target": "b"}}
    with pytest.raises(ParamsError, match=message):
        settings(params_with(**{**ONLY_DATASETS, "corpora.datasets": [entry]}))


def test_a_folder_cannot_be_pinned(tmp_path):
    with pytest.raises(CorpusError, match="a folder cannot be pinned"):
        load_hfdataset(HFDatasetSettings(str(tmp_path), sha256="0" * 64, fields={"source": "a", "target": "b"}))


def test_an_id_that_names_two_cases_is_refused(tmp_path):
    """`EditEval/3` and `3` would both be the case EditEval/3: refused by name, never merged."""
    path = write_jsonl_records(tmp_path / "e.jsonl", [
        {"task_id": "EditEval/3", "input": "a\n", "output": "b\n"}, {"task_id": "3", "input": "c\n", "output": "d\n"}])
    fields = {"source": "input", "target": "output", "case_id": "task_id"}
    with pytest.raises(CorpusError, match="case id 'EditEval/3' is given twice"):
        load_hfdataset(HFDatasetSettings(str(path), fields=fields, name="EditEval"))


# ---------------------------------------------------------------- the named decision for each text problem

KEPT_CASES = {  # problem -> (source, target)
    "identical": ("x = 1\ny = 2\n", "x = 1\ny = 2\n"),
    "empty_source": ("", "print('new file')\n"),
    "crlf": ("a = 1\r\nb = 2\r\nc = 3\r\n", "a = 1\r\nb = 5\r\nc = 3\r\n"),
    "lone_cr": ("a = 1\rb = 2\nc = 3\n", "a = 1\rb = 2\nc = 4\n"),
    "no_final_newline": ("def f():\n    return 1", "def f():\n    return 2"),
    "final_newline_differs": ("a = 1\nb = 2", "a = 1\nb = 2\n"),
    "non_ascii": ("name = 'café'\nx = 1\n", "name = 'café'\nx = 2\n"),
}


def kept_file(tmp_path):
    return write_jsonl_records(tmp_path / "kept.jsonl", [
        {"id": i, "before": src, "after": tgt, "instruction_descriptive": problem}
        for i, (problem, (src, tgt)) in enumerate(KEPT_CASES.items())])


def test_every_problem_has_one_named_decision():
    assert set(DECISIONS) == set(KEPT) | set(REFUSED) and not set(KEPT) & set(REFUSED)
    assert all(d.startswith("kept: ") for d in KEPT.values()) and all(d.startswith("refused: ") for d in REFUSED.values())
    assert set(KEPT) == set(KEPT_CASES)


def test_kept_problems_are_kept_counted_and_lossless(tmp_path, qwen):
    from analysis.grammar.program import parse
    from analysis.grammar.resolver import resolve
    from analysis.oracle.programs import oracle_programs

    fields = {"source": "before", "target": "after", "instruction": "instruction_descriptive", "case_id": "id"}
    cases, report = load_hfdataset(HFDatasetSettings(str(kept_file(tmp_path)), fields=fields, name="Kept"))
    assert len(cases) == len(KEPT_CASES) == report.n_records  # none dropped
    assert [(c.source, c.target) for c in cases] == list(KEPT_CASES.values())  # none changed
    counts = data_checks(cases_frame(cases))["Kept/pair"]
    assert counts["cases"] == len(KEPT_CASES)
    for problem in KEPT:  # each fixture row holds its problem (no_final_newline and non_ascii only theirs)
        assert counts[problem] >= 1, problem
    assert (counts["identical"], counts["empty_source"], counts["crlf"], counts["lone_cr"]) == (1, 1, 1, 1)
    assert (counts["final_newline_differs"], counts["no_final_newline"]) == (1, 2)
    assert all(counts[problem] == 0 for problem in REFUSED)
    programs = oracle_programs(cases, qwen, 1)
    by_id = {c.case_id: c for c in cases}
    for row in programs.iter_rows(named=True):
        case = by_id[row["case_id"]]
        bounds = qwen.encode(case.source).char_bounds
        assert resolve(parse(row["program"]), case.source, bounds) == case.target, (row["case_id"], row["level"])
    identical = programs.filter((pl.col("case_id") == "Kept/0") & (pl.col("level") == "line"))["program"][0]
    assert identical.startswith("<copy") and "<gen>" not in identical  # the no-op edit is one copy
    empty = programs.filter(pl.col("case_id") == "Kept/1")["program"].to_list()
    assert all("<copy" not in p for p in empty)  # nothing to copy: all generated


@pytest.mark.parametrize("line, message", [
    (b'{"id": 1, "before": "a\\n", "after": ""}\n', "field 'target' is empty"),
    (b'{"id": 1, "before": "caf\xe9\\n", "after": "x\\n"}\n', "not valid UTF-8"),
    (b'{"id": 1, "before": "\\ud800\\n", "after": "x\\n"}\n', "lone surrogate"),
])
def test_refused_problems_stop_the_build_by_name(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"id": 0, "before": "a\\n", "after": "b\\n"}\n' + line)
    fields = {"source": "before", "target": "after", "case_id": "id"}
    with pytest.raises(CorpusError, match=message):
        load_hfdataset(HFDatasetSettings(str(path), fields=fields, name="Bad"))


def test_an_empty_target_and_an_oversized_text_are_refused_and_counted():
    cases = [Case(f"X/{i}", "X", "python", "pair", "a\n", "") for i in range(3)]
    with pytest.raises(CorpusError, match="3 case\\(s\\) have an empty target"):
        cases_frame(cases)
    with pytest.raises(CorpusError, match="above corpora.max_text_bytes = 10.*1 case\\(s\\) over"):
        cases_frame([Case("X/0", "X", "python", "pair", "a" * 11, "b\n")], max_text_bytes=10)


def test_the_corpora_stage_reports_the_checks_per_corpus(tmp_path, monkeypatch):
    from analysis.stages import corpora

    entries = write_field_benchmarks(tmp_path / "edits")
    entries.append({"dataset": str(kept_file(tmp_path)), "name": "Kept",
                    "fields": {"source": "before", "target": "after", "case_id": "id"}})
    monkeypatch.chdir(tmp_path)
    metrics = corpora.run(corpora.settings(params_with(**{**ONLY_DATASETS, "corpora.datasets": entries})))
    assert metrics["cases"] == {"CanItEdit/pair": 2, "EditEval/pair": 2, "Kept/pair": len(KEPT_CASES)}
    checks = metrics["data_checks"]
    assert checks["decisions"] == DECISIONS
    assert checks["cases"]["CanItEdit/pair"]["no_final_newline"] == 2  # the real files' own habit, kept
    assert checks["cases"]["Kept/pair"]["crlf"] == 1
    written = json.loads((tmp_path / "reports/metrics/corpora.json").read_text())
    assert written["data_checks"] == checks and {o["corpus"]: o["pinned"] for o in written["origins"]} == {
        "CanItEdit": True, "EditEval": True, "Kept": False}


def test_the_dataset_cache_stays_out_of_the_users_home(tmp_path, monkeypatch):
    """A local file is read through a temporary `datasets` cache, removed after the read."""
    import datasets

    home = tmp_path / "home" / "datasets"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", home)  # where `datasets` writes when not told
    entry = write_field_benchmarks(tmp_path / "edits")[0]
    cases, _ = load_hfdataset(HFDatasetSettings(**entry))
    assert len(cases) == 2 and cases[1].target.endswith("return s")  # read in full after the cache is gone
    assert not home.exists() or not list(home.rglob("*.arrow"))
    datasets.load_dataset("json", data_files=entry["dataset"], split="train")  # the check can fail: untold, it writes
    assert list(home.rglob("*.arrow"))


# ---------------------------------------------------------------- pools and groups

def test_the_field_benchmarks_join_every_corpus_pool_never_the_papers():
    cases = pl.DataFrame({"corpus": ["HEvalFix-Py", "ProbeEdit-S", "CanItEdit", "EditEval"],
                          "framing": ["body", "unit", "pair", "pair"], "case_id": ["h", "p", "c", "e"]})
    paper = paper_cases(cases)
    assert set(paper["corpus"]) <= set(PAPER_CORPORA) and "CanItEdit" not in set(paper["corpus"])
    pooled = {(c, f): rows for c, f, rows in pooled_groups(cases)}
    assert set(pooled[("pooled", "body")]["corpus"]) == {"HEvalFix-Py", "ProbeEdit-S", "CanItEdit", "EditEval"}
    assert corpus_group("CanItEdit", "pair") == corpus_group("EditEval", "pair") == FIELD_BENCHMARK
    assert corpus_group("Mine", "pair") != FIELD_BENCHMARK and ALL_POOL == "all"


# ---------------------------------------------------------------- the shipped params and dvc.yaml

def shipped_entries() -> list[dict]:
    return yaml.safe_load((ROOT / "params.yaml").read_text())["corpora"]["datasets"]


def test_the_default_run_reads_both_benchmarks_pinned_in_place():
    entries = {e["name"]: e for e in shipped_entries()}
    assert set(entries) == {"CanItEdit", "EditEval"}
    readme = (SHARED_EDITS / "README.md") if (SHARED_EDITS / "README.md").is_file() else ROOT.parent / "shared/data/README.md"
    for name, file in (("CanItEdit", "canitedit_test.jsonl"), ("EditEval", "edit_eval.jsonl")):
        entry = entries[name]
        assert entry["dataset"] == f"../shared/data/edits/{file}" and entry["language"] == "python"
        assert len(entry["sha256"]) == 64
        if readme.is_file():  # the pin is the one the data folder's README publishes
            assert f"{file} {entry['sha256']}" in " ".join(readme.read_text().split())
    assert entries["CanItEdit"]["fields"]["instruction"] == "instruction_descriptive"


def test_dvc_declares_each_local_dataset_file_of_params():
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    deps = spec["stages"]["corpora"]["deps"]
    for entry in shipped_entries():
        assert entry["dataset"] in deps, entry["dataset"]


@pytest.mark.slow
def test_the_real_files_build_every_case(tmp_path, monkeypatch):
    if not (SHARED_EDITS / "canitedit_test.jsonl").is_file():
        pytest.skip(f"the edit benchmarks are not at {SHARED_EDITS}")
    monkeypatch.chdir(ROOT)
    corpora = built(shipped_entries())
    assert {name: len(cases) for name, cases in corpora.items()} == {"CanItEdit": 105, "EditEval": 194}
    for cases in corpora.values():
        assert len({c.case_id for c in cases}) == len(cases)
    copy = tmp_path / "edit_eval.jsonl"
    shutil.copy(SHARED_EDITS / "edit_eval.jsonl", copy)
    copy.write_bytes(copy.read_bytes() + b"\n")  # a blank line more: another file
    entry = {**shipped_entries()[1], "dataset": str(copy)}
    with pytest.raises(CorpusError, match="not the pinned"):
        load_hfdataset(HFDatasetSettings(**entry))
