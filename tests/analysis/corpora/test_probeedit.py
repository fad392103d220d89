import ast
import dataclasses
import gzip
from collections import Counter

import pytest

from analysis.corpora import entries, probeedit
from analysis.errors import CorpusError


def recipe() -> "entries.ProbeEditParams":
    """params.yaml's ProbeEdit-S recipe (corpora.probeedit)."""
    from fixtures import params_with

    return entries.probeedit_recipe(params_with())


@pytest.fixture(scope="module")
def corpus():
    return probeedit.build_probeedit(recipe())


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


@pytest.mark.slow
def test_deterministic(corpus):
    again, _ = probeedit.build_probeedit(recipe())
    assert [(c.source, c.target) for c in again] == [(c.source, c.target) for c in corpus[0]]


def test_seed_changes_the_corpus(corpus):
    other, _ = probeedit.build_probeedit(dataclasses.replace(recipe(), n_cases=10, seed=1))
    assert [c.target for c in other] != [c.target for c in corpus[0][:10]]


def _lib_folder(tmp_path):
    """The shipped archive unpacked into a Lib-like folder."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    for rel, data in probeedit.shipped_files().items():
        (tmp_path / rel).write_bytes(data)
    return tmp_path


def test_hash_mismatch_is_a_clear_error(tmp_path):
    manifest = probeedit.read_manifest(entries.PROBEEDIT_MANIFEST)
    _lib_folder(tmp_path)
    first = next(iter(manifest["files"]))
    with open(tmp_path / first, "a") as fh:
        fh.write("# changed\n")
    params = dataclasses.replace(recipe(), stdlib_dir=str(tmp_path))
    with pytest.raises(CorpusError, match=f"{first}: sha256 .* differs from the pinned"):
        probeedit.build_probeedit(params)


def test_a_changed_archive_member_is_a_clear_error(tmp_path, monkeypatch):
    manifest = probeedit.read_manifest(entries.PROBEEDIT_MANIFEST)
    files = list(manifest["files"])
    _lib_folder(tmp_path / "lib")
    with open(tmp_path / "lib" / files[0], "a") as fh:
        fh.write("# changed\n")
    probeedit.write_archive(tmp_path / "lib", files[1:] + files[:1], tmp_path / "changed.tar.gz")
    monkeypatch.setattr(probeedit, "SHIPPED_STDLIB", tmp_path / "changed.tar.gz")
    with pytest.raises(CorpusError, match=f"changed.tar.gz:{files[0]}: sha256 .* differs from the pinned"):
        probeedit.load_pinned_sources(recipe())
    monkeypatch.setattr(probeedit, "SHIPPED_STDLIB", tmp_path / "absent.tar.gz")
    with pytest.raises(CorpusError, match="archive .*absent.tar.gz is missing"):
        probeedit.load_pinned_sources(recipe())
    (tmp_path / "broken.tar.gz").write_bytes(b"not a gzip file")
    monkeypatch.setattr(probeedit, "SHIPPED_STDLIB", tmp_path / "broken.tar.gz")
    with pytest.raises(CorpusError, match="broken.tar.gz cannot be read"):
        probeedit.load_pinned_sources(recipe())


def test_missing_source_and_bad_mix(tmp_path):
    with pytest.raises(CorpusError, match="is missing"):
        probeedit.build_probeedit(dataclasses.replace(recipe(), stdlib_dir=str(tmp_path)))
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


@pytest.mark.slow
def test_mix_order_does_not_matter(corpus):
    cases, edits = corpus
    kinds = list(recipe().mix)
    for shuffled in (kinds[::-1], kinds[3:] + kinds[:3]):
        again, again_edits = probeedit.build_probeedit(dataclasses.replace(recipe(), mix=tuple(shuffled)))
        assert again == cases and again_edits.equals(edits)
    uneven = (("edit_docstring", 2.0), ("change_literal", 1.0), ("flip_operator", 1.0))
    assert list(probeedit.allocate(10, uneven)) == ["change_literal", "flip_operator", "edit_docstring"]
    assert probeedit.allocate(10, uneven) == probeedit.allocate(10, uneven[::-1])


def test_mix_checks():
    with pytest.raises(CorpusError, match=r"more than once: \['delete_line'\]"):
        probeedit.allocate(10, (("delete_line", 1.0), ("delete_line", 2.0)))
    with pytest.raises(CorpusError, match="weights must be numbers, got {'delete_line': 'abc'}"):
        probeedit.allocate(10, (("delete_line", "abc"),))


def test_auto_reads_the_shipped_archive_which_matches_the_pins():
    assert probeedit.stdlib_dir("auto") == probeedit.SHIPPED_STDLIB
    assert probeedit.SHIPPED_STDLIB.name.endswith(".tar.gz")
    manifest = probeedit.read_manifest(entries.PROBEEDIT_MANIFEST)
    shipped = probeedit.shipped_files()
    assert sorted(shipped) == sorted([*manifest["files"], probeedit.LICENCE]) and len(shipped) == 35
    assert "PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2" in shipped[probeedit.LICENCE].decode()
    assert len(probeedit.load_pinned_sources(recipe())) == 34


def test_no_python_file_ships_under_analysis_data():
    data = entries.PROBEEDIT_MANIFEST.parent
    assert [p for p in data.rglob("*.py")] == []


def test_the_archive_is_reproducible(tmp_path):
    """Re-packing the shipped files gives the committed archive's tar stream, byte for byte (the
    gzip layer is compared decompressed: its bytes may differ between zlib builds)."""
    _lib_folder(tmp_path / "lib")
    files = list(probeedit.read_manifest(entries.PROBEEDIT_MANIFEST)["files"])
    probeedit.write_archive(tmp_path / "lib", files[::-1], tmp_path / "again.tar.gz")
    again = gzip.decompress((tmp_path / "again.tar.gz").read_bytes())
    assert again == gzip.decompress(probeedit.SHIPPED_STDLIB.read_bytes())


@pytest.mark.slow
def test_a_given_lib_folder_gives_the_same_corpus(corpus, tmp_path):
    again, _ = probeedit.build_probeedit(dataclasses.replace(recipe(), stdlib_dir=str(_lib_folder(tmp_path))))
    assert again == corpus[0]
