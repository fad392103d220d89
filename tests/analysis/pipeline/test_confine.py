"""An output root is data: names that become paths, paths that must stay inside the root, links out of it."""

from __future__ import annotations


import pytest

from analysis.pipeline.confine import OutputRootError, check_output_root, confined, safe_name


@pytest.mark.parametrize("name", ["paper-gpu", "e2e-wide", "tiny_cpu.v2", "A1"])
def test_a_plain_name_is_kept(name):
    assert safe_name(name, "preset") == name


@pytest.mark.parametrize("name", ["../x", "a/b", ".hidden", "", "x" * 201, "a\x00b", "caf\udce9", 3])
def test_a_name_that_is_not_one_path_component_is_refused(name):
    with pytest.raises(OutputRootError, match="cannot name a file"):
        safe_name(name, "preset")


def test_confined_accepts_paths_inside_and_refuses_the_rest(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data/kernels").mkdir(parents=True)
    assert str(confined("data/kernels/raw.parquet", "out")) == "data/kernels/raw.parquet"
    confined(tmp_path / "data/new/x.json", "out")  # absolute, inside, not yet made
    for outside in ("../x.parquet", "/etc/x", "data/../../x"):
        with pytest.raises(OutputRootError, match="lies outside the output root"):
            confined(outside, "out")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "data/linked").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OutputRootError, match="data/linked is a symbolic link"):
        confined("data/linked/x.json", "out")


def test_a_root_with_real_folders_and_links_inside_it_passes(tmp_path):
    """DVC's `cache.type symlink` links each output file into .dvc/cache inside the project: allowed,
    since every write replaces the link itself."""
    (tmp_path / ".dvc/cache").mkdir(parents=True)
    (tmp_path / ".dvc/cache/ab12").write_text("cached")
    (tmp_path / "data/programs").mkdir(parents=True)
    (tmp_path / "data/programs/programs.parquet").symlink_to(tmp_path / ".dvc/cache/ab12")
    check_output_root(tmp_path)


@pytest.mark.parametrize("make, message", [
    (lambda root, out: (root / "reports").symlink_to(out), "reports is a symbolic link"),
    (lambda root, out: ((root / "data").mkdir(), (root / "data/spans").symlink_to(out)), "data/spans is a symbolic link"),
    (lambda root, out: ((root / "reports/metrics").mkdir(parents=True),
                        (root / "reports/metrics/x.json").symlink_to(out / "victim")), "out of the output root"),
    (lambda root, out: ((root / "data").mkdir(), (root / "data/dangling").symlink_to(out / "absent")),
     "out of the output root"),
])
def test_links_out_of_the_root_are_refused_by_name(tmp_path, make, message):
    root, out = tmp_path / "run", tmp_path / "outside"
    root.mkdir()
    out.mkdir()
    (out / "victim").write_text("precious")
    make(root, out)
    with pytest.raises(OutputRootError, match=message):
        check_output_root(root)
    assert (out / "victim").read_text() == "precious"
