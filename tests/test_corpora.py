import json

import pytest

from analysis import corpora
from analysis.errors import CorpusError


def record(**overrides):
    base = {
        "task_id": "Python/7", "prompt": "def f():\n    '''doc'''\n", "declaration": "def f():\n",
        "buggy_solution": "    return 1\n", "canonical_solution": "    return 2\n",
    }
    base.update(overrides)
    return base


def write(folder, language, lines):
    path = folder / f"{language}.jsonl"
    path.write_text("\n".join(lines) + ("\n" if lines else ""))
    return path


def test_framings(tmp_path):
    write(tmp_path, "python", [json.dumps(record())])
    records, origin = corpora.load_humanevalpack("python", tmp_path, "local", verify_sha256=False)
    assert origin.origin.startswith("local:") and origin.n_records == 1
    cases = {c.framing: c for c in corpora.hevalfix_cases(records, "python", corpora.FRAMINGS)}
    assert cases["body"].source == "    return 1\n" and cases["body"].target == "    return 2\n"
    assert cases["decl"].source == "def f():\n    return 1\n"
    assert cases["prompt"].target == "def f():\n    '''doc'''\n    return 2\n"
    assert cases["body"].case_id == "HEvalFix-Py/7" and cases["body"].corpus == "HEvalFix-Py"


@pytest.mark.parametrize("language", ["cpp", "go", "java", "rust", "js"])
def test_every_humanevalpack_language_loads_by_name(tmp_path, language):
    write(tmp_path, language, [json.dumps(record(task_id=f"X/{k}")) for k in range(3)])
    records, _ = corpora.load_humanevalpack(language, tmp_path, "local", verify_sha256=False)
    cases = corpora.hevalfix_cases(records, language, ["body"])
    assert [c.case_id for c in cases] == [f"{corpora.corpus_name(language)}/{k}" for k in range(3)]


def test_missing_field_names_file_line_and_field(tmp_path):
    bad = record()
    del bad["buggy_solution"]
    path = write(tmp_path, "python", [json.dumps(record()), json.dumps(bad)])
    with pytest.raises(CorpusError, match=f"{path}:2: missing field 'buggy_solution'"):
        corpora.load_humanevalpack("python", tmp_path, "local", verify_sha256=False)


def test_bad_json_line(tmp_path):
    path = write(tmp_path, "python", [json.dumps(record()), "{not json"])
    with pytest.raises(CorpusError, match=f"{path}:2: not valid JSON"):
        corpora.load_humanevalpack("python", tmp_path, "local", verify_sha256=False)


def test_wrong_field_type(tmp_path):
    path = write(tmp_path, "python", [json.dumps(record(prompt=3))])
    with pytest.raises(CorpusError, match=f"{path}:1: field 'prompt' must be a string"):
        corpora.load_humanevalpack("python", tmp_path, "local", verify_sha256=False)


def test_empty_file(tmp_path):
    path = write(tmp_path, "python", [])
    with pytest.raises(CorpusError, match=f"{path}: the file is empty"):
        corpora.load_humanevalpack("python", tmp_path, "local")


def test_missing_file(tmp_path):
    with pytest.raises(CorpusError, match="go.jsonl: no such file"):
        corpora.load_humanevalpack("go", tmp_path, "local")


def test_unknown_language_and_framing(tmp_path):
    with pytest.raises(CorpusError, match="unknown HumanEvalPack language 'cobol'"):
        corpora.load_humanevalpack("cobol", tmp_path, "local")
    with pytest.raises(CorpusError, match="unknown or empty framings"):
        corpora.hevalfix_cases([record()], "python", ["whole"])


def test_pinned_hash_mismatch(tmp_path):
    write(tmp_path, "python", [json.dumps(record())])
    with pytest.raises(CorpusError, match="differs from the pinned"):
        corpora.load_humanevalpack("python", tmp_path, "local", verify_sha256=True)


def test_env_var_overrides_param(tmp_path, monkeypatch):
    write(tmp_path, "python", [json.dumps(record())])
    monkeypatch.setenv(corpora.ENV_DIR, str(tmp_path))
    records, origin = corpora.load_humanevalpack("python", "/nonexistent", "auto", verify_sha256=False)
    assert str(tmp_path) in origin.origin and len(records) == 1


def test_hub_failure_is_a_clear_error(monkeypatch, tmp_path):
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(CorpusError, match="could not load bigcode/humanevalpack config 'python' from the hub"):
        corpora.load_humanevalpack("python", tmp_path / "absent", "auto")


def test_shared_files_load_and_match_their_pins(hep_dir):
    for language in ("python", "js"):
        records, origin = corpora.load_humanevalpack(language, hep_dir, "local", verify_sha256=True)
        assert len(records) == 164 and origin.sha256 == corpora.KNOWN_SHA256[language]
