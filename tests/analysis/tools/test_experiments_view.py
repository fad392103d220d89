"""`copydecode experiments` (P9, issue 41): `dvc exp show` at 120 columns was a row of "…", and the README's
view needed a hand-written `--drop` regex. The helper turns the grid round (a line per changed param or
figure, a column per experiment) and keeps every line within --width."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path


from analysis.cli import main
from analysis.tools.experiments import lines, render

CORPORA = ("click", "express", "hejs", "hepy", "probe", "pooled")


def _grid_row(name: str, form: str, scale: float) -> dict:
    """One `dvc.api.exp_show` row shaped like this repository's: meta columns, about 200 headline keys, params."""
    row = {"Experiment": name, "rev": name, "typ": "branch_base", "Created": "05:59 AM", "parent": None,
           "State": None, "Executor": None}
    for source in ("fit", "paper", "h200-q1.5b", "h200-q1.5b-sc", "h200-q7b", "h200dt-q1.5b"):
        for variant in ("ideal", "dir"):
            for corpus in CORPORA:
                row[f"metrics/bound_{source}_{variant}_x.json:{corpus}"] = round(12.3456 * scale, 2)
    for level in ("line", "token"):
        for corpus in CORPORA:
            row[f"metrics/cov_{level}_pct.json:{corpus}"] = 96.9  # the same in every experiment
    row["metrics/kernel_fit_c0256_x.json:n008"] = 3.76
    row["metrics/kernel_fit_c0256_x.json:n512"] = round(24.22 * scale, 2)
    row["kernel.latency_form"] = form
    row["bounds.context"] = 256
    return row


def test_the_view_keeps_what_changed_pooled_and_fits_120_columns_with_many_experiments():
    rows = [_grid_row("workspace", "interp", 1.0), _grid_row("main", "interp", 1.0)]
    rows += [_grid_row(f"exp-{form}-{k}", form, 1 + k / 10) for k in range(8) for form in ("quadratic",)]
    table = lines(rows)
    names = [line.name for line in table]
    assert names[0] == "kernel.latency_form" and "bounds.context" not in names  # the unchanged param is left out
    assert "bound_fit_ideal_x:pooled" in names and "bound_fit_ideal_x:hepy" not in names
    assert "kernel_fit_c0256_x:n512" in names  # a kernel row has no pooled: its N columns
    assert "kernel_fit_c0256_x:n008" not in names and not any(n.startswith("cov_") for n in names)  # unchanged
    out = render([r["Experiment"] for r in rows], table, 120)
    assert max(len(line) for line in out) <= 120
    assert sum(line.startswith("param / figure") for line in out) >= 2  # ten experiments: more than one block
    assert all(any(r["Experiment"] in line for line in out) for r in rows)


def test_figure_prefix_column_and_all_choose_the_rows():
    rows = [_grid_row("main", "interp", 1.0), _grid_row("quad", "quadratic", 2.0)]
    only = [line.name for line in lines(rows, figures=("kernel_",))]
    assert only == ["kernel.latency_form", "kernel_fit_c0256_x:n512"]
    hepy = [line.name for line in lines(rows, columns=("hepy",), figures=("bound_fit",))]
    assert hepy == ["kernel.latency_form", "bound_fit_dir_x:hepy", "bound_fit_ideal_x:hepy"]
    everything = [line.name for line in lines(rows, show_all=True)]
    assert "bounds.context" in everything and "cov_line_pct:pooled" in everything
    # a queued or failed experiment has no values: it changes nothing
    assert lines([*rows[:1], {"Experiment": "queued", "rev": "q", "State": "Queued"}]) == []


def test_the_documented_command_parses_and_reads_no_params(capsys):
    assert main(["experiments", "--set", "kernel.latency_form=quadratic"]) == 2
    assert "`experiments` reads no params" in capsys.readouterr().err


def _dvc(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dvc", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_on_a_scratch_repository_the_view_fits_120_columns(tmp_path, monkeypatch):
    """Real `dvc exp run`s on a one-stage scratch repository (a few seconds): the command's own output."""
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert _dvc("init", "-q", cwd=tmp_path).returncode == 0
    (tmp_path / "params.yaml").write_text("kernel:\n  latency_form: interp\nother: 3\n")
    script = ("import json, os, yaml; os.makedirs('metrics', exist_ok=True); "
              "f = yaml.safe_load(open('params.yaml'))['kernel']['latency_form']; "
              "v = {'interp': 2.0, 'quadratic': 3.5, 'roofline': 1.25}[f]; "
              "json.dump({c: v for c in " + repr(CORPORA) + "}, open('metrics/bound_fit_ideal_x.json', 'w')); "
              "json.dump({c: 96.9 for c in " + repr(CORPORA) + "}, open('metrics/cov_line_pct.json', 'w'))")
    (tmp_path / "make.py").write_text(script)
    (tmp_path / "dvc.yaml").write_text(json.dumps({"stages": {"headline": {
        "cmd": f"{sys.executable} make.py", "deps": ["make.py"], "params": ["kernel.latency_form"],
        "metrics": [{"metrics": {"cache": False}}]}}}))
    assert _dvc("repro", "-q", cwd=tmp_path).returncode == 0
    subprocess.run([*git, "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=tmp_path, check=True)
    for form in ("quadratic", "roofline"):
        done = _dvc("exp", "run", "-q", "-S", f"kernel.latency_form={form}", "-n", form, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["experiments"]) == 0
    text = out.getvalue().splitlines()
    assert max(len(line) for line in text) <= 120
    assert {"workspace", "roofline", "quadratic"} <= set(text[0].split())
    by_name = {line.split()[0]: line.split()[1:] for line in text[1:] if line.strip()}
    assert set(by_name) == {"kernel.latency_form", "bound_fit_ideal_x:pooled"}  # `other`, cov unchanged: left out
    assert {"interp", "quadratic", "roofline"} <= set(by_name["kernel.latency_form"])
    assert {"2", "3.5", "1.25"} <= set(by_name["bound_fit_ideal_x:pooled"])
