import ast
import shutil
from collections import Counter

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


def test_mix_order_does_not_matter(corpus):
    cases, edits = corpus
    kinds = list(probeedit.ProbeEditParams().mix)
    for shuffled in (kinds[::-1], kinds[3:] + kinds[:3]):
        again, again_edits = probeedit.build_probeedit(probeedit.ProbeEditParams(mix=tuple(shuffled)))
        assert again == cases and again_edits.equals(edits)
    uneven = (("edit_docstring", 2.0), ("change_literal", 1.0), ("flip_operator", 1.0))
    assert list(probeedit.allocate(10, uneven)) == ["change_literal", "flip_operator", "edit_docstring"]
    assert probeedit.allocate(10, uneven) == probeedit.allocate(10, uneven[::-1])


def test_mix_checks():
    with pytest.raises(CorpusError, match=r"more than once: \['delete_line'\]"):
        probeedit.allocate(10, (("delete_line", 1.0), ("delete_line", 2.0)))
    with pytest.raises(CorpusError, match="weights must be numbers, got {'delete_line': 'abc'}"):
        probeedit.allocate(10, (("delete_line", "abc"),))


def test_auto_reads_the_shipped_copy_which_matches_the_pins():
    assert probeedit.stdlib_dir("auto") == probeedit.SHIPPED_STDLIB
    manifest = probeedit.read_manifest(probeedit.MANIFEST)
    shipped = sorted(p.name for p in probeedit.SHIPPED_STDLIB.iterdir() if p.suffix == ".py")
    assert shipped == sorted(manifest["files"]) and len(shipped) == 34
    licence = (probeedit.SHIPPED_STDLIB / "LICENSE.txt").read_text()
    assert "PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2" in licence
    assert len(probeedit.load_pinned_sources(probeedit.ProbeEditParams())) == 34


def test_a_given_lib_folder_gives_the_same_corpus(corpus, tmp_path):
    for rel in probeedit.read_manifest(probeedit.MANIFEST)["files"]:
        shutil.copy(probeedit.SHIPPED_STDLIB / rel, tmp_path / rel)
    again, _ = probeedit.build_probeedit(probeedit.ProbeEditParams(stdlib_dir=str(tmp_path)))
    assert again == corpus[0]
