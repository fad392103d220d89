"""analysis.corpora.registry: kind -> builder; `corpus_names` announces, before any build, the corpus
names a build gives; a kind or settings type the registry does not know is a named CorpusError."""

import dataclasses
import json

import pytest
from fixtures import params_with

from analysis.corpora import entries, registry
from analysis.corpora.entries import HFDatasetSettings, HumanEvalPackSettings, PairsSettings, corpus_names, probeedit_recipe
from analysis.errors import CorpusError

RECORD = {"task_id": "Python/7", "prompt": "def f():\n    '''doc'''\n", "declaration": "def f():\n",
          "buggy_solution": "    return 1\n", "canonical_solution": "    return 2\n"}


def hep_settings(folder, languages=("python",)) -> HumanEvalPackSettings:
    for language in languages:
        task = dict(RECORD, task_id=f"{language}/7", instruction="Fix f.")
        (folder / f"{language}.jsonl").write_text(json.dumps(task) + "\n")
    return HumanEvalPackSettings(languages=tuple(languages), framings=("body",), local_dir=str(folder),
                                          source="local", verify_sha256=False)


def commit_settings(repo: str, name: str | None) -> entries.CommitSettings:
    fields = {f.name: None for f in dataclasses.fields(entries.CommitSettings)}
    return entries.CommitSettings(**{**fields, "repo": repo, "name": name})


def test_registry_builds_humanevalpack_and_probeedit(tmp_path):
    settings = hep_settings(tmp_path)
    build = registry.build_corpus("humanevalpack", settings)
    assert [(c.case_id, c.instruction) for c in build.cases] == [("HEvalFix-Py/7", "Fix f.")]
    assert build.report[0]["origin"] == f"local:{tmp_path / 'python.jsonl'}" and build.tables == {}
    with pytest.raises(CorpusError, match="languages is empty"):
        registry.build_corpus("humanevalpack", dataclasses.replace(settings, languages=()))
    pe = registry.build_corpus("probeedit", dataclasses.replace(probeedit_recipe(params_with()), n_cases=7))
    assert len(pe.cases) == 7 and pe.tables["probeedit_edits"].height == 7
    assert pe.report["origin"].startswith("shipped:") and pe.report["n_records"] == 7


def test_corpus_names_are_the_names_the_build_gives(tmp_path):
    settings = hep_settings(tmp_path, ("python", "js"))
    built = registry.build_corpus("humanevalpack", settings)
    assert corpus_names("humanevalpack", settings) == list(dict.fromkeys(c.corpus for c in built.cases))
    assert [origin["n_records"] for origin in built.report] == [1, 1]  # one origin per language, in order
    probe = dataclasses.replace(probeedit_recipe(params_with()), n_cases=3)
    assert corpus_names("probeedit", probe) == sorted({c.corpus for c in
                                                                registry.build_corpus("probeedit", probe).cases})
    pairs = tmp_path / "mine.jsonl"
    pairs.write_text(json.dumps({"source": "a\n", "target": "b\n"}) + "\n")
    for name in (None, "Mine"):
        pair_settings = PairsSettings(str(pairs), name=name)
        names = corpus_names("pairs", pair_settings)
        assert names == [c.corpus for c in registry.build_corpus("pairs", pair_settings).cases]


def test_each_kind_names_its_corpus_by_its_own_rule():
    assert corpus_names("commits", commit_settings("/x/flask.bundle", None)) == ["CommitEdits-flask"]
    assert corpus_names("commits", commit_settings("/x/flask.git", "web")) == ["CommitEdits-web"]
    assert corpus_names("hfdataset", HFDatasetSettings("org/can it edit")) == ["HF-can-it-edit"]
    assert corpus_names("hfdataset", HFDatasetSettings("data/edits.parquet")) == ["HF-edits"]


def test_every_kind_has_a_settings_type_and_a_builder():
    assert registry.KINDS == tuple(registry.REGISTRY)
    for kind, (settings_type, builder) in registry.REGISTRY.items():
        assert dataclasses.is_dataclass(settings_type) and callable(builder), kind


def test_bad_kinds_settings_and_languages_are_named(tmp_path):
    settings = hep_settings(tmp_path)
    with pytest.raises(CorpusError, match="unknown corpus kind 'HumanEvalPack'; known: humanevalpack, probeedit"):
        registry.build_corpus("HumanEvalPack", settings)
    with pytest.raises(CorpusError, match="corpus kind 'probeedit' takes ProbeEditParams, got HumanEvalPackSettings"):
        registry.build_corpus("probeedit", settings)
    with pytest.raises(CorpusError, match="unknown HumanEvalPack language 'cobol'"):
        corpus_names("humanevalpack", dataclasses.replace(settings, languages=("cobol",)))
    with pytest.raises(CorpusError, match="unknown or empty framings"):
        registry.build_corpus("humanevalpack", dataclasses.replace(settings, framings=("whole",)))
