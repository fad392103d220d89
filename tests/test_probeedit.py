import ast
import shutil
from collections import Counter
from dataclasses import replace

import pytest

from analysis import probeedit
from analysis.errors import CorpusError


@pytest.fixture(scope="module")
def corpus():
    return probeedit.build_probeedit(probeedit.ProbeEditParams())


def test_size_mix_and_labels(corpus):
    cases, edits = corpus
    assert len(cases) == 154
    assert Counter(edits["kind"].to_list()) == {k: 22 for k in probeedit.EDIT_KINDS}
    assert {c.corpus for c in cases} == {"ProbeEdit-S"}
    assert all(40 <= n <= 400 for n in edits["unit_lines"].to_list())


def test_every_edit_is_single_site_valid_python(corpus):
    cases, edits = corpus
    for case, kind in zip(cases, edits["kind"].to_list()):
        assert case.source != case.target
        ast.parse(case.target)
        changed = abs(case.source.count("\n") - case.target.count("\n"))
        assert changed <= 1, (case.case_id, kind)


def test_deterministic(corpus):
    again, _ = probeedit.build_probeedit(probeedit.ProbeEditParams())
    assert [(c.source, c.target) for c in again] == [(c.source, c.target) for c in corpus[0]]


def test_seed_changes_the_corpus(corpus):
    other, _ = probeedit.build_probeedit(probeedit.ProbeEditParams(n_cases=10, seed=1))
    assert [c.target for c in other] != [c.target for c in corpus[0][:10]]


def test_hash_mismatch_is_a_clear_error(tmp_path):
    root = probeedit.stdlib_dir("auto")
    manifest = probeedit.read_manifest(probeedit.MANIFEST)
    for rel in manifest["files"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / rel, tmp_path / rel)
    first = next(iter(manifest["files"]))
    with open(tmp_path / first, "a") as fh:
        fh.write("# changed\n")
    params = probeedit.ProbeEditParams(stdlib_dir=str(tmp_path))
    with pytest.raises(CorpusError, match=f"{first}: sha256 .* differs from the pinned"):
        probeedit.build_probeedit(params)


def test_missing_source_and_bad_mix(tmp_path):
    with pytest.raises(CorpusError, match="is missing"):
        probeedit.build_probeedit(probeedit.ProbeEditParams(stdlib_dir=str(tmp_path)))
    with pytest.raises(CorpusError, match="unknown edit kinds"):
        probeedit.allocate(10, (("swap_files", 1.0),))


def test_allocate_largest_remainder():
    counts = probeedit.allocate(10, (("change_literal", 1.0), ("flip_operator", 1.0), ("delete_line", 1.0)))
    assert counts == {"change_literal": 4, "flip_operator": 3, "delete_line": 3}


def test_each_kind_edits_a_known_snippet():
    import random

    snippet = (
        "def f(a, b):\n"
        '    """Add two numbers.\n'
        "\n"
        "    Both numbers must be finite here.\n"
        '    """\n'
        "    c = a + b\n"
        "    d = 3\n"
        "    if c == d:\n"
        "        return c\n"
        "    return a and b\n"
    )
    for kind in probeedit.EDIT_KINDS:
        edit = probeedit.draw_edit(snippet, kind, random.Random(0))
        assert edit is not None and edit.text != snippet, kind
        ast.parse(edit.text)
