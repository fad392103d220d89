"""The README's commands are the ones CI runs, and the commands they name exist."""

import re
import subprocess
import sys

import pytest
from fixtures import ROOT

README = (ROOT / "README.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()


def blocks():
    return re.findall(r"```bash\n(.*?)```", README, flags=re.S)


def test_setup_is_two_commands_then_repro_and_tests():
    setup, main = blocks()[0].strip().splitlines(), blocks()[1].strip().splitlines()
    assert len(setup) == 2
    assert main == ["dvc repro", "python -m pytest"]  # one command for the main job, one for the tests
    assert "`copydecode readme`" in README  # the maintainers' step outside dvc repro is documented


def test_ci_installs_what_the_readme_says_and_runs_its_test_command():
    install = blocks()[0].strip().splitlines()[1]
    for part in install.split(" && "):
        assert part.replace("pip install", "pip install -q") in CI
    assert "python -m pytest" in CI.splitlines()[-1]


def test_the_quick_command_deselects_registered_markers_only():
    import tomllib

    quick = [b.strip() for b in blocks() if "-m \"not slow" in b]
    assert quick == ['python -m pytest -m "not slow and not model and not browser"']
    registered = {m.split(":")[0] for m in tomllib.loads((ROOT / "pyproject.toml").read_text())
                  ["tool"]["pytest"]["ini_options"]["markers"]}
    assert set(re.findall(r"not (\w+)", quick[0])) == {"slow", "model", "browser"} <= registered


def test_console_script_lists_every_dvc_stage_command():
    import yaml

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    help_text = subprocess.run([sys.executable, "-m", "analysis.cli", "--help"], capture_output=True, text=True,
                               cwd=ROOT).stdout
    for stage in stages.values():
        command = stage["cmd"].split()[1]
        assert command in help_text, command


def test_papermill_examples_name_real_templates_and_parameters():
    import nbformat

    for template, names in re.findall(r"papermill (notebooks/\S+) \S+ ((?:-p \S+ \S+ ?)+)", README):
        book = nbformat.read(ROOT / template, as_version=4)
        params = next(c.source for c in book.cells if "parameters" in c.metadata.get("tags", []))
        for name in re.findall(r"-p (\S+) ", names):
            assert re.search(rf"^{name} = ", params, flags=re.M), (template, name)


# ---------------------------------------------------------------- the generated Results section
# The block is checked against the outputs COMMITTED with it (read from git), never the workspace's: a
# user's `dvc repro` rewrites the workspace outputs with this machine's timings, and `python -m pytest`
# must still pass after it (the README's Quick start). Maintainers: `copydecode readme --check`.

def _generated_figures(block: str) -> list[str]:
    return re.findall(r"\d+(?:\.\d+)?(?:x|%)", block)


@pytest.fixture(scope="module")
def committed(tmp_path_factory):
    """(README text, folder of stage outputs), both as committed at HEAD."""
    from analysis.errors import ParamsError
    from committed import committed_outputs, committed_readme

    try:
        return committed_readme(ROOT), committed_outputs(tmp_path_factory.mktemp("committed"), ROOT)
    except ParamsError as exc:
        pytest.skip(f"no git history to read the committed README and outputs from: {exc}")


def test_readme_results_match_the_committed_stage_outputs(committed):
    from analysis.present.readme import stale_lines

    readme, outputs = committed
    stale = stale_lines(readme, outputs)
    assert not stale, "README results are stale; run `copydecode readme` and commit:\n" + "\n".join(stale[:10])


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_a_users_own_repro_does_not_fail_the_readme_check(tmp_path, committed):
    """A scratch repository with this README and its outputs committed; then a 'repro' on another machine
    rewrites the workspace's timings: the workspace check sees it, the test's (committed) check passes."""
    import json
    import shutil

    from analysis.layout import TIMINGS_REPORT
    from analysis.present.readme import stale_lines
    from committed import committed_outputs, committed_readme

    def committed_stale_lines(scratch, repo):  # the committed README against the committed outputs
        return stale_lines(committed_readme(repo), committed_outputs(scratch, repo))

    readme, outputs = committed
    repo = tmp_path / "repo"
    shutil.copytree(outputs, repo)
    (repo / "README.md").write_text(readme)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "outputs")
    assert committed_stale_lines(tmp_path / "scratch1", repo) == []
    times = json.loads((repo / TIMINGS_REPORT).read_text()) if (repo / TIMINGS_REPORT).is_file() else {}
    times["spans"] = {"seconds": 4321.0}
    (repo / TIMINGS_REPORT).parent.mkdir(parents=True, exist_ok=True)
    (repo / TIMINGS_REPORT).write_text(json.dumps(times))
    assert any("spans 4,321" in line or "spans 4321" in line for line in stale_lines(readme, repo))  # the workspace differs ...
    assert committed_stale_lines(tmp_path / "scratch2", repo) == []   # ... the committed pair still agrees


def test_the_check_command_reports_a_stale_workspace(tmp_path, committed, capsys):
    import shutil

    from analysis.cli import main

    readme, outputs = committed
    shutil.copytree(outputs, tmp_path, dirs_exist_ok=True)
    (tmp_path / "README.md").write_text(readme)
    assert main(["readme", "--check", str(tmp_path)]) == 0
    (tmp_path / "README.md").write_text(readme.replace("<!-- generated by", "stray line\n<!-- generated by", 1))
    assert main(["readme", "--check", str(tmp_path)]) == 1 and "-stray line" in capsys.readouterr().out
    assert (tmp_path / "README.md").read_text().count("stray line") == 1  # --check writes nothing


def test_a_hand_edited_figure_in_the_readme_is_caught(committed):
    from analysis.present.readme import readme_block, stale_lines

    readme, outputs = committed
    block = readme_block(readme)
    figure = _generated_figures(block.split("|---|", 1)[1])[0]
    number, unit = figure[:-1], figure[-1]
    edited_figure = f"{float(number) + 0.1:.{len(number.split('.')[1]) if '.' in number else 0}f}{unit}"
    edited = readme.replace(block, block.replace(figure, edited_figure, 1))
    assert edited != readme
    stale = stale_lines(edited, outputs)
    assert any(edited_figure in line for line in stale if line.startswith("-"))
    assert any(figure in line for line in stale if line.startswith("+"))


def test_the_block_shows_the_metrics_own_figures(committed):
    """Spot checks against the JSON the block is generated from (not against typed numbers)."""
    import json

    from analysis.layout import METRICS
    from analysis.present.notebook import fmt_int, fmt_x
    from analysis.present.readme import readme_block

    readme, outputs = committed
    block = readme_block(readme)
    rt = json.loads((outputs / METRICS / "roundtrip.json").read_text())
    assert f"{fmt_int(rt['passed'])}/{fmt_int(rt['programs'])}" in block
    e2e = json.loads((outputs / METRICS / "e2e.json").read_text())
    for runs in e2e["hf_pld"].values():
        for run in runs:
            assert fmt_x(run["speedup"], 2) in block


def test_write_readme_results_rewrites_only_the_block(tmp_path):
    import shutil

    from analysis.layout import LATENCY_MODEL, METRICS, TABLES
    from analysis.present.readme import END, START, readme_block, results_block
    from analysis.tools.readme import write_readme_results

    for folder in (METRICS, TABLES):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    (tmp_path / LATENCY_MODEL).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / LATENCY_MODEL, tmp_path / LATENCY_MODEL)
    (tmp_path / "README.md").write_text(f"# title\n\nbefore\n\n{START}\nstale 1.0x\n{END}\n\n## after\n")
    write_readme_results(tmp_path)
    text = (tmp_path / "README.md").read_text()
    assert text.startswith("# title\n\nbefore\n\n") and text.endswith("\n\n## after\n")
    assert readme_block(text) == results_block(tmp_path)
    assert "stale 1.0x" not in text


def test_the_readme_command_gathers_run_times_then_writes_the_block(tmp_path, capsys):
    """`copydecode readme` is the declared step outside `dvc repro` that writes both tracked
    files; with no run times here it keeps reports/timings.json and says so."""
    import json
    import shutil

    from analysis.layout import LATENCY_MODEL, METRICS, TABLES, TIMINGS, TIMINGS_REPORT
    from analysis.cli import main
    from analysis.pipeline.io import dvc_stage_names
    from analysis.present.readme import END, START, readme_block, results_block

    for folder in (METRICS, TABLES):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    (tmp_path / LATENCY_MODEL).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / LATENCY_MODEL, tmp_path / LATENCY_MODEL)
    (tmp_path / "README.md").write_text(f"# t\n{START}\nstale\n{END}\n")
    assert main(["readme", str(tmp_path)]) == 0
    assert "kept (no run times" in capsys.readouterr().out and not (tmp_path / TIMINGS_REPORT).exists()
    (tmp_path / TIMINGS).mkdir(parents=True)
    stages = dvc_stage_names()
    for stage in stages:
        (tmp_path / TIMINGS / f"{stage}.json").write_text(json.dumps({"seconds": 1.0}))
    (tmp_path / TIMINGS / "spans.json").write_text(json.dumps({"seconds": 12.5}))
    (tmp_path / TIMINGS / "bounds.json").write_text(json.dumps({"seconds": 30.0, "from_scratch_s": 90.0}))
    (tmp_path / TIMINGS / "kernels_profile-my.json").write_text(json.dumps({"seconds": 31.0}))  # an own-model profile
    assert main(["readme", str(tmp_path)]) == 0
    assert "not gathered (one-off runs, not dvc.yaml stages): kernels_profile-my" in capsys.readouterr().out
    gathered = json.loads((tmp_path / TIMINGS_REPORT).read_text())
    assert set(gathered) == set(stages)
    assert gathered["bounds"] == {"seconds": 30.0, "from_scratch_s": 90.0} and gathered["spans"] == {"seconds": 12.5}
    block = readme_block((tmp_path / "README.md").read_text())
    assert block == results_block(tmp_path) and "spans 12 s." in block and "bounds 30 s (90 s from scratch)" in block
    (tmp_path / "README.md").write_text("# no markers\n")
    assert main(["readme", str(tmp_path)]) == 2 and "has no" in capsys.readouterr().err


def test_the_reports_stage_writes_no_tracked_file_it_does_not_declare():
    """README.md and reports/timings.json are outside the DAG: no stage declares them, and the
    reports stage's code no longer reaches the README writer."""
    import yaml

    from analysis.tools.depgraph import closure

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    declared = {next(iter(o)) if isinstance(o, dict) else o
                for stage in stages.values() for key in ("outs", "metrics", "plots") for o in stage.get(key, [])}
    assert not declared & {"README.md", "reports/timings.json"}
    assert "analysis/present/readme.py" not in closure("analysis.stages.reports", ROOT)


def test_the_block_labels_fsm_validity_as_a_property_of_the_mask(committed):
    import json

    from analysis.layout import METRICS
    from analysis.present.readme import readme_block

    readme, outputs = committed
    block = readme_block(readme)
    constrained = json.loads((outputs / METRICS / "e2e.json").read_text()).get("constrained")
    if constrained:
        valid = f"{constrained['valid']}/{constrained['cases']}"
        sentence = next(s for s in block.split(". ") if f"{valid} programs" in s)
        assert "FSM guarantees" in sentence and "not a model result" in sentence


def _block_in(tmp_path):
    import shutil

    from analysis.layout import LATENCY_MODEL, METRICS, TABLES
    from analysis.present.readme import results_block

    for folder in (METRICS, TABLES):
        shutil.copytree(ROOT / folder, tmp_path / folder, dirs_exist_ok=True)
    (tmp_path / LATENCY_MODEL).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / LATENCY_MODEL, tmp_path / LATENCY_MODEL)
    return results_block(tmp_path)


def test_the_block_states_the_spread_from_the_busy_benchmark(tmp_path):
    import json

    from analysis.present.notebook import fmt_pct
    from analysis.present.readme import BUSY_BENCHMARK

    assert "no quiet-vs-busy benchmark recorded" in _block_in(tmp_path)
    bench = {"kernel": {"ns": [8, 128, 512], "tolerance": 0.15, "max_abs_change": 0.0734, "passed": True},
             "e2e": {"tolerance": 0.2, "max_abs_change": 0.2468, "passed": False},
             "runs": {"quiet": {"root": ".", "kernels": {"threads": [1]}, "e2e": {"threads": 1}},
                      "busy": {"root": "/tmp/b", "kernels": {"threads": [1]}, "e2e": {"threads": 1}}}}
    (tmp_path / BUSY_BENCHMARK).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / BUSY_BENCHMARK).write_text(json.dumps(bench))
    block = _block_in(tmp_path)
    sentence = next(line for line in block.splitlines() if line.startswith("Run-to-run spread"))
    assert str(BUSY_BENCHMARK) in sentence and "(1 thread)" in sentence
    assert f"at most {fmt_pct(0.0734)} apart (within the 15% tolerance)" in sentence
    assert f"at most {fmt_pct(0.2468)} apart (outside 20%)" in sentence
    assert "no quiet-vs-busy benchmark recorded" not in block


def test_the_block_states_the_pilot_from_its_metrics(tmp_path):
    import json

    from analysis.present.readme import results_block

    _block_in(tmp_path)  # copies this repository's metrics and tables; then without the pilot's
    (tmp_path / "reports/metrics/pilot.json").unlink(missing_ok=True)
    assert "The fine-tuning pilot [pilot] has not been run." in results_block(tmp_path)
    summary = {"cases": 33, "exact_match": 4, "em": 4 / 33, "valid": 1.0, "copy_coverage": 0.8, "errors": 0}
    metrics = {"model": "smollm2-135m", "method": "LoRA rank 8", "steps": 64, "before": {**summary, "exact_match": 0},
               "scale": "smollm2-135m (135M parameters) on CPU, 64 LoRA steps on 160 worded line edits",
               "trained_on": "worded line edits, not bug fixes",
               "after_program": {"0": summary, "1": {**summary, "exact_match": 6}}, "after_program_em_range": [4 / 33, 6 / 33],
               "after_rewrite": {"0": {**summary, "exact_match": 9}},
               "humaneval": {"0": {**summary, "exact_match": 2}}, "humaneval_before": {**summary, "exact_match": 0},
               "speed": [{"seed": 0, "subset": "all cases", "cases": 33, "ratio_median": 9.0, "ratio_q25": 1.0,
                          "ratio_q75": 9.5},
                         {"seed": 0, "subset": "both exact", "cases": 3, "ratio_median": 2.5, "ratio_q25": 1.5,
                          "ratio_q75": 3.25}]}
    (tmp_path / "reports/metrics").mkdir(parents=True, exist_ok=True)
    (tmp_path / "reports/metrics/pilot.json").write_text(json.dumps(metrics))
    sentence = next(line for line in results_block(tmp_path).splitlines() if line.startswith("Fine-tuning pilot"))
    assert "held-out EM before fine-tuning 0 / 33" in sentence
    assert "held-out EM after 64 steps (seed 0) 4 / 33" in sentence and "(seed 1) 6 / 33" in sentence
    assert "rewrite adapter EM (seed 0) 9 / 33" in sentence
    assert "HEvalFix-Py EM, bug-fix instruction (seed 0) 0 / 33 -> 2 / 33" in sentence
    assert "Scale: smollm2-135m (135M parameters) on CPU, 64 LoRA steps" in sentence and "not bug fixes" in sentence
    assert "measures transfer to a task never trained on" in sentence  # a run before pilot.task: edits
    bugfix = {**metrics, "task": "bugfix", "trained_on": "synthetic bug fixes"}
    (tmp_path / "reports/metrics/pilot.json").write_text(json.dumps(bugfix))
    told = next(line for line in results_block(tmp_path).splitlines() if line.startswith("Fine-tuning pilot"))
    assert "trained on synthetic bug fixes (on functions disjoint from every evaluation case), so the HEvalFix-Py " \
           "row measures the trained task on unseen code" in told and "never trained on" not in told
    (tmp_path / "reports/metrics/pilot.json").write_text(json.dumps(metrics))
    # the speed figure is the both-exact subset, with its case count; the all-cases ratio stays in the report
    assert "3 cases both exact (seed 0) 2.50x (IQR 1.50x to 3.25x)" in sentence and "9.00x" not in sentence
    # a frozen preset run rides along, labelled with its command, commit, date and wall-clock
    metrics["frozen"] = {"pilot-long": {
        "run": {"command": "copydecode pilot --preset pilot-long", "commit": "abc1234", "date": "2026-11-30",
                "minutes": 41, "machine": "2 shared cores"},
        "metrics": {**metrics, "steps": 256, "method": "LoRA rank 16", "after_program": {"0": {**summary, "exact_match": 5}}}}}
    (tmp_path / "reports/metrics/pilot.json").write_text(json.dumps(metrics))
    sentence = next(line for line in results_block(tmp_path).splitlines() if line.startswith("Fine-tuning pilot"))
    assert ("Frozen run of the `pilot-long` preset (`copydecode pilot --preset pilot-long`, commit abc1234, 2026-11-30, "
            "41 minutes on 2 shared cores), LoRA rank 16: held-out EM before fine-tuning 0 / 33; "
            "held-out EM after 256 steps (seed 0) 5 / 33") in sentence


def test_the_readme_is_short_and_its_docs_links_resolve():
    """The README is the front door (<= ~150 lines); reference sections live in docs/, one file per topic."""
    assert len(README.splitlines()) <= 155
    links = re.findall(r"\]\((docs/[^)#]+)\)", README)
    assert len(set(links)) >= 5
    for link in links:
        assert (ROOT / link).is_file(), link
    for doc in (ROOT / "docs").glob("*.md"):
        for target in re.findall(r"\]\((\.\./README\.md|[\w-]+\.md)\)", doc.read_text()):
            assert (doc.parent / target).is_file(), (doc.name, target)


def test_the_e2e_headline_leads_with_directives_decoded_with_the_frozen_wide_run_beside_it(tmp_path):
    import json

    import polars as pl

    from analysis.layout import E2E_FROZEN, E2E_WIDE, TABLES
    from analysis.present.readme import _e2e_pooled_sentence, _e2e_table
    from analysis.results.e2e import POOLED_COLUMNS

    def pooled(cases: int, decoded_seconds: float) -> pl.DataFrame:
        rows = [{"model": "m", "pool": pool, "method": method, "label": method, "cases": cases, "ar_seconds": 30.0,
                 "seconds": seconds, "speedup_pooled": 30.0 / seconds, "ci_low": 1.0, "ci_high": 9.0,
                 "prompt_seconds": 1.0, "speedup_with_prompt": 31.0 / (seconds + 1.0), "predicted_pooled": 2.0,
                 "abs_error": -0.1}
                for pool in ("HEvalFix-Py", "HEvalFix", "pooled")
                for method, seconds in (("ar", 30.0), ("copy-line-decoded", decoded_seconds), ("copy-line-ideal", 5.0))]
        return pl.DataFrame(rows).select(POOLED_COLUMNS)

    (tmp_path / TABLES).mkdir(parents=True)
    pooled(3, 15.0).write_csv(tmp_path / TABLES / "e2e_pooled.csv")
    text = _e2e_pooled_sentence(tmp_path)
    assert "default run: m, pooled over all 3 cases (HEvalFix-Py 3): Copy-as-Decode line with directives decoded 2.0x" in text
    assert "e2e-wide: not yet run" in text
    table = _e2e_table(tmp_path)
    assert table[0] == "| model, pool | Copy-as-Decode line, directives decoded | Copy-as-Decode line, ideal (upper bound) |"
    assert "| m, pooled (3 cases) | 2.0x (1.0x-9.0x) [2.0x] | 6.0x (1.0x-9.0x) [2.0x] |" in table
    wide = tmp_path / E2E_FROZEN / E2E_WIDE
    wide.mkdir(parents=True)
    pooled(12, 10.0).write_csv(wide / "e2e_pooled.csv")
    pl.DataFrame({"model": ["m"] * 2, "corpus": ["HEvalFix-Py"] * 2, "method": ["ar", "copy-line-ideal"], "cases": [12] * 2,
                  "speedup_total": [1.0, 6.0], "speedup_with_prompt": [1.0, 5.0], "abs_error_total": [0.0, 0.1]}
                 ).write_csv(wide / "e2e_speedup.csv")
    pl.DataFrame({"model": ["m"] * 12, "corpus": ["HEvalFix-Py"] * 12, "case_id": [f"c/{i}" for i in range(12)],
                  "method": ["ar"] * 12, "ar_seconds": [2.5] * 12, "seconds": [2.5] * 12, "speedup": [1.0] * 12,
                  "prompt_seconds": [0.1] * 12, "tokens": [10] * 12, "forwards": [10] * 12,
                  "tokens_per_forward": [1.0] * 12, "accept_hist": [None] * 12}).write_csv(wide / "e2e_cases.csv")
    (wide / "metrics.json").write_text(json.dumps({"environment": {"noisy": True, "noisy_reasons": ["busy"]}}))
    (wide / "run.json").write_text(json.dumps({"command": "copydecode e2e --preset e2e-wide", "commit": "abcdef123456",
                                               "started": "2026-12-01T10:00:00+00:00",
                                               "ended": "2026-12-01T11:00:00+00:00", "seconds": 3600.0}))
    text = _e2e_pooled_sentence(tmp_path)
    assert "e2e-wide (frozen run, commit abcdef1234, 2026-12-01, 12 cases; marked NOISY: busy): m, pooled over all 12 cases" in text
    assert "directives decoded 2.0x" in text and "directives decoded 3.0x" in text  # each run pooled over its own cases


def test_the_readme_command_refuses_to_publish_a_partial_pipeline_time(tmp_path, capsys):
    """UX review C10: after an ad-hoc run of a few stages, `copydecode readme` rewrote the Results line to "0.4 minutes
    in all from scratch" and dropped 20 stages from reports/timings.json. Missing stage run times are an error naming
    the stages; --keep-timings writes the block with the committed timings left as they are."""
    import json
    import shutil

    from analysis.cli import main
    from analysis.layout import LATENCY_MODEL, METRICS, TABLES, TIMINGS, TIMINGS_REPORT
    from analysis.present.readme import END, START

    for folder in (METRICS, TABLES):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    (tmp_path / LATENCY_MODEL).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / LATENCY_MODEL, tmp_path / LATENCY_MODEL)
    (tmp_path / TIMINGS_REPORT).write_text(json.dumps({"spans": {"seconds": 99.0}}))
    (tmp_path / "README.md").write_text(f"# t\n{START}\nstale\n{END}\n")
    (tmp_path / TIMINGS).mkdir(parents=True)
    (tmp_path / TIMINGS / "kernels_profile.json").write_text(json.dumps({"seconds": 31.0}))
    assert main(["readme", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no run time under" in err and "corpora, programs" in err and "--keep-timings" in err
    assert json.loads((tmp_path / TIMINGS_REPORT).read_text()) == {"spans": {"seconds": 99.0}}
    assert "stale" in (tmp_path / "README.md").read_text()  # nothing written
    assert main(["readme", "--keep-timings", str(tmp_path)]) == 0
    assert "kept (--keep-timings)" in capsys.readouterr().out
    assert json.loads((tmp_path / TIMINGS_REPORT).read_text()) == {"spans": {"seconds": 99.0}}
    assert "spans 99 s" in (tmp_path / "README.md").read_text()
