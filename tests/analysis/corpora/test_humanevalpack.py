"""analysis.corpora.humanevalpack: the HEvalFix cases of each language and framing; every defect of a
local file, a missing folder or the hub is a CorpusError naming the file, line and field."""

import json

import pytest

from analysis.corpora import entries, humanevalpack
from analysis.corpora.cases import cases_frame
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
    records, origin = humanevalpack.load_humanevalpack("python", tmp_path, "local", verify_sha256=False)
    assert origin.origin.startswith("local:") and origin.n_records == 1
    cases = {c.framing: c for c in humanevalpack.hevalfix_cases(records, "python", entries.FRAMINGS)}
    assert cases["body"].source == "    return 1\n" and cases["body"].target == "    return 2\n"
    assert cases["decl"].source == "def f():\n    return 1\n"
    assert cases["prompt"].target == "def f():\n    '''doc'''\n    return 2\n"
    assert cases["body"].case_id == "HEvalFix-Py/7" and cases["body"].corpus == "HEvalFix-Py"


@pytest.mark.parametrize("language", ["cpp", "go", "java", "rust", "js"])
def test_every_humanevalpack_language_loads_by_name(tmp_path, language):
    write(tmp_path, language, [json.dumps(record(task_id=f"X/{k}")) for k in range(3)])
    records, _ = humanevalpack.load_humanevalpack(language, tmp_path, "local", verify_sha256=False)
    cases = humanevalpack.hevalfix_cases(records, language, ["body"])
    assert [c.case_id for c in cases] == [f"{entries.hevalfix_corpus(language)}/{k}" for k in range(3)]


def test_missing_field_names_file_line_and_field(tmp_path):
    bad = record()
    del bad["buggy_solution"]
    path = write(tmp_path, "python", [json.dumps(record()), json.dumps(bad)])
    with pytest.raises(CorpusError, match=f"{path}:2: missing field 'buggy_solution'"):
        humanevalpack.load_humanevalpack("python", tmp_path, "local", verify_sha256=False)


def test_bad_json_line(tmp_path):
    path = write(tmp_path, "python", [json.dumps(record()), "{not json"])
    with pytest.raises(CorpusError, match=f"{path}:2: not valid JSON"):
        humanevalpack.load_humanevalpack("python", tmp_path, "local", verify_sha256=False)


def test_wrong_field_type(tmp_path):
    path = write(tmp_path, "python", [json.dumps(record(prompt=3))])
    with pytest.raises(CorpusError, match=f"{path}:1: field 'prompt' must be a string"):
        humanevalpack.load_humanevalpack("python", tmp_path, "local", verify_sha256=False)


def test_empty_file(tmp_path):
    path = write(tmp_path, "python", [])
    with pytest.raises(CorpusError, match=f"{path}: the file is empty"):
        humanevalpack.load_humanevalpack("python", tmp_path, "local")


def test_missing_file(tmp_path):
    with pytest.raises(CorpusError, match="go.jsonl: no such file"):
        humanevalpack.load_humanevalpack("go", tmp_path, "local")


def test_unknown_language_and_framing(tmp_path):
    with pytest.raises(CorpusError, match="unknown HumanEvalPack language 'cobol'"):
        humanevalpack.load_humanevalpack("cobol", tmp_path, "local")
    with pytest.raises(CorpusError, match="unknown or empty framings"):
        humanevalpack.hevalfix_cases([record()], "python", ["whole"])


def test_pinned_hash_mismatch(tmp_path):
    write(tmp_path, "python", [json.dumps(record())])
    with pytest.raises(CorpusError, match="differs from the pinned"):
        humanevalpack.load_humanevalpack("python", tmp_path, "local", verify_sha256=True)


def test_env_var_overrides_param(tmp_path, monkeypatch):
    write(tmp_path, "python", [json.dumps(record())])
    monkeypatch.setenv(humanevalpack.ENV_DIR, str(tmp_path))
    records, origin = humanevalpack.load_humanevalpack("python", "/nonexistent", "auto", verify_sha256=False)
    assert str(tmp_path) in origin.origin and len(records) == 1


def test_hub_failure_is_a_clear_error(monkeypatch, tmp_path):
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(CorpusError, match="could not load bigcode/humanevalpack config 'python' from the hub"):
        humanevalpack.load_humanevalpack("python", tmp_path / "absent", "hub")
    with pytest.raises(CorpusError, match="could not load bigcode/humanevalpack"):
        humanevalpack.load_humanevalpack("python", None, "auto")  # no folder set at all: auto means the hub


def test_auto_with_a_missing_folder_fails_at_once_naming_it(monkeypatch, tmp_path):
    import datasets

    def must_not_run(*args, **kwargs):
        raise AssertionError("the hub was tried")

    monkeypatch.setattr(datasets, "load_dataset", must_not_run)
    monkeypatch.delenv(humanevalpack.ENV_DIR, raising=False)
    absent = tmp_path / "absent"
    with pytest.raises(CorpusError, match=f"HumanEvalPack folder {absent} \\(from corpora.humanevalpack.local_dir\\) "
                                          "does not exist.*source: hub"):
        humanevalpack.load_humanevalpack("python", absent, "auto")
    monkeypatch.setenv(humanevalpack.ENV_DIR, str(absent))
    with pytest.raises(CorpusError, match=f"{absent} \\(from environment variable {humanevalpack.ENV_DIR}\\)"):
        humanevalpack.load_humanevalpack("python", tmp_path, "local")


def test_line_separators_inside_strings_and_instruction(tmp_path):
    body = "    return '\u2028\u2029\x85'\n"
    write(tmp_path, "python", [json.dumps(record(buggy_solution=body, instruction="Fix f."), ensure_ascii=False),
                               json.dumps(record(task_id="Python/8"))])
    records, _ = humanevalpack.load_humanevalpack("python", tmp_path, "local", verify_sha256=False)
    cases = humanevalpack.hevalfix_cases(records, "python", ["body"])
    assert cases[0].source == body and [c.instruction for c in cases] == ["Fix f.", None]
    frame = cases_frame(cases)
    assert frame.columns == ["case_id", "corpus", "language", "framing", "source", "target", "instruction"]
    assert frame["instruction"].to_list() == ["Fix f.", None]


def test_lone_surrogate_and_bad_instruction(tmp_path):
    path = tmp_path / "python.jsonl"
    path.write_text(json.dumps(record()) + "\n" + json.dumps(record(prompt="\ud800")) + "\n")
    with pytest.raises(CorpusError, match=f"{path}:2: record\\['prompt'\\] holds a lone surrogate"):
        humanevalpack.load_humanevalpack("python", tmp_path, "local", verify_sha256=False)
    write(tmp_path, "python", [json.dumps(record(instruction=5))])
    with pytest.raises(CorpusError, match="python.jsonl:1: field 'instruction' must be a string, got int"):
        humanevalpack.load_humanevalpack("python", tmp_path, "local", verify_sha256=False)


def test_shared_files_load_and_match_their_pins(hep_dir):
    for language in ("python", "js"):
        records, origin = humanevalpack.load_humanevalpack(language, hep_dir, "local", verify_sha256=True)
        assert len(records) == 164 and origin.sha256 == humanevalpack.KNOWN_SHA256[language]
        cases = humanevalpack.hevalfix_cases(records, language, ["body"])
        assert all(c.instruction and c.instruction == r["instruction"] for c, r in zip(cases, records))
