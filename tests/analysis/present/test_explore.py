"""The case explorer (analysis.present.explore): the view is a function of the selection, every cost column
names its unit (the paper's kernel is in decode steps, a fitted one in seconds), the widgets re-render
the case when a dropdown changes, and the notebook still renders one case under papermill."""

from __future__ import annotations

import shutil

import polars as pl
import pytest
import yaml
from fixtures import ROOT, params_with, sources_held

from analysis.cli import main
from analysis.errors import ParamsError
from analysis.layout import LATENCY_MODEL

N_CASES = 4


@pytest.fixture(scope="module")
def scratch(tmp_path_factory, hep_dir):
    """corpora, programs and spans in a scratch folder: a few HEvalFix-Py and HEvalFix-JS cases (body and
    decl) and ProbeEdit-S cases (one framing, `unit`), so the corpus dropdown crosses framing sets."""
    top = tmp_path_factory.mktemp("explore")
    data = top / "hep"
    data.mkdir()
    for language in ("python", "js"):
        lines = (hep_dir / f"{language}.jsonl").read_text().splitlines()[:N_CASES]
        (data / f"{language}.jsonl").write_text("\n".join(lines) + "\n")
    params = params_with(**{
        "corpora.humanevalpack.languages": ["python", "js"], "corpora.humanevalpack.framings": ["body", "decl"],
        "corpora.humanevalpack.local_dir": str(data), "corpora.humanevalpack.verify_sha256": False,
        "corpora.probeedit.n_cases": 3, "corpora.commits": [], "spans.bootstrap_resamples": 20,
    })
    (top / "params.yaml").write_text(yaml.safe_dump(sources_held(params, ROOT / LATENCY_MODEL)))
    (top / LATENCY_MODEL).parent.mkdir(parents=True)
    shutil.copy(ROOT / LATENCY_MODEL, top / LATENCY_MODEL)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(top)
        mp.delenv("COPYDECODE_HUMANEVALPACK_DIR", raising=False)
        for stage in ("corpora", "programs", "spans"):
            assert main(["--params", "params.yaml", stage]) == 0, stage
    return top


@pytest.fixture()
def data(scratch, monkeypatch):
    from analysis.present.explore import ExploreData

    monkeypatch.chdir(scratch)
    return ExploreData.load("params.yaml")


def test_view_has_a_cost_column_per_kernel_source_with_its_unit(data):
    from analysis.present.explore import build_view, render_view

    sel = data.selection_for("HEvalFix-Py/0", "body", "line")
    view = build_view(data, sel)
    labels = [k.label for k in data.kernels]
    assert labels[:2] == ["fit eager", "paper"]  # params kernel.sources and baselines, in order
    assert all(label.startswith("h200") for label in labels[2:])  # the measured sources keep their own names
    assert {k: v for k, v in view.units.items() if not k.startswith("h200")} == {
        "fit eager (s)": "seconds", "paper (steps)": "decode steps"}
    assert all(v == "seconds" for k, v in view.units.items() if k.startswith("h200"))  # wall and device time
    assert set(view.units) <= set(view.spans.columns)
    # per-span costs add up to the case's program time under each source
    for kernel, total in zip(data.kernels, view.totals.iter_rows(named=True)):
        assert view.spans[kernel.column].sum() == pytest.approx(total["program"])
        assert total["bound"] == pytest.approx(total["regenerate"] / total["program"])
    # the paper's kernel: a gen op costs its tokens in decode steps (t_step = 1)
    gens = view.spans.filter(pl.col("kind") == "gen")
    if gens.height:
        assert gens["paper (steps)"].to_list() == pytest.approx(gens["n_tokens"].cast(pl.Float64).to_list())
    html = render_view(view).text
    assert "decode steps" in html and "seconds" in html and "(seconds)" not in html.split("Per-span cost")[0]
    assert "".join(text for _, _, text in view.pieces) == view.target


def test_view_changes_with_the_selection_and_bad_selections_are_named(data):
    from analysis.present.explore import Selection, build_view

    a = build_view(data, data.selection_for("HEvalFix-Py/0", "body", "line"))
    b = build_view(data, data.selection_for("HEvalFix-Py/1", "decl", "token"))
    assert a.target != b.target and b.selection.level == "token"
    with pytest.raises(ParamsError, match="no case"):
        data.selection_for("HEvalFix-Py/999", "body", "line")
    with pytest.raises(ParamsError, match="in corpus"):
        build_view(data, Selection("ProbeEdit-S", "HEvalFix-Py/0", "body", "line"))
    with pytest.raises(ParamsError, match="unknown level"):
        build_view(data, Selection("HEvalFix-Py", "HEvalFix-Py/0", "body", "char"))


def test_case_text_is_escaped(data):
    from analysis.present.explore import build_view, render_view

    view = build_view(data, data.selection_for("HEvalFix-Py/0", "body", "line"))
    view.source = "<script>alert(1)</script>"
    view.pieces = [("gen", "gen", "<img src=x onerror=alert(1)>")]
    html = render_view(view).text
    assert "<script>alert" not in html and "<img src=x" not in html and "&lt;script&gt;" in html


def test_widgets_rerender_the_case_on_each_change(data):
    pytest.importorskip("ipywidgets")
    from analysis.present.explore import explorer

    box = explorer(data, data.selection_for("HEvalFix-Py/0", "body", "line"))
    c = box.controls
    first = c["view"].value
    assert "HEvalFix-Py/0" in first and "fit eager (s)" in first
    c["case"].value = "HEvalFix-Py/2"
    assert "HEvalFix-Py/2" in c["view"].value and c["view"].value != first
    c["framing"].value = "decl"
    assert c["case"].options == tuple(data.case_ids("HEvalFix-Py", "decl"))
    assert "decl, line" in c["view"].value
    c["level"].value = "token"
    assert "decl, token" in c["view"].value


def test_the_corpus_dropdown_crosses_multi_and_single_framing_corpora_and_back(data):
    """ipywidgets resets a Dropdown's value when its options change; inside hold_trait_notifications the old
    value was validated against the new options (TraitError: Invalid selection) on every corpus change."""
    pytest.importorskip("ipywidgets")
    from analysis.present.explore import explorer

    assert set(data.corpora()) >= {"HEvalFix-Py", "HEvalFix-JS", "ProbeEdit-S"}
    assert len(data.framings("HEvalFix-Py")) > 1 and len(data.framings("ProbeEdit-S")) == 1
    box = explorer(data, data.selection_for("HEvalFix-Py/0", "decl", "line"))
    c = box.controls
    for corpus in ("HEvalFix-JS", "ProbeEdit-S", "HEvalFix-Py", "ProbeEdit-S", "HEvalFix-JS"):
        c["corpus"].value = corpus
        framings = data.framings(corpus)
        assert c["framing"].options == tuple(framings)
        assert c["case"].options == tuple(data.case_ids(corpus, c["framing"].value))
        assert c["case"].value == data.case_ids(corpus, c["framing"].value)[0]
        view = c["view"].value
        assert c["case"].value in view and "class='cd-error'" not in view, (corpus, view[-300:])
        assert f"{c['framing'].value}, line" in view
    # a framing both HEvalFix corpora offer is kept across the change (decl set on JS, then back to Py)
    c["framing"].value = "decl"
    c["corpus"].value = "HEvalFix-Py"
    assert c["framing"].value == "decl" and "decl, line" in c["view"].value


@pytest.mark.slow
def test_notebook_renders_one_case_under_papermill(scratch, monkeypatch):
    import nbformat
    import papermill

    monkeypatch.chdir(scratch)
    out = scratch / "explore.out.ipynb"
    papermill.execute_notebook(str(ROOT / "notebooks/explore.ipynb"), str(out), cwd=str(scratch), progress_bar=False,
                               parameters={"root": str(scratch), "case_id": "HEvalFix-Py/3", "framing": "decl",
                                           "level": "token", "widgets": False}, kernel_name="python3")
    book = nbformat.read(out, as_version=4)
    html = "".join(o.get("data", {}).get("text/html", "") for c in book.cells if c.cell_type == "code"
                   for o in c.get("outputs", []))
    assert "HEvalFix-Py/3" in html and "decl, token" in html and "paper (steps)" in html


def test_jupyterlab_files_do_not_count_as_pipeline_dependencies():
    """Opening the explorer in JupyterLab writes kernel metadata into the notebook and .ipynb_checkpoints/;
    neither may make `dvc status` report the reports stage (which depends on `notebooks`) changed."""
    pytest.importorskip("dvc")
    from dvc.repo import Repo

    ignore = Repo(str(ROOT)).dvcignore
    for path in ("notebooks/.ipynb_checkpoints/explore-checkpoint.ipynb", "notebooks/lab/explorer.ipynb",
                 "notebooks/lab/.ipynb_checkpoints/explorer-checkpoint.ipynb"):
        assert ignore.is_ignored_file(str(ROOT / path)), path
    assert not ignore.is_ignored_file(str(ROOT / "notebooks/explore.ipynb"))  # the reports stage's template


def test_the_lab_notebook_runs_the_dropdown_explorer(scratch, monkeypatch):
    """notebooks/lab/explorer.ipynb: its root parameter is the repository root seen from its folder, and its
    code cells build the widget explorer (run here against the scratch run)."""
    pytest.importorskip("ipywidgets")
    import nbformat

    book = nbformat.read(ROOT / "notebooks/lab/explorer.ipynb", as_version=4)
    cells = [c.source for c in book.cells if c.cell_type == "code"]
    namespace: dict = {}
    exec(cells[0], namespace)
    assert (ROOT / "notebooks/lab" / namespace["root"]).resolve() == ROOT.resolve()
    monkeypatch.chdir(scratch)
    namespace["root"] = str(scratch)
    *setup, last = cells[1].strip().splitlines()
    exec("\n".join(setup), namespace)
    box = eval(last, namespace)
    assert namespace["case_id"] in box.controls["view"].value
    box.controls["corpus"].value = "ProbeEdit-S"
    assert box.controls["case"].value.startswith("ProbeEdit-S/")
