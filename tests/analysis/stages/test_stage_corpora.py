"""analysis.stages.corpora: the corpora stage's settings (params plus --pairs/--repo/--only/--language/
--name), its refusals of reserved, paper and doubled corpus names, and the per-repository commit files."""

import json
import os

import polars as pl
import pytest
from fixtures import params_with

from analysis.corpora.cases import Case, cases_frame
from analysis.errors import ParamsError
from analysis.layout import COMMIT_CASES
from analysis.pooling import PAPER_CORPORA
from analysis.corpora.settings import CommandLine
from analysis.stages.corpora import (commit_corpora, iter_builds, remove_stale_commit_shards, settings,
                                     write_commit_shard)

NO_CORPUS = {"corpora.humanevalpack.languages": [], "corpora.probeedit.enabled": False, "corpora.commits": [],
             "corpora.pairs": [], "corpora.datasets": []}


def pairs_file(folder, stem="mine", ids=("a", "b")):
    path = folder / f"{stem}.jsonl"
    path.write_text("".join(json.dumps({"case_id": i, "source": f"{i}\n", "target": f"{i}!\n"}) + "\n" for i in ids))
    return str(path)


@pytest.mark.parametrize("line, message", [
    (CommandLine(only=True), "--only builds just the --pairs/--repo inputs, and none was given"),
    (CommandLine(pairs=("a.jsonl", "b.jsonl"), name="x"), "--name names one input, but 2"),
    (CommandLine(language="python"), "--language and --name apply to --pairs/--repo inputs"),
    (CommandLine(repos=(os.fsdecode(b"r\xffepo"),)), "--repo r\\\\udcffepo: the path is not valid UTF-8 \\(byte 0xff\\)"),
])
def test_command_line_refusals_are_named(line, message):
    with pytest.raises(ParamsError, match=message):
        line.check()


def test_no_corpus_at_all_is_refused():
    with pytest.raises(ParamsError, match="no corpus selected"):
        settings(params_with(**NO_CORPUS))


def test_only_builds_just_the_command_line_inputs(tmp_path):
    path = pairs_file(tmp_path)
    s = settings(params_with(), pairs=[path], only=True, language="rust", name="Mine")
    assert [kind for kind, _ in s.builds] == ["pairs"]
    pairs = s.builds[0][1]
    assert (pairs.path, pairs.language, pairs.name) == (path, "rust", "Mine")
    (cases, edits, origins), = iter_builds(s)
    assert [c.case_id for c in cases] == ["Mine/a", "Mine/b"] and {c.language for c in cases} == {"rust"}
    assert edits is None and [o["corpus"] for o in origins] == ["Mine"]


def test_command_line_inputs_come_after_the_params_corpora(tmp_path):
    first, second = pairs_file(tmp_path, "one"), pairs_file(tmp_path, "two")
    s = settings(params_with(**{**NO_CORPUS, "corpora.pairs": [{"path": first}]}), pairs=[second])
    assert [b.path for _, b in s.builds] == [first, second]


@pytest.mark.parametrize("name, message", [
    ("pooled", "corpus name 'pooled' .* is reserved for the pooled rows"),
    ("Pooled", "corpus name 'Pooled' .* is reserved"),
    (PAPER_CORPORA[0], f"corpus name '{PAPER_CORPORA[0]}' .* is one of the paper's corpora"),
])
def test_reserved_and_paper_names_are_refused_for_a_users_input(tmp_path, name, message):
    with pytest.raises(ParamsError, match=message):
        settings(params_with(**NO_CORPUS), pairs=[pairs_file(tmp_path)], name=name)


def test_the_same_input_twice_is_refused(tmp_path):
    path = pairs_file(tmp_path)
    with pytest.raises(ParamsError, match="corpus name 'Pairs-mine' is given twice .*input 1 of this run"):
        settings(params_with(**{**NO_CORPUS, "corpora.pairs": [{"path": path}]}), pairs=[path])


def test_a_params_path_that_is_not_utf8_is_named():
    bad = os.fsdecode(b"/data/\xfe.jsonl")
    with pytest.raises(ParamsError, match="pairs path /data/\\\\udcfe.jsonl: the path is not valid UTF-8 \\(byte 0xfe\\)"):
        settings(params_with(**{**NO_CORPUS, "corpora.pairs": [{"path": bad}]}))


def test_commit_shards_hold_each_mined_repository_and_drop_stale_ones(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame = cases_frame([Case("CommitEdits-a/1", "CommitEdits-a", "python", "file", "x\n", "y\n"),
                         Case("CommitEdits-b/1", "CommitEdits-b", "js", "file", "x\n", "y\n"),
                         Case("Pairs-p/1", "Pairs-p", "python", "pair", "x\n", "y\n")])
    COMMIT_CASES.mkdir(parents=True)
    (COMMIT_CASES / "CommitEdits-gone.parquet").write_bytes(b"old")
    (COMMIT_CASES / ".CommitEdits-a.parquet.tmp.parquet").write_bytes(b"in progress")
    remove_stale_commit_shards(commit_corpora(frame))  # as write_cases does before its first build
    write_commit_shard(frame)
    assert sorted(p.name for p in COMMIT_CASES.iterdir()) == [
        ".CommitEdits-a.parquet.tmp.parquet", "CommitEdits-a.parquet", "CommitEdits-b.parquet"]
    assert pl.read_parquet(COMMIT_CASES / "CommitEdits-b.parquet")["case_id"].to_list() == ["CommitEdits-b/1"]


def test_only_keeps_the_configured_kinds_it_names():
    """C9: building just a Hugging Face dataset took four --set flags; `--only datasets` is one."""
    from analysis.cli import build_parser

    params = params_with(**{"corpora.datasets": [{"dataset": "edits.jsonl", "name": "HF-edits",
                                                  "fields": {"source": "old", "target": "new"}}]})
    kinds = [kind for kind, _ in settings(params, only="datasets").builds]
    assert kinds == ["hfdataset"]
    both = [kind for kind, _ in settings(params, repo=["x.bundle"], only="datasets,probeedit").builds]
    assert sorted(set(both)) == ["commits", "hfdataset", "probeedit"]
    assert build_parser().parse_args(["corpora", "--only", "datasets"]).only == "datasets"
    assert build_parser().parse_args(["corpora", "--only", "--repo", "x"]).only is True
    with pytest.raises(ParamsError, match="unknown corpus kind 'dataset'.*did you mean 'datasets'"):
        settings(params, only="dataset")
