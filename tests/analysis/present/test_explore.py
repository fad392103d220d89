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
        "corpora.probeedit.n_cases": 3, "corpora.commits": [], "corpora.datasets": [], "spans.bootstrap_resamples": 20,
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
    with pytest.raises(ParamsError, match="this run has no case with framing 'nope' \\(its framings: \\["):
        data.selection_for("HEvalFix-Py/0", "nope", "line")  # round 6, L11: it read "e.g. []"
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


# ---------------------------------------------------------------- a view a reader can check (UX M4)

def test_the_input_is_numbered_and_its_copied_lines_marked(data):
    """Each `copy lines="i-j"` marks exactly source lines i..j (1-based), under their line numbers."""
    import re

    from analysis.grammar.program import Copy, parse
    from analysis.present.explore import build_view, numbered_source_html
    from analysis.text.lines import split_lines

    view = build_view(data, data.selection_for("HEvalFix-Py/0", "body", "line"))
    lines = split_lines(view.source)
    copied = {n for op in parse(view.program).ops if isinstance(op, Copy) for n in range(op.start, op.end + 1)}
    assert copied and len(copied) < len(lines)  # something copied, something not
    html = numbered_source_html(view)
    rows = html.split('<span class="cd-ln">')[1:]
    assert len(rows) == len(lines)
    for number, row in enumerate(rows, 1):
        assert re.match(rf"\s*{number}</span>", row), row[:40]
        assert ('class="cd-copy"' in row) == (number in copied), (number, row)


def test_token_level_marks_name_the_first_token_of_each_line(data):
    from analysis.grammar.program import Copy, parse
    from analysis.present.explore import build_view
    from analysis.text.tokens import load_tokenizer

    view = build_view(data, data.selection_for("HEvalFix-Py/1", "decl", "token"))
    bounds = load_tokenizer().encode(view.source).char_bounds
    copies = [op for op in parse(view.program).ops if isinstance(op, Copy)]
    assert [(lo, hi) for lo, hi, _ in view.marks] == [(bounds[op.start - 1], bounds[op.end]) for op in copies]
    assert "".join(view.source[lo:hi] for lo, hi, _ in view.marks) == "".join(
        text for kind, _, text in view.pieces if kind == "copy")
    assert view.token_at_line[0] == 1 and view.token_at_line == sorted(view.token_at_line)


def test_the_source_to_target_diff_rebuilds_both_sides():
    from analysis.present.explore import diff_html, diff_lines

    source = "".join(f"line {i}\n" for i in range(30))
    target = source.replace("line 3\n", "line three\n").replace("line 25\n", "")
    lines = diff_lines(source, target)
    assert "".join(t for tag, t in lines if tag != "+") == source
    assert "".join(t for tag, t in lines if tag != "-") == target
    assert [(tag, t) for tag, t in lines if tag != " "] == [("-", "line 3\n"), ("+", "line three\n"), ("-", "line 25\n")]
    html = diff_html(source, target)
    assert "2 line(s) removed, 1 added" in html and "unchanged lines" in html and "line 15" not in html
    assert diff_html(source, source) == "<p>The gold output equals the input.</p>"


def test_cases_sort_by_coverage_and_bound_worst_first(data):
    from analysis.present.explore import BY_ID, build_view, ranked_cases

    by_id = data.case_ids("HEvalFix-Py", "body")
    assert by_id == sorted(by_id, key=lambda c: int(c.rsplit("/", 1)[1]))
    worst = ranked_cases(data, "HEvalFix-Py", "body", "line", "coverage, lowest first")
    assert sorted(worst["case_id"].to_list()) == sorted(by_id) and data.case_ids("HEvalFix-Py", "body", BY_ID) == by_id
    assert worst["coverage"].to_list() == sorted(worst["coverage"].to_list())
    best = ranked_cases(data, "HEvalFix-Py", "body", "line", "bound, highest first")["bound"].to_list()
    assert best == sorted(best, reverse=True) and all(b > 0 for b in best)
    with pytest.raises(ParamsError, match="unknown sort"):
        ranked_cases(data, "HEvalFix-Py", "body", "line", "size")
    # the view's coverage agrees with the ranking's, and the view says where the case ranks
    view = build_view(data, data.selection_for(worst["case_id"][0], "body", "line"))
    assert view.copied_share == pytest.approx(worst["coverage"][0])
    from analysis.present.explore import render_view

    assert "this case is number 1" in render_view(view).text


def test_cases_by_id_are_in_id_order():
    """UX review P3: "cases by: case id" listed CommitEdits' cases as the corpus wrote them (8254..., ded4..., 72cf...);
    numbered ids go by their number, hash ids alphabetically."""
    from analysis.present.explore import id_order

    ids = ["C/ded4", "HEvalFix-Py/10", "C/8254", "HEvalFix-Py/2", "C/72cf", "HEvalFix-Py/1"]
    assert id_order(ids) == ["C/72cf", "C/8254", "C/ded4", "HEvalFix-Py/1", "HEvalFix-Py/2", "HEvalFix-Py/10"]


def test_the_sort_dropdown_reorders_the_cases_and_shows_the_worst(data):
    pytest.importorskip("ipywidgets")
    from analysis.present.explore import explorer, ranked_cases

    box = explorer(data, data.selection_for("HEvalFix-Py/0", "body", "line"))
    c = box.controls
    c["order"].value = "coverage, lowest first"
    worst = ranked_cases(data, "HEvalFix-Py", "body", "line", "coverage, lowest first")["case_id"].to_list()
    assert list(c["case"].options) == worst and c["case"].value == worst[0]
    assert f"{worst[0]}" in c["view"].value


def test_a_clone_without_data_explores_the_committed_run(scratch, tmp_path, monkeypatch):
    """No data/ (a fresh clone): the explorer reads reports/percase/, and says so."""
    from analysis.present.explore import ExploreData, build_view
    from analysis.results.percase import BY_NAME

    clone = tmp_path / "clone"
    for name in ("cases", "programs", "spans"):
        target = clone / BY_NAME[name].committed
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(scratch / BY_NAME[name].source, target)
    shutil.copy(scratch / "params.yaml", clone / "params.yaml")
    (clone / LATENCY_MODEL).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(scratch / LATENCY_MODEL, clone / LATENCY_MODEL)
    monkeypatch.chdir(clone)
    data = ExploreData.load("params.yaml")
    assert data.read_from == "reports/percase/ (the committed run)"
    assert build_view(data, data.selection_for("HEvalFix-Py/0", "body", "line")).target
    (clone / BY_NAME["spans"].committed).unlink()
    with pytest.raises(ParamsError, match="data/spans not found"):
        ExploreData.load("params.yaml")
