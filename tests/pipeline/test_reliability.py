"""Issue 22 (reliability, round 2): rare JSONL inputs, stale inputs between hand-run stages, settings
typed everywhere, name collisions, the CLI's help and errors, the one-off flow."""

import polars as pl
import pytest

from analysis.errors import CorpusError
from analysis.corpora.jsonl import read_jsonl
from analysis.corpora.entries import PairsSettings
from analysis.corpora.pairs import load_pairs


# ---------------------------------------------------------------- D13: rare JSONL inputs

@pytest.mark.parametrize("text, message", [
    ('{"source": "a", "target": "b", "n": ' + "9" * 5000 + "}\n", "4300 digits"),
    ('{"source": "a", "target": "b", "source": "c"}\n', "the key 'source' is given twice"),
    ('[{"source": "a", "target": "b"}]\n', "not a JSON array"),
    ('[\n  {"source": "a", "target": "b"}\n]\n', "looks like a JSON array"),
])
def test_rare_jsonl_inputs_are_named(tmp_path, text, message):
    path = tmp_path / "p.jsonl"
    path.write_text(text)
    with pytest.raises(CorpusError) as info:
        read_jsonl(path)
    assert message in str(info.value) and f"{path}:1" in str(info.value)


@pytest.mark.parametrize("case_id, message", [(" ", "only blanks"), ("  ", "only blanks"),
                                              ("a\nb", "line break"), ("a\tb", "control character")])
def test_blank_and_newline_case_ids_are_refused(tmp_path, case_id, message):
    path = tmp_path / "p.jsonl"
    pl.DataFrame({"source": ["a\n"], "target": ["b\n"], "case_id": [case_id]}).write_ndjson(path)
    with pytest.raises(CorpusError, match=message):
        load_pairs(PairsSettings(path=str(path)))


# ---------------------------------------------------------------- the stage runs below

import json  # noqa: E402

import yaml  # noqa: E402
from fixtures import ROOT, params_with, sources_held  # noqa: E402

from analysis.cli import build_parser, main  # noqa: E402
from analysis.pipeline.config import Config  # noqa: E402
from analysis.errors import ParamsError  # noqa: E402

PAIRS_A = [{"case_id": "a", "source": "x = 1\ny = 2\nz = 3\n", "target": "x = 1\ny = 20\nz = 3\n"},
           {"case_id": "b", "source": "def f():\n    return 1\n", "target": "def f():\n    return 2\n"}]
PAIRS_B = [{"case_id": "a", "source": "zzz\nzzz\nzzz\nzzz\n", "target": "x = 1\ny = 20\nz = 3\n"},
           {"case_id": "b", "source": "zzz\n", "target": "def f():\n    return 2\n"}]


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def write_params(folder, **changes):
    path = folder / "params.yaml"
    path.write_text(yaml.safe_dump(params_with(**changes)))
    return path


@pytest.fixture()
def pairs_only(tmp_path, monkeypatch):
    """A run that holds none of the paper's corpora: one pairs file (the params name no corpus)."""
    monkeypatch.chdir(tmp_path)
    write_params(tmp_path, **{"corpora.humanevalpack.languages": [], "corpora.probeedit.enabled": False,
                              "corpora.commits": [], "corpora.datasets": [], "spans.bootstrap_resamples": 20, "bounds.bootstrap_resamples": 20})
    write_jsonl(tmp_path / "a.jsonl", PAIRS_A)
    write_jsonl(tmp_path / "b.jsonl", PAIRS_B)
    return tmp_path


def cli(*args) -> int:
    return main(["--params", "params.yaml", *args])


# ---------------------------------------------------------------- D3: stale inputs refused

def test_spans_after_a_changed_corpora_names_the_stale_input(pairs_only, capsys):
    assert cli("corpora", "--pairs", "a.jsonl", "--name", "Mine") == 0
    assert cli("programs") == 0
    assert cli("corpora", "--pairs", "b.jsonl", "--name", "Mine") == 0  # same case ids, new texts
    capsys.readouterr()
    for stage in ("roundtrip", "spans"):
        assert cli(stage) == 2, stage
        err = capsys.readouterr().err
        assert "stale input" in err and "data/programs/programs.parquet" in err, err
        assert "data/corpora/cases.parquet" in err and "Traceback" not in err
    assert not (pairs_only / "data/spans").exists()


def test_bounds_refuses_spans_built_from_other_programs(pairs_only, capsys):
    assert cli("corpora", "--pairs", "a.jsonl") == 0 and cli("programs") == 0 and cli("spans") == 0
    assert cli("corpora", "--pairs", "b.jsonl") == 0 and cli("programs") == 0
    capsys.readouterr()
    assert cli("bounds") == 2
    err = capsys.readouterr().err
    assert "stale input" in err and "data/spans/spans.parquet" in err


def test_outputs_record_their_input_digests(pairs_only):
    from analysis.pipeline.digest import file_digest, recorded_inputs

    assert cli("corpora", "--pairs", "a.jsonl") == 0 and cli("programs") == 0 and cli("spans") == 0
    cases = file_digest("data/corpora/cases.parquet")
    assert recorded_inputs("data/programs/programs.parquet") == {"data/corpora/cases.parquet": cases}
    spans = recorded_inputs("data/spans/spans.parquet")
    assert spans == {"data/corpora/cases.parquet": cases,
                     "data/programs/programs.parquet": file_digest("data/programs/programs.parquet")}


# ---------------------------------------------------------------- D4, D5: the one-off flow

def test_only_builds_just_the_given_input(tmp_path, monkeypatch, hep_dir):
    monkeypatch.chdir(tmp_path)
    write_params(tmp_path, **{"corpora.humanevalpack.local_dir": str(hep_dir), "corpora.commits": [], "corpora.datasets": []})
    write_jsonl(tmp_path / "a.jsonl", PAIRS_A)
    assert cli("corpora", "--only", "--pairs", "a.jsonl") == 0
    metrics = json.loads((tmp_path / "reports/metrics/corpora.json").read_text())
    assert metrics["n_cases"] == 2 and list(metrics["cases"]) == ["Pairs-a/pair"]


def test_repo_takes_language_and_name(tmp_path):
    from analysis.stages.corpora import settings

    params = params_with()
    s = settings(params, repo=["x.bundle"], only=True, language="js", name="mine")
    assert [(k, b.language, b.name, b.min_lines) for k, b in s.builds] == [("commits", "js", "mine", 20)]
    with pytest.raises(ParamsError, match="--only builds just"):
        settings(params, only=True)
    with pytest.raises(ParamsError, match="--name names one input"):
        settings(params, pairs=["a.jsonl", "b.jsonl"], name="x")


def test_out_root_keeps_the_current_folder_untouched(pairs_only, capsys):
    import os

    (pairs_only / "reports").mkdir()
    before = sorted(p.relative_to(pairs_only) for p in pairs_only.rglob("*"))
    for argv in (["corpora", "--params", "params.yaml", "--out", "run1", "--only", "--pairs", "a.jsonl"],
                 ["programs", "--params", "params.yaml", "--out", "run1"],
                 ["--out", "run1", "--params", "params.yaml", "spans"]):  # --out before or after the stage
        assert main(argv) == 0, argv
        os.chdir(pairs_only)  # each command is its own process in real use
    after = sorted(p.relative_to(pairs_only) for p in pairs_only.rglob("*") if not p.is_relative_to(pairs_only / "run1"))
    assert after == before  # nothing written beside the out root (the scratch's reports/ stays empty)
    assert (pairs_only / "run1/reports/tables/coverage.md").is_file()
    assert "Pairs-a" in (pairs_only / "run1/reports/tables/coverage.md").read_text()


def test_an_out_run_records_its_effective_params_and_says_when_a_later_run_differs(pairs_only, capsys):
    """M4 of the UX review: `--set` changed every figure of a one-off run and was recorded nowhere; now each run
    writes DIR/params.effective.yaml (params with --set applied), a later run with other params says so, and
    compare reads the file."""
    import os

    import yaml

    from analysis.tools.compare import _folder_params

    assert main(["corpora", "--params", "params.yaml", "--out", "run1", "--only", "--pairs", "a.jsonl"]) == 0
    os.chdir(pairs_only)
    first = yaml.safe_load((pairs_only / "run1/params.effective.yaml").read_text())
    assert first["spans"]["prompt_overhead_tokens"] == yaml.safe_load((pairs_only / "params.yaml").read_text())[
        "spans"]["prompt_overhead_tokens"]
    capsys.readouterr()
    assert main(["programs", "--params", "params.yaml", "--out", "run1", "--set", "spans.prompt_overhead_tokens=7"]) == 0
    os.chdir(pairs_only)
    text = (pairs_only / "run1/params.effective.yaml").read_text()
    assert text.startswith("# the params `copydecode programs` ran with in this folder, with --set "
                           "spans.prompt_overhead_tokens=7")
    assert yaml.safe_load(text)["spans"]["prompt_overhead_tokens"] == 7
    assert "differ from the ones an earlier run in run1 recorded (spans.prompt_overhead_tokens)" in capsys.readouterr().err
    params, where = _folder_params(pairs_only / "run1")
    assert params["spans"]["prompt_overhead_tokens"] == 7 and where.endswith("params.effective.yaml")


# ---------------------------------------------------------------- D6, D7, D10, D11: settings typed everywhere

@pytest.mark.parametrize("key, value, message", [
    ("corpora.commit_defaults.min_lines", "20", "'corpora.commit_defaults.min_lines' must be an integer"),
    ("corpora.commit_defaults.max_changed_share", "0.5", "'corpora.commit_defaults.max_changed_share' must be a finite"),
    ("corpora.commit_defaults.max_cases", 2.5, "'corpora.commit_defaults.max_cases' must be an integer"),
    ("corpora.commit_defaults.max_cases", True, "'corpora.commit_defaults.max_cases' must be an integer"),
    ("corpora.commit_defaults.seed", "zero", "'corpora.commit_defaults.seed' must be an integer"),
    ("corpora.commit_defaults.seed", -1, "'corpora.commit_defaults.seed' must be >= 0"),
    ("corpora.commits", [{"repo": "x.bundle", "vendored_dirs": "vendor"}], "'corpora.commits[0].vendored_dirs' must be a list"),
    ("corpora.commits", [{"repo": "x.bundle", "name": "../../evil"}], "'corpora.commits[0].name' must be letters"),
    ("corpora.commits", [{"repo": 5}], "'corpora.commits[0].repo' must be a string"),
    ("corpora.pairs", [{"path": "p.jsonl", "language": 5}], "'corpora.pairs[0].language' must be a string"),
    ("corpora.pairs", [{"path": 5}], "'corpora.pairs[0].path' must be a string"),
    ("corpora.probeedit.seed", -1, "'corpora.probeedit.seed' must be >= 0"),
    ("corpora.probeedit.mix", {}, "'corpora.probeedit.mix' needs at least one edit kind"),
    ("corpora.probeedit.mix", {"delete_line": -1}, "'corpora.probeedit.mix.delete_line' must be a finite weight >= 0"),
])
def test_corpus_entries_are_typed(tmp_path, key, value, message):
    from analysis.stages.corpora import settings

    with pytest.raises(ParamsError) as info:
        settings(params_with(**{key: value}))
    assert message in str(info.value)


@pytest.mark.parametrize("group, module", [("spans", "analysis.stages.spans"), ("bounds", "analysis.stages.bounds"),
                                           ("optimal", "analysis.stages.optimal")])
def test_negative_seed_and_degenerate_bootstrap_are_refused(tmp_path, group, module):
    import importlib

    stage = importlib.import_module(module)
    with pytest.raises(ParamsError, match=f"'{group}.seed' must be >= 0"):
        stage.settings(params_with(**{f"{group}.seed": -1}))
    with pytest.raises(ParamsError, match=f"'{group}.bootstrap_resamples' must be 0 \\(no CIs\\) or >= 20"):
        stage.settings(params_with(**{f"{group}.bootstrap_resamples": 1}))


def test_duplicate_groups_and_unknown_keys_are_errors(tmp_path):
    text = (ROOT / "params.yaml").read_text()
    dup = tmp_path / "dup.yaml"
    dup.write_text(text + "\nprograms:\n  token_min_copy: 2\n")
    with pytest.raises(ParamsError, match="the key 'programs' is given twice"):
        Config.load(dup)
    for key, value, unknown in [("spans.bootstrap_resample", 10, "spans.bootstrap_resample"),
                                ("pilot.colour", 1, "pilot.colour"), ("spanz", {"a": 1}, "spanz")]:
        params = params_with()
        node = params
        *parents, last = key.split(".")
        for part in parents:
            node = node[part]
        node[last] = value
        path = tmp_path / "p.yaml"
        path.write_text(yaml.safe_dump(params))
        with pytest.raises(ParamsError, match=f"unknown setting \\['{unknown}'\\]"):
            Config.load(path)
    with pytest.raises(ParamsError, match="did you mean 'spans.bootstrap_resamples'"):
        params = params_with()
        params["spans"]["bootstrap_resample"] = 10
        path.write_text(yaml.safe_dump(params))
        Config.load(path)


# ---------------------------------------------------------------- D8: name collisions

@pytest.mark.parametrize("changes, message", [
    ({"corpora.pairs": [{"path": "a.jsonl", "name": "pooled"}]}, "reserved for the pooled rows"),
    ({"corpora.pairs": [{"path": "a.jsonl", "name": "HEvalFix-Py"}]}, "one of the paper's corpora"),
    ({"corpora.pairs": [{"path": "a.jsonl", "name": "CommitEdits-click"}]}, "'CommitEdits-click' is given twice"),
    ({"corpora.pairs": [{"path": "a.jsonl"}, {"path": "a.jsonl"}]}, "the same input listed twice"),
])
def test_corpus_name_collisions_are_refused(tmp_path, changes, message):
    from analysis.stages.corpora import settings

    with pytest.raises(ParamsError, match=message):
        settings(params_with(**changes))


# ---------------------------------------------------------------- D14: the CLI

def test_every_subcommand_help_has_a_description():
    parser = build_parser()
    subparsers = [a for a in parser._actions if a.dest == "command"][0].choices
    for name, sub in subparsers.items():
        assert sub.description, name
        if name == "kernels":
            for kname, ksub in [a for a in sub._actions if a.dest == "kcommand"][0].choices.items():
                assert ksub.description, kname


def test_params_after_the_subcommand_and_user_facing_names(pairs_only, capsys):
    write_params(pairs_only, **{"corpora.humanevalpack.languages": [], "corpora.probeedit.enabled": False,
                                "corpora.commits": [], "corpora.datasets": [], "corpora.pairs": [{"path": "a.jsonl"}]})
    (pairs_only / "params.yaml").rename(pairs_only / "mine.yaml")
    assert main(["corpora", "--params", "mine.yaml"]) == 0
    for argv, shown in ([[], "STAGE"], [["kernels"], "{profile,fit}"]):
        with pytest.raises(SystemExit):
            main(argv)
        err = capsys.readouterr().err
        assert shown in err and "kcommand" not in err and "required: command" not in err
    assert main(["--params", "nope.yaml", "spans"]) == 2
    assert "check the --params path" in capsys.readouterr().err


# ---------------------------------------------------------------- D12: outputs replaced as a set

def test_output_set_is_all_old_or_all_new(tmp_path, monkeypatch):
    import os

    from analysis.pipeline import io

    monkeypatch.chdir(tmp_path)
    a, b = tmp_path / "out/a.json", tmp_path / "out/b.json"
    io.write_json({"v": "old"}, a)
    io.write_json({"v": "old"}, b)

    class Boom(Exception):
        pass

    with pytest.raises(Boom), io.output_set("s", outputs=("out",)):  # fails after one output: nothing replaced, no temp left
        io.write_json({"v": "new"}, a)
        raise Boom
    assert json.loads(a.read_text())["v"] == "old" and sorted(p.name for p in a.parent.iterdir()) == ["a.json", "b.json"]

    real = os.replace
    calls = []

    def killed_after_first(src, dst):  # a SIGKILL between the renames of the set
        calls.append(dst)
        if str(dst).endswith("b.json") and calls.count(dst) == 1:
            raise Boom
        real(src, dst)

    monkeypatch.setattr(io.os, "replace", killed_after_first)
    with pytest.raises(Boom), io.output_set("s", outputs=("out",)):
        io.write_json({"v": "new"}, a)
        io.write_json({"v": "new"}, b)
    monkeypatch.setattr(io.os, "replace", real)
    assert (tmp_path / "data/.pending/s.json").is_file()  # the journal says the set is committed
    assert io.finish_pending(lambda stage: ("out",)) == ["s"]  # the next run completes it
    assert [json.loads(p.read_text())["v"] for p in (a, b)] == ["new", "new"]
    assert not (tmp_path / "data/.pending/s.json").exists()


# ---------------------------------------------------------------- D1: reports for a run without the paper's corpora

def test_claims_need_the_papers_corpora_are_not_applicable(tmp_path):
    from analysis.present import notebook as present

    tables = tmp_path / "tables"
    tables.mkdir()
    pl.DataFrame({"level": ["line", "line"], "corpus": ["Pairs-a", "pooled"], "framing": ["pair", "pair"],
                  "coverage": [0.5, 0.5], "ci_low": [0.4, 0.4], "ci_high": [0.6, 0.6], "n_cases": [2, 2]}
                 ).write_csv(tables / "coverage.csv")
    items = {c.claim.split(". ")[0]: c for c in present.claims(tables, tmp_path / "metrics")}
    for name in ("2", "3", "4", "6"):  # copy ceiling, bounds, token level, perturbation
        assert items[name].verdict == present.NOT_APPLICABLE, name
        assert "Pairs-a" in items[name].reason
    assert items["5"].verdict == present.NOT_RUN  # C10: judged on the run's own programs (no roundtrip metrics here)
    # a framing that this run lacks shows its single-framing corpora instead of failing
    assert present.pick_framing(pl.read_csv(tables / "coverage.csv"), "body").height == 2


# ---------------------------------------------------------------- D2: empty targets, one rule for every stage

@pytest.mark.parametrize("records", [
    [{"source": "a\n", "target": ""}],                                   # all targets empty
    [{"source": "", "target": ""}],                                      # both empty
    [*PAIRS_A, {"case_id": "c", "source": "q = 1\n", "target": ""}],     # a mix: not dropped from some tables only
])
def test_an_empty_target_is_refused_by_name_before_any_stage(pairs_only, capsys, records):
    write_jsonl(pairs_only / "e.jsonl", records)
    assert cli("corpora", "--pairs", "e.jsonl") == 2
    err = capsys.readouterr().err
    assert "field 'target' is empty" in err and "e.jsonl:" in err and "Traceback" not in err
    assert not (pairs_only / "data").exists()


def test_empty_target_in_any_corpus_is_refused():
    from analysis.corpora.cases import Case, cases_frame

    with pytest.raises(CorpusError, match=r"1 case\(s\) have an empty target, e.g. \['X/1'\]"):
        cases_frame([Case("X/0", "X", "python", "pair", "a\n", "b\n", None), Case("X/1", "X", "python", "pair", "a\n", "", None)])


# ---------------------------------------------------------------- D16: the line oracle's time on reordered files

def _lcs_length(a, b) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def test_hunt_szymanski_gives_an_exact_lcs():
    import random

    from analysis.text.diff import _hunt_szymanski

    rng = random.Random(0)
    for _ in range(300):
        a = [rng.randint(0, 5) for _ in range(rng.randint(0, 25))]
        b = [rng.randint(0, 5) for _ in range(rng.randint(0, 25))]
        pairs = _hunt_szymanski(a, b)
        assert all(a[i] == b[j] for i, j in pairs)
        assert all(p[0] < q[0] and p[1] < q[1] for p, q in zip(pairs, pairs[1:]))
        assert len(pairs) == _lcs_length(a, b)


def test_a_reversed_20000_line_file_takes_seconds_not_minutes():
    """Before: a greedy search to D = 2047, then linear-space Myers (minutes, against milliseconds for an unchanged
    file). Asserted against the same machine's time for the unchanged file of the same size (B4 of the UX review),
    not as a wall-clock bound: a reversal costs a small multiple of it (each the fastest of three tries, so a busy
    machine slows both alike), where the old search cost thousands of times more."""
    import time

    from analysis.oracle.covmax import line_oracle

    lines = [f"value_{i} = compute({i})\n" for i in range(20000)]
    source = "".join(lines)

    def fastest(target: str):
        best, program = float("inf"), None
        for _ in range(3):
            started = time.perf_counter()
            program = line_oracle(source, target)
            best = min(best, time.perf_counter() - started)
        return best, program

    (unchanged, _), (reversal, program) = fastest(source), fastest("".join(reversed(lines)))
    assert reversal / unchanged < 25, (unchanged, reversal)  # measured about 1.5
    copied = sum(op.end - op.start + 1 for op in program.ops if hasattr(op, "start"))
    assert copied == 1  # a reversal has an LCS of one line


# ---------------------------------------------------------------- D1: `copydecode reports` on a pairs-only run

@pytest.mark.slow
def test_reports_render_for_a_pairs_only_run(pairs_only, capsys):
    import shutil

    (pairs_only / "reports/kernels").mkdir(parents=True)
    shutil.copy(ROOT / "reports/kernels/latency_model.json", pairs_only / "reports/kernels/latency_model.json")
    params = yaml.safe_load((pairs_only / "params.yaml").read_text())
    (pairs_only / "params.yaml").write_text(yaml.safe_dump(sources_held(params, ROOT / "reports/kernels/latency_model.json")))
    for stage in (["corpora", "--pairs", "a.jsonl"], ["programs"], ["roundtrip"], ["spans"], ["bounds"], ["reports"]):
        assert cli(*stage) == 0, (stage, capsys.readouterr().err[-3000:])
    index = (pairs_only / "reports/index.html").read_text()
    assert "not applicable to this run" in index and "Traceback" not in index
    coverage = (pairs_only / "reports/html/coverage.html").read_text()
    assert "Pairs-a" in coverage
    assert "not run in this run" in (pairs_only / "reports/html/perturbation.html").read_text()
    executed = pairs_only / "reports/notebooks"
    assert not (executed / "perturbation.ipynb").exists()  # no half-executed notebook left behind


def test_kernels_profile_refuses_a_one_off_root(capsys):
    assert main(["--out", "somewhere", "kernels", "profile"]) == 2
    assert "not supported here" in capsys.readouterr().err


# ---------------------------------------------------------------- issue 29: reports run only the project's code

import os  # noqa: E402
import shutil  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402

HOSTILE_NAME = "x = __import__('pathlib').Path('PWNED').write_text('owned'); y"


class FakePapermill:
    """papermill.execute_notebook, recorded: which template ran, with which parameters (nothing executes)."""

    def __init__(self, fail: bool = False):
        self.calls, self.fail = [], fail

    def __call__(self, source, output, parameters=None, **kwargs):
        import nbformat

        self.calls.append({"source": Path(source), "output": Path(output), "parameters": dict(parameters or {}),
                           "cwd": kwargs.get("cwd")})
        book = nbformat.v4.new_notebook()
        book.cells = [nbformat.v4.new_markdown_cell("# Fake")]
        nbformat.write(book, output)
        if self.fail:
            raise RuntimeError("a cell raised")


@pytest.fixture()
def fake_papermill(monkeypatch):
    import papermill

    fake = FakePapermill()
    monkeypatch.setattr(papermill, "execute_notebook", fake)
    return fake


def test_report_parameter_names_come_from_each_templates_parameters_cell():
    from analysis.present.templates import REPORTS, template_parameters

    assert template_parameters("explore") == ("case_id", "framing", "level", "widgets")
    assert template_parameters("summary") == ()
    assert template_parameters("pilot") == ("seed",)  # only the first cell tagged parameters, less root
    shipped = yaml.safe_load((ROOT / "params.yaml").read_text())["reports"]["parameters"]
    for name in REPORTS:
        assert set(shipped[name] or {}) <= set(template_parameters(name)), name


@pytest.mark.parametrize("report, values, message", [
    ("summary", {HOSTILE_NAME: 1}, "unknown parameter"),
    ("coverage", {"colour": "red"}, "'colour'"),
    ("coverage", {"root": "/elsewhere"}, "set by the stage"),
    ("kernel", {"model": ["a"] * 3}, "must be a string, number"),
    ("pilot", {"seed": {"a": 1}}, "must be a string, number"),
])
def test_unknown_report_parameters_are_refused_at_settings_time(tmp_path, report, values, message):
    from analysis.stages.reports import settings

    params = params_with(**{f"reports.parameters.{report}": values})
    with pytest.raises(ParamsError, match=message):
        settings(params)
    assert not (tmp_path / "PWNED").exists()


def test_a_code_key_in_report_parameters_runs_nothing(tmp_path, monkeypatch, capsys, fake_papermill):
    monkeypatch.chdir(tmp_path)
    path = write_params(tmp_path, **{"reports.parameters.summary": {HOSTILE_NAME: 1}})
    assert main(["--params", str(path), "--out", "run", "reports"]) == 2
    err = capsys.readouterr().err
    assert "unknown parameter" in err and "Traceback" not in err
    assert fake_papermill.calls == []  # refused before papermill
    assert not list(tmp_path.rglob("PWNED")) and not (tmp_path / "run/reports/notebooks").exists()


def test_run_reports_checks_names_itself(tmp_path, fake_papermill):
    from analysis.present.reports import run_reports

    with pytest.raises(ParamsError, match="unknown parameter"):
        run_reports({"summary": {HOSTILE_NAME: 1}}, tmp_path)
    assert fake_papermill.calls == [] and not (tmp_path / "reports").exists()


def test_templates_come_from_the_project_never_from_the_run_folder(tmp_path, monkeypatch, fake_papermill):
    from analysis.pipeline.oneoff import enter_out_root
    from analysis.present.reports import TEMPLATES, render_notebook

    run = tmp_path / "run"
    (run / "notebooks").mkdir(parents=True)
    (run / "notebooks/summary.ipynb").write_text("{}")  # a downloaded run folder carrying its own notebook
    render_notebook("summary", {}, run)
    (call,) = fake_papermill.calls
    assert call["source"] == TEMPLATES / "summary.ipynb" and TEMPLATES == ROOT / "notebooks"
    # the kernel starts in the run folder and the notebook names it "." (no machine path in a committed notebook)
    assert call["parameters"] == {"root": "."} and Path(call["cwd"]) == run
    # --out makes no notebooks/ link in a fresh run folder: it holds outputs only
    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(["--out", "fresh", "reports"])
    enter_out_root("fresh", Config.load(ROOT / "params.yaml"), args)
    assert not (tmp_path / "fresh/notebooks").exists()


def test_a_failing_page_is_marked_and_the_index_still_written(tmp_path, monkeypatch):
    import papermill

    from analysis.present.reports import EXECUTED, HTML, INDEX, ReportError, run_reports

    for folder in ("reports/tables", "reports/metrics"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    fake = FakePapermill(fail=True)
    monkeypatch.setattr(papermill, "execute_notebook", fake)
    with pytest.raises(ReportError, match="report summary failed: RuntimeError: a cell raised"):
        run_reports({}, tmp_path)
    assert (tmp_path / INDEX).is_file()
    page = (tmp_path / HTML / "summary.html").read_text()
    assert "failed: <code>RuntimeError: a cell raised</code>" in page
    assert not list((tmp_path / EXECUTED).iterdir())  # no half-executed notebook, no temp file


def test_a_failed_rerun_removes_the_previous_executed_notebook(tmp_path, monkeypatch):
    import papermill

    from analysis.present.reports import EXECUTED, execute_notebook

    monkeypatch.setattr(papermill, "execute_notebook", FakePapermill())
    assert execute_notebook("summary", {}, tmp_path, "summary").is_file()
    monkeypatch.setattr(papermill, "execute_notebook", FakePapermill(fail=True))
    with pytest.raises(RuntimeError):
        execute_notebook("summary", {}, tmp_path, "summary")
    assert list((tmp_path / EXECUTED).iterdir()) == []


def test_explore_reads_the_params_file_in_use(tmp_path, monkeypatch):
    """The explore page read ./params.yaml whatever --params said (a run folder has none: N1)."""
    from analysis.present import explore
    from analysis.layout import CASES, PROGRAMS, SPANS
    from analysis.present.provenance import PARAMS_ENV

    for path in (CASES, PROGRAMS, SPANS):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).touch()
    seen = []

    def load(cls, path):
        seen.append(Path(path))
        raise ParamsError("stop here")

    monkeypatch.setattr("analysis.pipeline.config.Config.load", classmethod(load))
    monkeypatch.setenv(PARAMS_ENV, str(tmp_path / "mine.yaml"))
    with pytest.raises(ParamsError, match="stop here"):
        explore.ExploreData.load(root=tmp_path)
    assert seen == [tmp_path / "mine.yaml"]


@pytest.mark.slow
def test_reports_out_dir_renders_every_page(pairs_only, monkeypatch, capsys):
    """N1: the README's one-off flow ends in `reports --out DIR`; DIR holds no params.yaml."""
    (pairs_only / "reports/kernels").mkdir(parents=True)
    shutil.copy(ROOT / "reports/kernels/latency_model.json", pairs_only / "reports/kernels/latency_model.json")
    params = pairs_only / "params.yaml"
    for stage in (["corpora", "--pairs", str(pairs_only / "a.jsonl")], ["programs"], ["roundtrip"], ["spans"],
                  ["bounds"], ["reports"]):
        monkeypatch.chdir(pairs_only)
        assert main(["--params", str(params), "--out", "run", *stage]) == 0, (stage, capsys.readouterr().err[-3000:])
    run = pairs_only / "run"
    assert not (run / "params.yaml").exists() and not (run / "notebooks").exists()
    index = (run / "reports/index.html").read_text()
    assert "Traceback" not in index
    for page in (run / "reports/html").glob("*.html"):
        assert "failed:" not in page.read_text(), page.name
    assert "Pairs-a" in (run / "reports/html/explore.html").read_text()
    assert not [p for p in (run / "reports/notebooks").iterdir() if p.name.startswith(".")]


# ---------------------------------------------------------------- N18: pilot checkpoints load weights only

class _Planted:
    """What a planted checkpoint carries: unpickling it would write a marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (Path(self.marker), "owned"))


class _Tiny:
    """A stand-in for the peft model: one trainable tensor, a loss the optimizer can lower."""

    def __new__(cls):
        import types

        import torch

        class Tiny(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.zeros(3))

            def forward(self, input_ids, labels):
                return types.SimpleNamespace(loss=((self.w - 1.0) ** 2).sum())

        return Tiny()


def _tiny_sequence():
    from types import SimpleNamespace

    return SimpleNamespace(ids=[1, 2], labels=[1, 2])


def test_a_planted_checkpoint_runs_no_code(tmp_path):
    import torch

    from kernels_profile.pilot.train import CheckpointError, TrainSettings, load_checkpoint, train, trained_seconds

    marker, planted = tmp_path / "PWNED", tmp_path / "ckpt.pt"
    torch.save({"weights": {}, "optimizer": {}, "losses": [_Planted(marker)]}, planted)
    for load in (lambda: load_checkpoint(planted), lambda: trained_seconds(planted),
                 lambda: train(_Tiny(), [_tiny_sequence()], TrainSettings(2, 0.1, 0, 100, 10, 0, "constant", 1), planted)):
        with pytest.raises(CheckpointError, match="objects other than tensors"):
            load()
    assert not marker.exists()


def test_a_checkpoint_of_another_schema_or_adapter_is_refused(tmp_path):
    import torch

    from kernels_profile.pilot.train import CheckpointError, TrainSettings, load_checkpoint, train

    path = tmp_path / "c.pt"
    for state, message in (([1, 2], "expected a checkpoint mapping"), ({"weights": {}}, "missing \\['optimizer'"),
                           ({"weights": {}, "optimizer": {}, "losses": [], "extra": 1}, "unknown \\['extra'\\]"),
                           ({"weights": {"w": 1}, "optimizer": {}, "losses": []}, "parameter names to tensors")):
        torch.save(state, path)
        with pytest.raises(CheckpointError, match=message):
            load_checkpoint(path)
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_checkpoint(path)
    torch.save({"weights": {"v": torch.zeros(3)}, "optimizer": {}, "losses": [0.5]}, path)  # another adapter
    with pytest.raises(CheckpointError, match="not this adapter's trainable parameters"):
        train(_Tiny(), [_tiny_sequence()], TrainSettings(2, 0.1, 0, 100, 10, 0, "constant", 1), path)


def test_a_checkpoint_train_wrote_resumes(tmp_path):
    from kernels_profile.pilot.train import TrainSettings, load_checkpoint, train, trained_seconds

    path, settings = tmp_path / "c.pt", TrainSettings(4, 0.1, 0, 100, checkpoint_every=2, warmup=0, schedule="constant", batch=1)
    whole, _ = train(_Tiny(), [_tiny_sequence()], settings, tmp_path / "whole.pt", on_checkpoint=lambda s: {"x": s})
    train(_Tiny(), [_tiny_sequence()], replace(settings, steps=2), path, on_checkpoint=lambda s: {"x": s})
    resumed, curve = train(_Tiny(), [_tiny_sequence()], settings, path, on_checkpoint=lambda s: {"x": s})
    assert resumed == pytest.approx(whole) and [p["step"] for p in curve] == [2, 4]
    assert len(load_checkpoint(path)["losses"]) == 4 and trained_seconds(path) >= 0


# ---------------------------------------------------------------- N4: params that expand or nest without bound

LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8))


@pytest.mark.parametrize("text, message", [
    ("spanz:\n" + "".join("  " + line + "\n" for line in LAUGHS.splitlines()), "aliases|anchors"),
    ("reports:\n  parameters:\n    summary:\n" + "".join("      " + line + "\n" for line in LAUGHS.splitlines()),
     "aliases|anchors"),
    ("spans: &s {seed: 0}\nbounds: *s\n", "anchors \\(&s\\)"),
    ("x: " + "[" * 20000 + "]" * 20000 + "\n", "not valid YAML \\(nested too deeply"),
    ("x: " + "{a: " * 20000 + "1" + "}" * 20000 + "\n", "not valid YAML \\(nested too deeply"),
])
def test_params_that_expand_or_nest_are_refused_at_load(tmp_path, text, message):
    from analysis.pipeline.params import load_params

    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(ParamsError, match=message) as info:  # refused before anything expands: the message says so
        load_params(path)
    assert str(path) in str(info.value)


# ---------------------------------------------------------------- item 11: bounds byte-identical across machines

BOUNDS_SCRIPT = """
import sys
from dataclasses import replace
import numpy as np, polars as pl
from analysis.pipeline.config import Config
from analysis.stages.bounds import bounds_for, settings
rng = np.random.default_rng(3)
rows = []
for corpus in ("HEvalFix-Py", "HEvalFix-JS", "ProbeEdit-S"):
    for k in range(60):
        for level in ("line", "token"):
            for _ in range(int(rng.integers(1, 30))):
                kind = "copy" if rng.random() < 0.6 else "gen"
                n = int(rng.integers(0, 900))
                rows.append((f"{corpus}/{k}", corpus, "body", level, kind, n, n, int(rng.integers(2, 12))))
spans = pl.DataFrame(rows, orient="row", schema={"case_id": pl.String, "corpus": pl.String, "framing": pl.String,
    "level": pl.String, "kind": pl.String, "n_tokens": pl.Int64, "n_tokens_src": pl.Int64, "directive_tokens": pl.Int64})
spans = spans.with_columns(op_index=pl.int_range(pl.len()).over("case_id", "framing", "level").cast(pl.Int64),
                           prompt_tokens=pl.lit(120, dtype=pl.Int64))
s = settings(Config.load("params.yaml").params)
s = replace(s, bootstrap=replace(s.bootstrap, resamples=50))
table, costs, tok, pools = bounds_for(spans, s)
table.write_csv(sys.argv[1] + ".bounds.csv")
costs.write_csv(sys.argv[1] + ".costs.csv")
"""


def _dispatched_cpu_features() -> str:
    """The SIMD levels numpy dispatches to on this CPU (disabling them gives another machine's code paths)."""
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    return " ".join(f for f in __cpu_dispatch__ if __cpu_features__.get(f))


@pytest.mark.slow
def test_bounds_are_byte_identical_across_threads_and_cpus(tmp_path):
    """The shipped kernel sources (this run's fit, the paper, the frozen H200 curves) priced on the same
    spans under 1 vs 4 polars/BLAS threads and with numpy's AVX-512/AVX2 code paths on vs off (what
    another machine runs): the tables must be the same bytes. Before: np.log/np.exp in the latency
    curves took the CPU's SIMD path and the last digit moved."""
    import os
    import subprocess
    import sys

    runs = {"one": {"POLARS_MAX_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"},
            "other": {"POLARS_MAX_THREADS": "4", "OMP_NUM_THREADS": "4", "OPENBLAS_NUM_THREADS": "4",
                      "NPY_DISABLE_CPU_FEATURES": _dispatched_cpu_features()}}
    for name, env in runs.items():
        done = subprocess.run([sys.executable, "-c", BOUNDS_SCRIPT, str(tmp_path / name)], cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT), **env}, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
    for table in ("bounds", "costs"):
        one, other = (tmp_path / f"{name}.{table}.csv" for name in runs)
        assert one.read_bytes() == other.read_bytes(), table


def test_portable_functions_match_the_c_library_bit_for_bit():
    import math

    import numpy as np

    from analysis.latency.model import GridCurve
    from analysis.stats import portable_exp, portable_log, portable_log1p, portable_power

    x = np.random.default_rng(0).uniform(1e-6, 5e3, 2000)
    assert portable_log(x).tolist() == [math.log(v) for v in x]
    assert portable_log1p(x).tolist() == [math.log1p(v) for v in x]
    assert portable_exp(-x / 100).tolist() == [math.exp(-v / 100) for v in x]
    assert portable_power(x, 0.37).tolist() == [math.pow(v, 0.37) for v in x]
    assert portable_log(np.array([0.0, -1.0])).tolist()[0] == -math.inf and math.isnan(portable_log(np.array([-1.0]))[0])
    assert portable_exp(np.array([1e4])).tolist() == [math.inf]
    curve = GridCurve(ns=(1.0, 64.0, 512.0), contexts=(0.0, 4096.0), seconds=((1e-3, 2e-3, 9e-3), (2e-3, 3e-3, 2e-2)))
    n, c = np.array([3.0, 100.0, 700.0]), np.array([10.0, 2000.0, 5000.0])
    expected = []
    for nv, cv in zip(n, c):
        ln = [math.log(v) for v in curve.ns]
        i = min(max(int(np.searchsorted(ln, math.log(nv), side="right")) - 1, 0), len(ln) - 2)
        t = (math.log(nv) - ln[i]) / (ln[i + 1] - ln[i])
        rows = [math.log(r[i]) + t * (math.log(r[i + 1]) - math.log(r[i])) for r in curve.seconds]
        lc = [math.log1p(v) for v in curve.contexts]
        u = (math.log1p(cv) - lc[0]) / (lc[1] - lc[0])
        expected.append(math.exp(rows[0] + u * (rows[1] - rows[0])))
    assert curve.evaluate(n, c).tolist() == pytest.approx(expected, rel=1e-13)


# ---------------------------------------------------------------- N5, N11: one run per output root; leftovers swept

def test_a_second_run_into_a_held_output_root_is_refused(tmp_path, monkeypatch, capsys):
    from analysis.pipeline.io import run_lock

    monkeypatch.chdir(tmp_path)
    (tmp_path / "run").mkdir()
    with run_lock("spans", tmp_path / "run/data/.lock"):
        assert main(["--params", str(ROOT / "params.yaml"), "--out", "run", "programs"]) == 2
        err = capsys.readouterr().err
        assert f"another copydecode run (pid {os.getpid()}, `spans`)" in err and "Traceback" not in err
    monkeypatch.chdir(tmp_path)
    assert main(["--params", str(ROOT / "params.yaml"), "--out", "run", "programs"]) == 2  # free again: only
    assert "cases.parquet not found" in capsys.readouterr().err                            # the missing input


def test_a_killed_holder_does_not_block_the_next_run(tmp_path):
    import signal
    import subprocess
    import sys

    from analysis.pipeline.io import run_lock

    holder = subprocess.Popen([sys.executable, "-c", "import time\nfrom analysis.pipeline.io import run_lock\n"
                               "with run_lock('spans'):\n    print('held', flush=True)\n    time.sleep(120)\n"],
                              cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(Exception, match=f"pid {holder.pid}"), run_lock("programs", tmp_path / "data/.lock"):
            pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with run_lock("programs", tmp_path / "data/.lock"):
        assert (tmp_path / "data/.lock").read_text().startswith(f"pid {os.getpid()}")


def test_temporaries_of_killed_runs_are_swept_by_the_next_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    left = [tmp_path / "run/data/spans/.spans.yra0806c.parquet", tmp_path / "run/reports/tables/.coverage.k2_x9a0b.md",
            tmp_path / "run/data/corpora/commits/.CommitEdits-x.abcdefgh.parquet"]
    kept = [tmp_path / "run/data/.keep", tmp_path / "run/reports/tables/coverage.md",
            tmp_path / "run/data/spans/.notes.txt"]
    for path in left + kept:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    assert main(["--params", str(ROOT / "params.yaml"), "--out", "run", "programs"]) == 2  # refused, yet swept
    assert [p.exists() for p in left] == [False] * 3 and all(p.exists() for p in kept)


def test_a_failing_corpora_run_keeps_the_previous_commit_shards(pairs_only, capsys):
    """N5: the stale-shard removal went straight to disk once the first build succeeded."""
    shard = pairs_only / "data/corpora/commits/CommitEdits-old.parquet"
    shard.parent.mkdir(parents=True)
    pl.DataFrame({"x": [1]}).write_parquet(shard)
    write_jsonl(pairs_only / "bad.jsonl", [{"source": "a\n", "target": ""}])
    assert cli("corpora", "--only", "--pairs", "a.jsonl", "--pairs", "bad.jsonl") == 2
    assert "field 'target' is empty" in capsys.readouterr().err
    assert shard.is_file() and not list(shard.parent.glob(".*"))
    assert cli("corpora", "--only", "--pairs", "a.jsonl") == 0  # a run that succeeds removes it with its set
    assert not shard.exists()


# ---------------------------------------------------------------- N3: outputs of two corpora never mix silently

def _two_corpora_root(root: Path) -> None:
    """perturb's outputs recorded against one cases table, then `corpora` rebuilt another."""
    from analysis.pipeline.digest import record_corpus

    cases, table = root / "data/corpora/cases.parquet", root / "reports/tables/perturb_probe.csv"
    for path, text in ((cases, "Mine"), (table, "rate,em\n")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    record_corpus("perturb", [Path("reports/tables/perturb_probe.csv")])
    record_corpus("spans", [])
    cases.write_text("Other")


def test_a_stage_built_from_another_corpus_is_named(tmp_path, monkeypatch):
    from analysis.pipeline.digest import stale_stages

    monkeypatch.chdir(tmp_path)
    _two_corpora_root(tmp_path)
    assert list(stale_stages()) == ["perturb"] and "rerun `copydecode perturb`" in stale_stages()["perturb"]
    (tmp_path / "reports/tables/perturb_probe.csv").write_text("rate,em\n1,0\n")  # not the output it recorded
    assert stale_stages() == {}


def test_headline_refuses_outputs_of_two_corpora(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _two_corpora_root(tmp_path)
    assert main(["--params", str(ROOT / "params.yaml"), "headline"]) == 2
    err = capsys.readouterr().err
    assert "stale: built from another corpus (`perturb` ran on a different data/corpora/cases.parquet" in err
    assert not (tmp_path / "reports/metrics/headline").exists()


def test_reports_mark_pages_built_from_another_corpus(tmp_path, monkeypatch, fake_papermill):
    from analysis.present.reports import HTML, INDEX, run_reports

    monkeypatch.chdir(tmp_path)
    for folder in ("reports/tables", "reports/metrics"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    _two_corpora_root(tmp_path)
    run_reports({}, tmp_path)
    marked = {p.stem for p in (tmp_path / HTML).glob("*.html") if "stale: built from another corpus" in p.read_text()}
    assert marked == {"summary", "perturbation"}
    assert "stale: built from another corpus" in (tmp_path / INDEX).read_text()


def test_every_output_set_stage_records_its_corpus(pairs_only):
    assert cli("corpora", "--only", "--pairs", "a.jsonl") == 0
    record = json.loads((pairs_only / "data/.corpus/corpora.json").read_text())
    assert "data/corpora/cases.parquet" in record["outputs"] and len(record["cases_sha256"]) == 64


# ---------------------------------------------------------------- N17, N12: failed one-off runs, Ctrl-C

def test_a_failed_run_into_a_new_out_root_leaves_nothing_behind(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reports/kernels").mkdir(parents=True)
    shutil.copy(ROOT / "reports/kernels/latency_model.json", tmp_path / "reports/kernels/latency_model.json")
    write_jsonl(tmp_path / "bad.jsonl", [{"source": "a\n", "target": ""}])
    assert main(["--params", str(ROOT / "params.yaml"), "--out", "new", "corpora", "--only", "--pairs", "bad.jsonl"]) == 2
    assert "field 'target' is empty" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()
    (tmp_path / "kept/data").mkdir(parents=True)  # a root that existed before the run is never removed
    monkeypatch.chdir(tmp_path)
    assert main(["--params", str(ROOT / "params.yaml"), "--out", "kept", "corpora", "--only", "--pairs", "bad.jsonl"]) == 2
    assert (tmp_path / "kept/data").is_dir()


def test_a_crash_into_a_new_out_root_leaves_no_folder_behind(tmp_path, monkeypatch):
    """N17 remnant (issue 39): a raw exception (L2, M8) left the new --out folder behind."""
    import analysis.cli as cli_module

    def crash(module, args, cfg):
        raise RuntimeError("a bug")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli_module, "run_stage", crash)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["--params", str(ROOT / "params.yaml"), "--out", "new", "programs"])
    monkeypatch.chdir(tmp_path)
    assert not (tmp_path / "new").exists()


def test_a_path_too_long_for_the_file_system_is_named(tmp_path, monkeypatch, capsys):
    """L2: a name over 255 bytes gave a raw `OSError: [Errno 36] File name too long`."""
    import errno

    import analysis.cli as cli_module

    def too_long(module, args, cfg):
        raise OSError(errno.ENAMETOOLONG, "File name too long", "x" * 300 + ".jsonl")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli_module, "run_stage", too_long)
    assert main(["--params", str(ROOT / "params.yaml"), "--out", "new", "programs"]) == 2
    err = capsys.readouterr().err
    assert "a path is too long for the file system" in err and "(306 bytes)" in err and "Traceback" not in err
    monkeypatch.chdir(tmp_path)
    assert not (tmp_path / "new").exists()


def test_ctrl_c_on_a_parallel_stage_exits_130(tmp_path, monkeypatch, capsys):
    from joblib.externals.loky.process_executor import TerminatedWorkerError

    import analysis.cli as cli_module

    def interrupted(*args, **kwargs):
        raise TerminatedWorkerError("A worker process managed by the executor was unexpectedly terminated. "
                                    "The exit codes of the workers are {SIGINT(-2)}")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli_module, "run_stage", interrupted)
    assert main(["--params", str(ROOT / "params.yaml"), "--out", "run", "spans"]) == 130
    err = capsys.readouterr().err
    assert "interrupted; finished outputs and checkpoints are kept" in err and "Traceback" not in err


def test_out_runs_keep_no_machine_paths(pairs_only, monkeypatch):
    """N16: --out made every input absolute, so reports and metrics held this machine's folders."""
    assert cli("--out", "runs/x", "corpora", "--only", "--pairs", "a.jsonl") == 0
    monkeypatch.chdir(pairs_only)
    text = (pairs_only / "runs/x/reports/metrics/corpora.json").read_text()
    assert "pairs:../../a.jsonl" in text and str(pairs_only) not in text
    args = build_parser().parse_args(["--out", "runs/y", "corpora", "--pairs", "a.jsonl"])
    from analysis.pipeline.oneoff import enter_out_root

    cfg = enter_out_root("runs/y", Config.load("params.yaml"), args)
    assert str(cfg.path) == "../../params.yaml" and args.pairs == ["../../a.jsonl"]
    assert Path(cfg.path).resolve() == pairs_only / "params.yaml"


# ---------------------------------------------------------------- qa-review round 6: the serving stages' outputs

SMALL_SERVING = ["--set", "serving.sources=[batched]", "--set", "serving.engine.max_num_batched_tokens=[2048]",
                 "--set", "serving.closed_loop.concurrency=[1, 4]", "--set", "serving.closed_loop.min_requests=20",
                 "--set", "serving.open_loop.qps_fractions=[0.5]", "--set", "serving.open_loop.requests=20",
                 "--set", "serving.headline_concurrency=[1, 4]", "--set", "serving.replay.concurrency=[1, 4]"]


@pytest.mark.slow
def test_a_serving_simulation_killed_between_its_writes_keeps_the_old_set(pairs_only, monkeypatch):
    """M3 (round 6): `serving simulate` wrote its four outputs one by one, so a kill at the third left new page
    tables beside the old serving.json, which headline took. Now they land as one set, with a corpus record."""
    import analysis.stages.serving as serving

    (pairs_only / "reports/kernels").mkdir(parents=True)
    for name in ("latency_model.json", "step_cost.json"):
        shutil.copy(ROOT / "reports/kernels" / name, pairs_only / "reports/kernels" / name)
    write_params(pairs_only, **{"corpora.humanevalpack.languages": [], "corpora.probeedit.enabled": False,
                                "corpora.commits": [], "parallel.n_jobs": 1,
                                "kernel.sources": sources_held(params_with(), ROOT / "reports/kernels/latency_model.json")[
                                    "kernel"]["sources"]})
    for argv in (["corpora", "--only", "--pairs", "a.jsonl"], ["programs"], ["rivals"], ["serving", "simulate", *SMALL_SERVING]):
        assert cli(*argv) == 0, argv
    outputs = [pairs_only / p for p in ("reports/tables/serving.csv", "reports/tables/serving_claim.csv",
                                        "data/serving/steps.parquet", "reports/metrics/serving.json")]
    before = [p.read_bytes() for p in outputs]
    assert json.loads((pairs_only / "data/.corpus/serving_simulate.json").read_text())["stage"] == "serving simulate"

    def killed(*args, **kwargs):  # a kill at the third write, as the review's stand-in for a SIGKILL
        raise KeyboardInterrupt

    monkeypatch.setattr(serving, "write_parquet", killed)
    assert cli("serving", "simulate", *SMALL_SERVING, "--set", "serving.seed=7") == 130
    assert [p.read_bytes() for p in outputs] == before  # all old: nothing of the killed run replaced them
    assert not [p for p in pairs_only.rglob(".serving*") if p.is_file()]  # no temporary file left beside them
