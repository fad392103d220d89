"""The standing probe suite (issue 29): every input kind the QA reviews tried, as one table row each:
an input, the named error it must give (or the result), and the check that nothing stray was written
and no planted code ran. New input kinds get a row. No models; the slow rows are marked.

Rows come from ../shared/docs/reviews/qa-review.md (probe numbers in the ids: `p48` is its probe 48,
`N2` its defect N2). Each runner returns the error text (or "" for success); the test matches it.
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
import yaml
from fixtures import ROOT, params_with, write_field_benchmarks

from analysis.errors import CopyDecodeError

MARKER = "PWNED"  # every planted payload writes this file name; it must never appear
WRITE_MARKER = f"__import__('pathlib').Path('{MARKER}').write_text('owned')"
LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8))


@dataclass(frozen=True)
class Probe:
    id: str
    run: Callable[[Path], str]  # in a scratch folder (the cwd); returns the error text, "" when accepted
    expect: str                 # a substring of the error ("" : must be accepted)


# ---------------------------------------------------------------- runners


def params_file(text: str | bytes) -> Callable[[Path], str]:
    """load_params on a file holding `text`."""
    def run(folder: Path) -> str:
        from analysis.pipeline.params import load_params

        path = folder / "p.yaml"
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        load_params(path)
        return ""
    return run


def params_path(make: Callable[[Path], Path]) -> Callable[[Path], str]:
    def run(folder: Path) -> str:
        from analysis.pipeline.params import load_params

        load_params(make(folder))
        return ""
    return run


def shipped_params_with(**changes) -> Callable[[Path], str]:
    """The shipped params.yaml with `changes`, loaded with the key check (a typo is named)."""
    def run(folder: Path) -> str:
        from analysis.pipeline.params import load_params

        path = folder / "p.yaml"
        params = yaml.safe_load((ROOT / "params.yaml").read_text())
        for dotted, value in changes.items():
            node = params
            *parents, last = dotted.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[last] = value
        path.write_text(yaml.safe_dump(params))
        load_params(path)
        return ""
    return run


def shipped_params_range() -> Callable[[Path], str]:
    """optimal.min_copies: [0]: a list checked against an open range."""
    def run(folder: Path) -> str:
        from analysis.stages.optimal import settings

        settings(params_with(**{"optimal.min_copies": [0]}))
        return ""
    return run


def stage_settings(module: str, **changes) -> Callable[[Path], str]:
    """`module.settings(params)` on the shipped params with `changes`: refused before any model loads."""
    def run(folder: Path) -> str:
        import importlib

        importlib.import_module(module).settings(params_with(**changes))
        return ""
    return run


def rivals_simulated(expected: tuple[str, ...], **changes) -> Callable[[Path], str]:
    """The rivals stage's own simulation (its settings, then `simulate`, serially) of one hand-made case under the
    shipped params with `changes`: "" when every method name in `expected` has forwards, else the names that
    vanished (or the refusal, by name)."""
    def run(folder: Path) -> str:
        import dataclasses

        import polars as pl

        from analysis.parallel.workers import SERIAL
        from analysis.stages import rivals
        from analysis.text.tokens import load_tokenizer

        s = rivals.settings(params_with(**changes))
        case = pl.DataFrame({"case_id": ["P/1"], "corpus": ["P"], "framing": ["body"],
                             "source": ["def f(x):\n    return x\n"], "target": ["def f(x):\n    return x + 1\n"],
                             "line": ['<copy lines="1-1"/><gen>    return x + 1\n</gen>'],
                             "token": ['<gen>def f(x):\n    return x + 1\n</gen>']})
        shipped, rivals.pool_cases = rivals.pool_cases, lambda framing: case
        try:
            forwards = rivals.simulate(dataclasses.replace(s, parallel=SERIAL), load_tokenizer(s.tokenizer))
        finally:
            rivals.pool_cases = shipped
        missing = sorted(set(expected) - set(forwards["method"]))
        return f"not simulated: {missing}" if missing else ""
    return run


def latency_model(text: str) -> Callable[[Path], str]:
    """A latency model file holding `text`, read as every kernel-using stage reads it."""
    def run(folder: Path) -> str:
        from analysis.latency.sources import load_fitted_models

        path = folder / "p.yaml.json"
        path.write_text(text)
        load_fitted_models(path)
        return ""
    return run


def empty_repository(folder: Path) -> None:
    import subprocess

    subprocess.run(["git", "init", "-q", str(folder / "mixed")], check=True, env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull})


def report_parameters(report: str, values) -> Callable[[Path], str]:
    """The reports stage's settings with `reports.parameters.<report>` = values (refused before papermill)."""
    def run(folder: Path) -> str:
        from analysis.stages.reports import settings

        settings(params_with(**{f"reports.parameters.{report}": values}))
        return ""
    return run


def pairs_file(text: str | bytes, suffix: str = ".jsonl") -> Callable[[Path], str]:
    """A pairs file read as `corpora` reads it."""
    def run(folder: Path) -> str:
        from analysis.corpora.entries import PairsSettings
        from analysis.corpora.pairs import load_pairs

        path = folder / f"pairs{suffix}"
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        load_pairs(PairsSettings(path=str(path)))
        return ""
    return run


def pairs_parquet(categorical: bool = False, dictionary: bool = False, binary: bool = False) -> Callable[[Path], str]:
    """A Parquet pairs file whose text columns are Categorical (polars), pyarrow dictionaries, or bytes."""
    def run(folder: Path) -> str:
        import polars as pl
        import pyarrow as pa
        import pyarrow.parquet as pq

        from analysis.corpora.entries import PairsSettings
        from analysis.corpora.pairs import load_pairs

        path = folder / "pairs.parquet"
        texts = {"source": ["a = 1\n", "b = 2\n"], "target": ["a = 2\n", "b = 3\n"]}
        if categorical:
            pl.DataFrame(texts).with_columns(pl.all().cast(pl.Categorical)).write_parquet(path)
        elif dictionary:
            pq.write_table(pa.table({k: pa.array(v).dictionary_encode() for k, v in texts.items()}), path)
        else:
            pq.write_table(pa.table({k: pa.array([x.encode() for x in v]) if binary else v for k, v in texts.items()}),
                           path)
        cases, _ = load_pairs(PairsSettings(path=str(path)))
        assert [c.source for c in cases] == texts["source"]
        return ""
    return run


def _reads_params(argv: tuple[str, ...]) -> bool:
    """Whether the command ARGV runs reads params (a command with READS_PARAMS = False refuses --params)."""
    import importlib

    from analysis.pipeline.commands import MAINTENANCE, STAGES, TOOLS

    commands = {**STAGES, **TOOLS, **MAINTENANCE}
    for n in (2, 1):
        name = " ".join(argv[:n])
        if name in commands:
            return getattr(importlib.import_module(commands[name]), "READS_PARAMS", True)
    return True


def cli(*argv: str, setup: Callable[[Path], None] | None = None) -> Callable[[Path], str]:
    """`copydecode ARGV` (the shipped params unless ARGV names others, or its command reads no params); the
    error text is stderr."""
    def run(folder: Path) -> str:
        import contextlib
        import io

        from analysis.cli import main

        if setup is not None:
            setup(folder)
        err = io.StringIO()
        previous = signal.signal(signal.SIGALRM, _hung)
        signal.alarm(60)  # a probe that blocks (a FIFO read) fails instead of hanging the suite
        with contextlib.redirect_stderr(err):
            try:
                code = main(["--params", str(ROOT / "params.yaml"), *argv]
                            if "--params" not in argv and _reads_params(argv) else list(argv))
            except SystemExit as exc:  # argparse
                code = exc.code
            finally:
                signal.alarm(0)
                signal.signal(signal.SIGALRM, previous)
        os.chdir(folder)  # --out moves into the run folder
        assert "Traceback" not in err.getvalue(), err.getvalue()
        if code == 0:
            return ""
        assert code == 2, (code, err.getvalue())
        return err.getvalue() or f"exit {code}"
    return run


def _hung(signum, frame):
    raise TimeoutError("the probe blocked for 60 s")


def hostile_params(folder: Path) -> None:
    path = folder / "hostile.yaml"
    path.write_text(yaml.safe_dump(params_with(**{"reports.parameters.summary": {f"x = {WRITE_MARKER}; y": 1}})))


def checkpoint(state_of: Callable[[Path], object]) -> Callable[[Path], str]:
    """A pilot checkpoint holding `state_of(folder)`, loaded as the pilot stage loads it."""
    def run(folder: Path) -> str:
        import torch

        from kernels_profile.pilot.train import load_checkpoint

        path = folder / "adapter.pt"
        torch.save(state_of(folder), path)
        load_checkpoint(path)
        return ""
    return run


def grammar_limit(n_lines: int, fmt: str, forced: bool) -> Callable[[Path], str]:
    """The export's size check for a source of `n_lines` (the grammar is never built)."""
    def run(folder: Path) -> str:
        from analysis.grammar.export import check_limit

        check_limit(n_lines, fmt, forced)
        return ""
    return run


def source_files(folder: Path) -> None:
    """Sources for `copydecode grammar`: f.py (3 lines), fbad.py (not UTF-8), fbig.py (20,001 lines), and a folder d."""
    (folder / "f.py").write_text("a = 1\nb = 2\nc = 3\n")
    (folder / "fbad.py").write_bytes(b"caf\xe9 = 1\n")
    (folder / "fbig.py").write_text("x = 1\n" * 20_001)
    (folder / "d").mkdir()


def field_benchmarks(change: Callable[[Path], None] | None = None, out: str = "run",
                     repin: bool = True) -> Callable[[Path], str]:
    """`copydecode --out OUT corpora --only datasets` on the two edit benchmarks as small files shaped like the real
    ones (edits/, pinned by sha256 as the shipped params pin the real files), `change(edits folder)` applied before
    they are pinned (`repin`) or after. A dataset loading script planted beside them must never run: the files are
    data. Accepted, the run holds every record, checked."""
    def run(folder: Path) -> str:
        import hashlib

        edits = folder / "edits"
        entries = write_field_benchmarks(edits)
        for entry in entries:
            entry["dataset"] = str(Path(entry["dataset"]).relative_to(folder))
        script = f"import pathlib\npathlib.Path({str(folder / MARKER)!r}).write_text('owned')\n"
        for name in ("edits.py", "canitedit_test.py", "edit_eval.py"):
            (edits / name).write_text(script)
        if change is not None:
            change(edits)
        for entry in entries if repin else []:
            entry["sha256"] = hashlib.sha256((folder / entry["dataset"]).read_bytes()).hexdigest()
        (folder / "small.yaml").write_text(yaml.safe_dump(params_with(**{"corpora.datasets": entries})))
        error = cli("--params", "small.yaml", "--out", out, "corpora", "--only", "datasets")(folder)
        if not error:
            import polars as pl

            cases = pl.read_parquet(folder / out / "data/corpora/cases.parquet")
            assert cases["case_id"].to_list() == ["CanItEdit/10", "CanItEdit/11", "EditEval/0", "EditEval/2"]
        return error
    return run


def _append(name: str, line: str) -> Callable[[Path], None]:
    def change(edits: Path) -> None:
        with (edits / name).open("a") as handle:
            handle.write(line + "\n")
    return change
def rivals_before_simulation(folder: Path) -> str:
    """L7 (round 6): `rivals` with an unknown measured kernel source is refused before it simulates a case (the
    simulation here raises), in seconds rather than after the simulation."""
    import shutil
    from unittest import mock

    import analysis.stages.rivals as rivals

    (folder / "run/reports/kernels").mkdir(parents=True)
    shutil.copy2(ROOT / "reports/kernels/latency_model.json", folder / "run/reports/kernels/latency_model.json")
    with mock.patch.object(rivals, "simulate", side_effect=AssertionError("simulated before naming its sources")):
        return cli("--out", "run", "--set", "rivals.kernel_sources=[fit, h100/llama-70b/eager]", "--set",
                   "rivals.judged_source=fit", "rivals")(folder)


class _Planted:
    def __init__(self, folder):
        self.folder = folder

    def __reduce__(self):
        return (Path.write_text, (Path(self.folder) / MARKER, "owned"))


@__import__("functools").cache
def _engine():
    """(llguidance's tokenizer, the suite's Qwen tokenizer), built once for the grammar rows."""
    from analysis.grammar.llg import ll_tokenizer
    from analysis.text.tokens import load_tokenizer

    qwen = load_tokenizer()
    return ll_tokenizer(qwen, (151643,)), qwen


def exported_grammar(name: str | bytes, data: bytes, *flags: str) -> Callable[[Path], str]:
    """`copydecode grammar --source FILE FLAGS --out run/g.lark` on a file holding `data`, then the file it wrote
    compiled by llguidance: the forced form must accept exactly the file's copy programs (fixtures), the symbolic
    form a copy of every line and none past them."""
    def run(folder: Path) -> str:
        import llguidance
        from fixtures import check_forced_copies

        from analysis.text.lines import split_lines

        path = folder / os.fsdecode(name)
        path.write_bytes(data)
        (folder / "run").mkdir(exist_ok=True)
        error = cli("grammar", "--source", str(path), *flags, "--out", "run/g.lark")(folder)
        if error:
            return error
        text = (folder / "run/g.lark").read_text(encoding="utf-8")
        lltok, qwen = _engine()
        matcher = llguidance.LLMatcher(lltok, llguidance.LLMatcher.grammar_from_lark(text), log_level=0)
        assert not matcher.is_error(), matcher.get_error()
        source, n = data.decode("utf-8"), len(split_lines(data.decode("utf-8")))
        lines = text.splitlines()  # the header: comment lines only, up to the first rule
        assert lines[0] == "%llguidance {}" and all(line.startswith("// ") for line in lines[1:lines.index("start: op*")])
        assert not [line for line in lines[1:] if line.startswith("%")]
        if flags:
            check_forced_copies(matcher, qwen, source)
        else:
            assert matcher.deep_copy().consume_tokens(list(qwen.encode_program(f'<copy lines="1-{n}"/>').ids))
            assert not matcher.deep_copy().consume_tokens(list(qwen.encode_program(f'<copy lines="1-{n + 1}"/>').ids))
        stray = matcher.deep_copy()  # text outside any op is never accepted
        assert not (stray.consume_tokens(list(qwen.encode("<gen>x</gen>rm -rf /").ids)) and stray.is_accepting())
        return ""
    return run


# ---------------------------------------------------------------- the table

def planted_engine_run(record: str) -> Callable[[Path], None]:
    """A frozen engine run folder in the run root (`run/`) whose request record is `record`, beside a planted
    `vllm` package and `sitecustomize.py` that would write the marker if anything imported them."""
    def setup(folder: Path) -> None:
        run = folder / "run" / "reports" / "engine" / "frozen" / "cpu-smollm2"
        (run / "results").mkdir(parents=True)
        (run / "vllm").mkdir()
        for planted in (run / "vllm" / "__init__.py", run / "sitecustomize.py"):
            planted.write_text(WRITE_MARKER + "\n")
        (run / "run.json").write_text(json.dumps({"command": "x", "commit": "c", "started": "s", "ended": "e",
                                                  "seconds": 1}))
        (run / "requests.json").write_text(json.dumps({"requests": [{"rid": "r0", "rewrite_prompt_ids": [1],
                                                                    "program_prompt_ids": [1]}]}))
        (run / "gold.json").write_text(json.dumps({"r0": {"ids": [1], "end_id": 2}}))
        (run / "requests.jsonl").write_text(record + "\n")
    return setup


def engine_driver_beside_planted_vllm(folder: Path) -> str:
    """The engine driver started as `engine run` starts it, in a run folder holding a planted `vllm` package:
    isolated mode keeps the folder off its import path, so the import fails by name (no engine here) and the
    planted code never runs."""
    import sys

    from kernels_profile.engine import process, session

    raw = folder / "run" / "raw"
    (raw / "vllm").mkdir(parents=True)
    (raw / "vllm" / "__init__.py").write_text(WRITE_MARKER + "\n")
    (raw / "sitecustomize.py").write_text(WRITE_MARKER + "\n")
    job = raw / "job.json"
    job.write_text(json.dumps({"schema": session.JOB_SCHEMA, "model": "m", "engine_args": {}, "method": {"name": "ar"},
                               "requests": {}, "runs": [{"run_id": "ar-c1-r0", "concurrency": 1, "order": []}]}))
    try:
        process.run_driver(Path(sys.executable), session.DRIVER, job, raw, {**os.environ, "PYTHONPATH": str(raw)}, 60,
                           raw / "driver.log")
    except process.EngineProcessError as exc:
        return str(exc)
    return ""


PROBES = [
    # params files (qa-review probes 47-53, N4)
    Probe("p48-python-object-tag", params_file(f"x: !!python/object/apply:os.system ['touch {MARKER}']\n"),
          "could not determine a constructor"),
    Probe("p48-python-name-tag", params_file("x: !!python/name:os.system\n"), "could not determine a constructor"),
    Probe("p48-recursive-alias", params_file("a: &a [*a]\n"), "anchors (&a)"),
    Probe("N4-anchor-and-alias", params_file("spans: &s {seed: 0}\nbounds: *s\n"), "not allowed in params"),
    Probe("N4-billion-laughs-unknown-key", params_file(
        "spanz:\n" + "".join(f"  {line}\n" for line in LAUGHS.splitlines())), "not allowed in params"),
    Probe("N4-billion-laughs-report-parameters", params_file(
        "reports:\n  parameters:\n    summary:\n" + "".join(f"      {line}\n" for line in LAUGHS.splitlines())),
        "not allowed in params"),
    Probe("N4-20000-brackets", params_file("x: " + "[" * 20000 + "]" * 20000 + "\n"), "not valid YAML (nested too deeply"),
    Probe("N4-20000-braces", params_file("x: " + "{a: " * 20000 + "1" + "}" * 20000 + "\n"), "nested too deeply"),
    Probe("p47-duplicate-group", params_file("spans: {seed: 0}\nspans: {seed: 1}\n"), "given twice in one mapping"),
    Probe("p47-typo", shipped_params_with(**{"spans.bootstrap_resample": 10}), "did you mean 'spans.bootstrap_resamples'"),
    Probe("p47-unknown-group", shipped_params_with(**{"spanz": {"seed": 0}}), "unknown setting ['spanz']"),
    Probe("p53-not-utf8", params_file(b"spans:\n  seed: \xff\n"), "not UTF-8 text"),
    Probe("p53-empty", params_file(""), "expected a mapping of stage names"),
    Probe("p53-a-list", params_file("- 1\n- 2\n"), "expected a mapping of stage names"),
    Probe("p53-tab-indent", params_file("spans:\n\tseed: 0\n"), "not valid YAML"),
    Probe("p53-a-folder", params_path(lambda f: f), "it is a folder"),
    Probe("p53-missing", params_path(lambda f: f / "nope.yaml"), "no params file"),
    # report parameters (N2, N10, D10)
    Probe("N2-code-in-a-parameter-name", report_parameters("summary", {f"x = {WRITE_MARKER}; y": 1}), "unknown parameter"),
    Probe("N10-root-is-not-a-parameter", report_parameters("coverage", {"root": "/elsewhere"}), "set by the stage"),
    Probe("D10-unknown-parameter", report_parameters("coverage", {"colour": "red"}), "'colour'"),
    Probe("N4-list-parameter-value", report_parameters("kernel", {"model": ["a", "b"]}), "must be a string, number"),
    Probe("reports-unknown-report", report_parameters("summry", {}), "unknown reports ['summry']"),
    # settings-time checks of the model stages (D10; no model loads)
    Probe("D10-profile-ns-twice", stage_settings("kernels_profile.stages.profile", **{"kernels.profile.ns": [8, 8]}),
          "kernels.profile.ns lists a value twice: [8, 8]"),
    Probe("D10-profile-threads-1000", stage_settings("kernels_profile.stages.profile",
                                                     **{"kernels.profile.threads": 100000}),
          "above 8 threads per usable core"),
    Probe("D10-profile-threads-0", stage_settings("kernels_profile.stages.profile", **{"kernels.profile.threads": 0}),
          "must be a positive integer"),
    Probe("D10-e2e-threads-negative", stage_settings("kernels_profile.stages.e2e", **{"e2e.threads": -2}),
          "'e2e.threads' must be a positive integer"),
    Probe("D10-e2e-threads-1000", stage_settings("kernels_profile.stages.e2e", **{"e2e.threads": 100000}),
          "'e2e.threads' is 100000, above 8 threads per usable core"),
    Probe("D10-e2e-constrained-corpus-unknown", stage_settings("kernels_profile.stages.e2e",
                                                               **{"e2e.constrained.corpus": "HEvalFix-Pi"}),
          "unknown corpus 'HEvalFix-Pi'; params corpora configures HEvalFix-Py, HEvalFix-JS"),
    Probe("D10-e2e-constrained-corpus-suggests", stage_settings("kernels_profile.stages.e2e",
                                                                **{"e2e.constrained.corpus": "HEvalFix-Pi"}),
          "did you mean 'HEvalFix-Py'?"),
    Probe("D10-decode-framing-unknown", stage_settings("kernels_profile.stages.decode", **{"decode.framing": "sideways"}),
          "decode: framing 'sideways' unknown; known: body, decl, prompt"),
    Probe("D10-decode-framing-single", stage_settings("kernels_profile.stages.decode", **{"decode.framing": "pair"}), ""),
    Probe("D10-e2e-model-name-unknown", stage_settings("kernels_profile.stages.e2e", **{"e2e.models": [
        {"name": "gpt-5", "weights": "gguf", "dtype": "float32", "sample": {"HEvalFix-Py": 1}}]}),
        "'e2e.models[0].name': unknown model 'gpt-5'"),
    Probe("D10-e2e-shipped", stage_settings("kernels_profile.stages.e2e"), ""),
    # corpus entries: range errors name the params key, at settings time (D6)
    Probe("D6-min-lines-0", stage_settings("analysis.stages.corpora", **{"corpora.commit_defaults.min_lines": 0}),
          "'corpora.commit_defaults.min_lines' = 0 and 'corpora.commit_defaults.max_lines' = 600"),
    Probe("D6-max-changed-share-2", stage_settings("analysis.stages.corpora",
                                                   **{"corpora.commit_defaults.max_changed_share": 2}),
          "'corpora.commit_defaults.max_changed_share' must be in (0, 1], got 2"),
    Probe("D6-language-cobol", stage_settings("analysis.stages.corpora", **{"corpora.commits": [
        {"name": "x", "repo": "x.bundle", "language": "cobol"}]}), "'corpora.commits[0].language': unknown language 'cobol'"),
    Probe("D6-sha256-abc", stage_settings("analysis.stages.corpora", **{"corpora.commits": [
        {"name": "x", "repo": "x.bundle", "sha256": "abc"}]}), "'corpora.commits[0].sha256' must be 64 hex digits"),
    Probe("D6-pairs-format-xml", stage_settings("analysis.stages.corpora", **{"corpora.pairs": [
        {"path": "x.jsonl", "format": "xml"}]}), "'corpora.pairs[0].format' must be one of auto, jsonl, parquet"),
    Probe("D6-cli-language-cobol", cli("--out", "run", "corpora", "--only", "--repo", "x", "--language", "cobol"),
          "--language 'cobol': unknown language 'cobol'"),
    Probe("reports-known-parameter", report_parameters("explore", {"case_id": "x", "widgets": False}), ""),
    # pairs files (probes 1-12, D2, D13)
    Probe("p3-empty-target", pairs_file('{"source": "a\\n", "target": ""}\n'), "field 'target' is empty"),
    Probe("p1-source-int", pairs_file('{"source": 1, "target": "b"}\n'), "field 'source' must be a string, got int"),
    Probe("p2-missing-source", pairs_file('{"target": "b"}\n'), "missing field 'source'"),
    Probe("p2-null-source", pairs_file('{"source": null, "target": "b"}\n'), "missing field 'source' (null)"),
    Probe("p4-raw-tab", pairs_file('{"source": "a\tb", "target": "b"}\n'),
          ":1: not valid JSON (Invalid control character at column 14)"),
    Probe("p9-truncated-string", pairs_file('{"source": "a", "tar'), "(Unterminated string starting at column 17)"),
    Probe("D17-categorical-parquet", pairs_parquet(categorical=True), ""),
    Probe("D17-dictionary-parquet", pairs_parquet(dictionary=True), ""),
    Probe("p24-binary-column-parquet", pairs_parquet(binary=True), "column 'source' must hold strings, got Binary"),
    Probe("p6-latin1", pairs_file(b'{"source": "caf\xe9", "target": "b"}\n'), "not valid UTF-8 (byte 0xe9"),
    Probe("p7-bom-on-line-2", pairs_file('{"source": "a", "target": "b"}\n\ufeff{"source": "a", "target": "c"}\n'),
          ":2: not valid JSON"),
    Probe("p9-empty-file", pairs_file(""), "the file is empty"),
    Probe("p9-truncated-record", pairs_file('{"source": "a", "target": "b"}\n{"source": "a", "tar'), ":2: not valid JSON"),
    Probe("p10-top-level-number", pairs_file("5\n"), "expected a JSON object, got int"),
    Probe("p11-duplicate-case-id", pairs_file('{"case_id": "x", "source": "a", "target": "b"}\n'
                                              '{"case_id": "x", "source": "a", "target": "c"}\n'), "duplicate case_id 'x'"),
    Probe("p12-100000-deep", pairs_file('{"source": ' + "[" * 100000 + "]" * 100000 + ', "target": "b"}\n'),
          "nested too deeply"),
    Probe("p12-lone-surrogate", pairs_file('{"source": "\\ud800", "target": "b"}\n'), "lone surrogate"),
    Probe("D13-json-array", pairs_file('[{"source": "a", "target": "b"}]\n'), "not a JSON array"),
    Probe("p14-source-equals-target", pairs_file('{"source": "a\\n", "target": "a\\n"}\n'), ""),
    # pilot checkpoints (N18)
    Probe("N18-planted-checkpoint", checkpoint(lambda f: {"weights": {}, "optimizer": {}, "losses": [_Planted(f)]}),
          "objects other than tensors"),
    Probe("N18-other-schema", checkpoint(lambda f: {"weights": {}}), "not a pilot checkpoint of this schema"),
    Probe("N18-a-list", checkpoint(lambda f: [1, 2, 3]), "expected a checkpoint mapping"),
    # the command line (probes 57, 61, 73, N2 end to end)
    Probe("p57-out-an-existing-file", cli("--out", "f", "programs", setup=lambda f: (f / "f").write_text("x")),
          "exists and is not a folder"),
    Probe("p57-out-the-current-folder", cli("--out", ".", "programs"), "names the current folder"),
    Probe("p73-unknown-stage", cli("corpra"), "invalid choice: 'corpra'"),
    Probe("kernels-profile-out", cli("--out", "run", "kernels", "profile"), "not supported here"),
    Probe("N2-cli-code-key", cli("--params", "hostile.yaml", "--out", "run", "reports", setup=hostile_params),
          "unknown parameter"),
    Probe("N6-programs-before-corpora", cli("--out", "run", "programs"),
          "data/corpora/cases.parquet not found; run `copydecode corpora` first"),
    Probe("N9-out-filesystem-root", cli("--out", "/", "programs"), "a folder above the current one"),
    Probe("N9-out-parent", cli("--out", "..", "programs"), "a folder above the current one"),
    Probe("N9-out-the-projects-reports", cli("--out", "reports", "programs", setup=lambda f: (f / "dvc.yaml").write_text(
        "stages: {}\n")), "lies in the project's own reports/ folder"),
    Probe("N9-out-the-projects-notebooks", cli("--out", "notebooks/x", "programs", setup=lambda f: (
        f / "dvc.yaml").write_text("stages: {}\n")), "lies in the project's own notebooks/ folder"),
    Probe("N9-out-under-a-file", cli("--out", "f/x", "programs", setup=lambda f: (f / "f").write_text("x")),
          "cannot create the folder"),
    Probe("N13-a-text-above-max-text-bytes", cli("--params", "small.yaml", "--out", "run", "corpora", "--only", "--pairs",
                                                 "big.jsonl", setup=lambda f: (
        (f / "small.yaml").write_text(yaml.safe_dump(params_with(**{"corpora.max_text_bytes": 1000}))),
        (f / "big.jsonl").write_text(json.dumps({"source": "a = 1\n", "target": "b = 2\n" * 500}) + "\n"))),
        "its target holds 3,000 bytes, above corpora.max_text_bytes = 1,000"),
    Probe("N14-a-fifo-named-like-a-bundle", cli("--out", "run", "corpora", "--only", "--repo", "x.bundle",
                                                setup=lambda f: os.mkfifo(f / "x.bundle")),
          "is neither a git repository folder nor a git bundle file"),
    Probe("N17-headline-on-an-empty-root", cli("--out", "run", "headline"), "nothing to report"),
    Probe("N17-reports-on-an-empty-root", cli("--out", "run", "reports"), "nothing to report"),
    Probe("N8-a-latin1-pairs-file-name", cli("--out", "run", "corpora", "--only", "--pairs", os.fsdecode(b"n\xe9.jsonl"),
                                             setup=lambda f: (f / os.fsdecode(b"n\xe9.jsonl")).write_text(
                                                 '{"source": "a\\n", "target": "b\\n"}\n')),
          "the path is not valid UTF-8 (byte 0xe9)"),
    Probe("N8-a-latin1-repo-folder-name", cli("--out", "run", "corpora", "--only", "--repo", os.fsdecode(b"caf\xe9"),
                                              setup=lambda f: (f / os.fsdecode(b"caf\xe9")).mkdir()),
          "the path is not valid UTF-8 (byte 0xe9)"),
    Probe("N15-utf16-pairs", pairs_file('{"source": "a", "target": "b"}\n'.encode("utf-16")), "looks like UTF-16"),
    Probe("N15-open-range-wording", shipped_params_range(), "values must lie in [1, inf), got 0"),
    Probe("N15-name-option-wording", cli("--out", "run", "corpora", "--only", "--pairs", "ok.jsonl", "--name", "../x",
                                         setup=lambda f: (f / "ok.jsonl").write_text('{"source": "a", "target": "b"}\n')),
          "'--name' must be letters"),
    Probe("D13-pairs-json-suffix", pairs_file('{"source": "a", "target": "b"}\n', suffix=".json"),
          "rename it to .jsonl"),
    Probe("D14-a-folder-as-pairs", cli("--out", "run", "corpora", "--only", "--pairs", "d",
                                       setup=lambda f: (f / "d").mkdir()), "a folder, not a pairs file"),
    Probe("D14-unknown-stage-did-you-mean", cli("corpra"), "did you mean 'corpora'?"),
    Probe("D14-unknown-subcommand-did-you-mean", cli("kernels", "prof"), "did you mean 'profile'?"),
    Probe("D14-repo-typo-did-you-mean", cli("--out", "run", "corpora", "--only", "--repo", "mixd",
                                            setup=lambda f: (f / "mixed").mkdir()),
          "mixd does not exist (expected a git repository folder or a bundle file); did you mean '../mixed'?"),
    Probe("D14-pairs-typo-did-you-mean", cli("--out", "run", "corpora", "--only", "--pairs", "mine.jsnl",
                                             setup=lambda f: (f / "mine.jsonl").write_text('{"source": "a", "target": "b"}\n')),
          "mine.jsnl: no such pairs file; did you mean '../mine.jsonl'?"),
    Probe("N15-latency-model-empty-mapping", latency_model("{}"), "p.yaml.json is not a latency model file (latency "
                                                                   "model document: unknown schema None)"),
    Probe("N15-latency-model-a-list", latency_model("[]"), "p.yaml.json is not a latency model file"),
    Probe("N15-empty-repository", cli("--out", "run", "corpora", "--only", "--repo", "mixed", setup=empty_repository),
          "the repository has no commits"),
    # issue 39: settings and names (qa-review round 5)
    Probe("S4-rivals-pld-ngram-bounded", stage_settings("kernels_profile.stages.e2e", **{"e2e.pld.ngram_max": 10**9}),
          "'e2e.pld.ngram_max' is 1000000000, above 64"),
    Probe("S4-rivals-suffix-tree-depth-bounded", stage_settings("kernels_profile.stages.e2e", **{
        "e2e.suffix.options.max_tree_depth": 10**9}), "max_tree_depth must be an integer in [1, 4096]"),
    Probe("S4-rivals-pld-drafter-refuses-a-huge-ngram", lambda f: (__import__("analysis.rivals.families.pld", fromlist=["x"])
                                                                  .PromptLookup([1, 2, 3], max_ngram=10**9), "")[-1],
          "above 64"),
    Probe("S4-serving-requests-bounded", stage_settings("analysis.stages.serving", **{
        "serving.closed_loop.min_requests": 10**9}), "would simulate 1,000,000,000 requests"),
    Probe("S4-serving-open-loop-requests-bounded", stage_settings("analysis.stages.serving", **{
        "serving.open_loop.requests": 10**7}), "above 100,000"),
    # section 4: the grammar export (analysis.grammar.export, `copydecode grammar`), the decoder's mask engine and
    # the forcing stage: named errors at settings time, bounded sizes, an output path that cannot be written named
    Probe("S4-grammar-forced-regex-refused", grammar_limit(3, "regex", True), "the forced-span form has no regex export"),
    Probe("S4-grammar-forced-lark-over-its-limit", grammar_limit(20_001, "lark", True),
          "the forced-span lark form supports sources of at most 20,000 lines"),
    Probe("S4-grammar-forced-ebnf-over-its-limit", grammar_limit(201, "ebnf", True),
          "the forced-span ebnf form supports sources of at most 200 lines"),
    Probe("r6M6-grammar-symbolic-over-its-limit", grammar_limit(20_001, "regex", False),
          "the symbolic regex form supports sources of at most 20,000 lines; this one has 20,001 (its grammar would be"),
    Probe("r6M6-grammar-symbolic-at-its-limit", grammar_limit(20_000, "lark", False), ""),
    Probe("S4-grammar-unknown-format", lambda f: (__import__("analysis.grammar.export", fromlist=["x"]).export(
        "a\n", "json", False), "")[-1], "grammar format must be one of lark, ebnf, regex, got 'json'"),
    Probe("S4-grammar-cli-source-missing", cli("grammar", "--source", "fnone.py"), "--source fnone.py: no such file"),
    Probe("S4-grammar-cli-source-a-folder", cli("grammar", "--source", "d", setup=source_files),
          "--source d: is a folder; give a source file"),
    Probe("r6L11-grammar-cli-source-a-fifo", cli("grammar", "--source", "ff.fifo", setup=lambda f: os.mkfifo(f / "ff.fifo")),
          "--source ff.fifo: not a regular file (a FIFO, a device or a socket)"),
    Probe("r6L11-grammar-cli-source-a-device", cli("grammar", "--source", "/dev/null"), "--source /dev/null: not a regular file"),
    Probe("r6M6-grammar-cli-source-over-8-mb", cli("grammar", "--source", "fhuge.py", setup=lambda f: os.truncate(
        (f / "fhuge.py").open("wb").name, 9 << 20)), "--source fhuge.py: 9,437,184 bytes, above the 8,388,608 a source may"),
    Probe("r6L8-grammar-cli-out-over-a-file-not-a-grammar", cli("grammar", "--source", "f.py", "--out", "fmine.yaml",
                                                               setup=lambda f: (source_files(f), (f / "fmine.yaml").write_text(
                                                                   "precious: 1\n"))),
          "--out fmine.yaml: the file exists and is not a grammar `copydecode grammar` wrote"),
    Probe("r6L8-grammar-cli-out-over-its-own-grammar", cli("grammar", "--source", "f.py", "--out", "f.lark", setup=lambda f: (
        source_files(f), (f / "f.lark").write_text(__import__("analysis.grammar.export", fromlist=["x"]).export(
            "z\n", "lark", False, "file z.py").text()))), ""),
    Probe("S4-grammar-cli-source-not-utf8", cli("grammar", "--source", "fbad.py", setup=source_files),
          "--source fbad.py: not UTF-8"),
    Probe("S4-grammar-cli-forced-source-over-the-limit", cli("grammar", "--source", "fbig.py", "--forced-spans",
                                                             setup=source_files), "at most 20,000 lines; this one has 20,001"),
    Probe("S4-grammar-cli-framing-with-source", cli("grammar", "--source", "f.py", "--framing", "body",
                                                    setup=source_files), "it has no meaning with --source"),
    Probe("S4-grammar-cli-case-id-without-cases", cli("grammar", "--case-id", "x"), "no cases table"),
    Probe("S4-grammar-cli-unknown-format", cli("grammar", "--source", "f.py", "--format", "json", setup=source_files),
          "argument --format: invalid choice: 'json'"),
    Probe("S4-grammar-cli-out-an-existing-folder", cli("grammar", "--source", "f.py", "--out", "d", setup=source_files),
          "--out d: it is a folder"),
    Probe("S4-grammar-cli-out-name-over-255-bytes", cli("grammar", "--source", "f.py", "--out", "f" * 300 + ".lark",
                                                        setup=source_files), "too long for the file system"),
    Probe("S4-grammar-cli-out-under-a-file", cli("grammar", "--source", "f.py", "--out", "f.py/g.lark",
                                                 setup=source_files), "a part of the path is a file, not a folder"),
    Probe("S4-grammar-cli-out-empty", cli("grammar", "--source", "f.py", "--out", "", setup=source_files),
          "--out is empty"),
    Probe("S4-grammar-cli-out-a-file", cli("grammar", "--source", "f.py", "--out", "f.lark", setup=source_files), ""),
    Probe("S4-decode-mask-engine-unknown", stage_settings("kernels_profile.stages.decode", **{
        "decode.mask_engine": "xgrammar"}), "'decode.mask_engine' must be one of suite, llguidance; got 'xgrammar'"),
    Probe("S4-decode-mask-engine-not-a-name", stage_settings("kernels_profile.stages.decode", **{
        "decode.mask_engine": ["suite"]}), "'decode.mask_engine' must be str"),
    Probe("S4-forcing-eos-token-empty", stage_settings("analysis.stages.forcing", **{"forcing.eos_token": ""}),
          "forcing.eos_token is empty"),
    Probe("S4-forcing-eos-token-not-a-string", stage_settings("analysis.stages.forcing", **{"forcing.eos_token": 0}),
          "'forcing.eos_token' must be str"),
    Probe("S4-forcing-eos-token-not-in-the-vocabulary", lambda f: (__import__("analysis.stages.forcing", fromlist=["x"])
                                                                   .eos_id(__import__("analysis.text.tokens", fromlist=[
                                                                       "x"]).load_tokenizer("qwen2.5"), "<|nope|>"),
                                                                   "")[-1], "forcing.eos_token '<|nope|>' is not a token"),
    Probe("S4-forcing-limit-negative", stage_settings("analysis.stages.forcing", **{"forcing.limit": -1}),
          "'forcing.limit' must be >= 0, got -1"),
    Probe("S4-forcing-limit-not-an-integer", stage_settings("analysis.stages.forcing", **{"forcing.limit": "all"}),
          "'forcing.limit' must be int"),
    # section 4: the rivals stage's settings (params rivals, analysis.stages.rivals): named before any case is simulated
    Probe("S4-rivals-stage-k-zero", stage_settings("analysis.stages.rivals", **{"rivals.pld.k": [0]}),
          "'rivals.pld.k' must be a non-empty list of distinct integers in [1, 4096]"),
    Probe("S4-rivals-stage-k-twice", stage_settings("analysis.stages.rivals", **{"rivals.pld.k": [5, 5]}),
          "list of distinct integers in [1, 4096]"),
    Probe("S4-rivals-stage-k-a-bool", stage_settings("analysis.stages.rivals", **{"rivals.pld.k": [True]}),
          "(True is out of range)"),
    Probe("S4-rivals-stage-k-not-a-list", stage_settings("analysis.stages.rivals", **{"rivals.pld.k": 5}),
          "'rivals.pld.k' must be list, got 5"),
    # issue 49 M2 / issue 45 item 1: a draft budget params name is simulated (or refused by name), never dropped
    Probe("M2-rivals-pld-k-outside-the-old-list-is-simulated", rivals_simulated(
        ("pld-earliest-k8", "pld-latest-k8", "pld-earliest-k3"), **{"rivals.pld.k": [8, 3], "rivals.pld.unbounded": False}), ""),
    Probe("M2-rivals-pld-k-above-the-limit-named", stage_settings("analysis.stages.rivals", **{"rivals.pld.k": [5000]}),
          "(5000 is out of range)"),
    Probe("M2-rivals-suffix-option-not-finite-named", stage_settings("analysis.stages.rivals", **{
        "rivals.suffix.options.max_spec_offset": float("inf")}), "'rivals.suffix.options.max_spec_offset' must be a finite number"),
    Probe("S4-rivals-stage-ngram-bounded", stage_settings("analysis.stages.rivals", **{"rivals.pld.ngram_max": 10**9}),
          "'rivals.pld.ngram_max' is 1000000000, above 64"),
    Probe("S4-rivals-stage-judged-source-unknown", stage_settings("analysis.stages.rivals", **{
        "rivals.judged_source": "nowhere"}), "'rivals.judged_source' 'nowhere' is not one of rivals.kernel_sources"),
    Probe("S4-rivals-stage-estimate-missing-keys", stage_settings("analysis.stages.rivals", **{
        "rivals.estimates": [{"name": "x", "decode": "h200/qwen2.5-7b/static_compiled"}]}),
        "'rivals.estimates[0]' must have exactly name, decode and prefill"),
    Probe("S4-rivals-stage-estimate-unknown-source", stage_settings("analysis.stages.rivals", **{
        "rivals.estimates": [{"name": "x", "decode": "nowhere", "prefill": "h200-devtime/qwen2.5-7b"}]}),
        "'rivals.estimates[0].decode': unknown kernel source 'nowhere'"),
    Probe("S4-rivals-stage-estimate-pairs-two-models", stage_settings("analysis.stages.rivals", **{
        "rivals.estimates": [{"name": "x", "decode": "h200/qwen2.5-7b/static_compiled",
                              "prefill": "h200-devtime/qwen2.5-1.5b"}]}), "pairs two models (qwen2.5-7b, qwen2.5-1.5b)"),
    Probe("S4-rivals-stage-estimate-named-like-a-source", stage_settings("analysis.stages.rivals", **{
        "rivals.estimates": [{"name": "paper", "decode": "paper", "prefill": "paper"}]}), "is also a kernel source"),
    Probe("S4-rivals-stage-kernel-source-unknown", stage_settings("analysis.stages.rivals", **{
        "rivals.kernel_sources": ["paper", "../../x"]}), "has unknown kernel sources ['../../x']"),
    Probe("S4-rivals-stage-unknown-key", stage_settings("analysis.stages.rivals", **{"rivals.pld.kk": [5]}),
          "unknown setting 'rivals.pld.kk'"),
    Probe("M5-profile-model-empty", cli("kernels", "profile", "--model", ""), "--model is empty"),
    Probe("M11-set-alias", cli("--set", "spans.seed={a: &a [x], b: *a}", "--out", "run", "spans"),
          "--set spans.seed: YAML anchors (&a) are not allowed"),
    Probe("M11-set-alias-bomb", cli("--set", "spans.seed={" + ", ".join(
        [f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}" if i else "x"] * 10) + "]" for i in range(9)])
        + "}", "--out", "run", "spans"), "YAML anchors (&a) are not allowed"),
    Probe("M11-set-duplicate-key", cli("--set", "spans={seed: 0, seed: 1}", "--out", "run", "spans"),
          "the key 'seed' is given twice"),
    Probe("M11-set-unknown-key-in-a-mapping", cli("--set", "spans={seed: 0, bootstrap_resample: 3}", "--out", "run",
                                                  "spans"), "did you mean 'spans.bootstrap_resamples'?"),
    Probe("M11-set-huge-value-is-cut-in-the-message", stage_settings("analysis.stages.spans", **{
        "spans.seed": list(range(100000))}), "characters)"),
    Probe("M6-n-jobs-10000", stage_settings("analysis.stages.programs", **{"parallel.n_jobs": 10000}),
          "above 4 workers per usable core"),
    Probe("M6-n-jobs-on-a-named-cluster", stage_settings("analysis.stages.programs", **{
        "parallel.n_jobs": 10000, "parallel.backend": "dask", "parallel.address": "tcp://sched:8786"}), ""),
    Probe("L7-set-on-a-maintenance-command", cli("--set", "spans.seed=notanint", "readme", "--check"),
          "`readme` reads no params"),
    Probe("L7-set-on-report-is-applied", cli("--set", "spanz.seed=1", "report", "summary"),
          "--set spanz.seed: no such setting in the params file"),
    Probe("L3-out-not-utf8", cli("--out", os.fsdecode(b"caf\xe9"), "programs"), "the folder name is not valid UTF-8"),
    Probe("L2-pairs-name-over-255-bytes", cli("--out", "run", "corpora", "--only", "--pairs", "p" * 300 + ".jsonl"),
          "too long for the file system"),
    Probe("L2-tokenizer-spec-over-255-bytes", lambda f: (__import__("analysis.text.tokens", fromlist=["x"]).load_tokenizer(
        "t" * 300), "")[-1], "a name over 255 bytes"),
    Probe("L11-a-line-number-of-5000-digits", lambda f: (__import__("analysis.grammar.program", fromlist=["parse"]).parse(
        '<copy lines="1-' + "9" * 5000 + '"/>'), "")[-1], "a line or token number of 5,000 digits"),
    # the engine harness (issue 49, reach): a frozen run folder is data; the driver imports nothing from a run folder
    Probe("engine-frozen-run-bad-record-beside-planted-code", cli("--out", "run", "engine", "summary",
          setup=planted_engine_run('{"run_id": "ar-c1-r0", "ttft_s": -1}')), "requests.jsonl line 1: missing fields"),
    Probe("engine-frozen-run-negative-latency", cli("--out", "run", "engine", "summary", setup=planted_engine_run(
        json.dumps({"run_id": "a", "method": "ar", "concurrency": 1, "repeat": 0, "rid": "r0", "case_id": "c", "corpus": "A",
                    "length": "short", "prompt_tokens": 1, "output_tokens": 1, "gold_tokens": 1, "engine_requests": 1,
                    "prefilled_tokens": 1, "cached_tokens": 0, "arrival_s": 0, "ttft_s": -1, "e2e_s": 1, "tpot_s": None,
                    "itl_s": [], "drafted_tokens": 0, "accepted_tokens": 0, "same_text": True}))),
          "requests.jsonl line 1.ttft_s: expected a finite number >= 0"),
    Probe("engine-driver-ignores-a-planted-vllm-in-its-run-folder", engine_driver_beside_planted_vllm,
          "No module named 'vllm'"),
    Probe("D2-cli-empty-target", cli("--out", "run", "corpora", "--only", "--pairs", "bad.jsonl", setup=lambda f: (
        f / "bad.jsonl").write_text('{"source": "a\\n", "target": ""}\n')), "field 'target' is empty"),
    # the field's edit benchmarks, read in place (issue 49's reach): data only, every record checked, pinned
    Probe("R49-field-benchmarks-are-data-and-every-record-is-read", field_benchmarks(out="runok"), ""),
    Probe("R49-field-benchmark-changed-after-its-pin", field_benchmarks(lambda e: (e / "canitedit_test.jsonl").write_bytes(
        (e / "canitedit_test.jsonl").read_bytes().replace(b"fix total", b"fix totals")), repin=False), "not the pinned"),
    Probe("R49-field-benchmark-a-line-not-an-object", field_benchmarks(_append("edit_eval.jsonl", "[1, 2]")),
          "expected a JSON object, got list"),
    Probe("R49-field-benchmark-an-id-not-a-string", field_benchmarks(_append(
        "canitedit_test.jsonl", '{"id": true, "before": "a\\n", "after": "b\\n"}')),
          "field 'case_id' must be a string, got bool"),
    Probe("R49-field-benchmark-an-id-twice", field_benchmarks(_append(
        "canitedit_test.jsonl", '{"id": 10, "before": "a\\n", "after": "b\\n"}')), "duplicate case_id '10'"),
    Probe("R49-field-benchmark-an-empty-after", field_benchmarks(_append(
        "edit_eval.jsonl", '{"task_id": "EditEval/9", "input": "a\\n", "output": ""}')), "field 'target' is empty"),
    Probe("R49-field-benchmark-not-utf8", field_benchmarks(lambda e: (e / "edit_eval.jsonl").write_bytes(
        (e / "edit_eval.jsonl").read_bytes() + b'{"task_id": "x", "input": "caf\xe9", "output": "b"}\n')),
          "not valid UTF-8"),
    # round 6: low items (L3, L12)
    Probe("r6L3-out-a-component-over-255-bytes", cli("--out", "run/" + "x" * 300, "corpora", "--only", "--pairs", "ok.jsonl"),
          "--out: a folder name over 255 bytes"),
    Probe("r6L12-the-override-echo-is-cut", cli("--set", "spans.seed=[" + "0, " * 13_000 + "0]", "spans"),
          "characters) (not written to"),
    # round 6: rivals' settings (L4: non-finite suffix options; L7: an unknown measured source before any simulation)
    *(Probe(f"r6L4-suffix-{name}-{value}", stage_settings("analysis.stages.rivals", **{
        f"rivals.suffix.options.{name}": value}), f"'rivals.suffix.options.{name}' must be a finite number")
      for name, value in (("max_spec_factor", float("inf")), ("max_spec_factor", float("nan")),
                          ("max_spec_offset", float("inf")), ("min_token_prob", float("nan")))),
    Probe("r6L7-rivals-unknown-measured-source-before-the-simulation", rivals_before_simulation, "h100/llama-70b/eager"),
    Probe("r6L9-serving-2000-load-points-in-one-run", stage_settings("analysis.stages.serving", **{
        "serving.closed_loop.concurrency": list(range(1, 2001))}), "the simulation would serve"),
    # round 6: clearer wording (L11)
    Probe("r6L11-pairs-a-device", cli("--out", "run", "corpora", "--only", "--pairs", "/dev/zero"),
          "/dev/zero: not a regular file (a FIFO, a device or a socket)"),
    Probe("r6L11-batched-with-a-batch-1-option", lambda f: (__import__("kernels_profile.stages.batched", fromlist=["x"]).settings(
        params_with(), model="x"), "")[-1], "--model is an option of the batch-1 profile"),
    Probe("r6L11-batched-memory-refusal-names-the-batched-grid", lambda f: (__import__(
        "kernels_profile.runtime.models", fromlist=["x"]).check_fits("tiny-qwen2", "float32", "cpu", 10**12, 10**9,
                                                                    smaller="a smaller grid (kernels.batched)"), "")[-1],
          "use a smaller model, a smaller grid (kernels.batched), or a larger machine"),
    Probe("r6L11-set-a-setting-a-preset-inherits", lambda f: (__import__("analysis.pipeline.params", fromlist=["x"]).apply_overrides(
        params_with(), ["kernels.batched_presets.batched-tiny.threads=2"]), "")[-1], ""),
    # round 6: bounded bootstraps (M7)
    *(Probe(f"r6M7-{group}-bootstrap-of-10-to-the-8", stage_settings(f"analysis.stages.{group}", **{
        f"{group}.bootstrap_resamples": 10**8}), f"'{group}.bootstrap_resamples' is 100,000,000, above the 100,000")
      for group in ("rivals", "bounds", "spans")),
    # round 6: the grammar export reads the file's bytes (H3) and writes no user string unescaped (M1)
    Probe("r6H3-grammar-of-a-crlf-file-copies-its-bytes", exported_grammar("f_crlf.py", b"a = 1\r\nb = 2\r\nc = 3\r\n",
                                                                          "--forced-spans"), ""),
    Probe("r6H3-grammar-of-a-cr-only-file-is-one-line", exported_grammar("f_cr.py", b"a = 1\rb = 2\rc = 3\r"), ""),
    Probe("r6H3-grammar-of-mixed-line-ends-copies-its-bytes", exported_grammar(
        "f_mixed.py", b"a = 1\r\nb = 2\nc = 3\rd = 4\r\n", "--forced-spans"), ""),
    Probe("r6M1-a-file-name-with-newlines-injects-no-grammar-rule", exported_grammar(
        'f_x.py\nANY: "\\u0001".."\\uffff"\n%ignore ANY\n#', b"a = 1\nb = 2\n", "--forced-spans"), ""),
    Probe("r6M1-a-file-name-with-newlines-symbolic-form", exported_grammar(
        'f_x.py\nANY: "\\u0001".."\\uffff"\n%ignore ANY\n#', b"a = 1\nb = 2\n"), ""),
]


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@pytest.mark.parametrize("probe", PROBES, ids=[p.id for p in PROBES])
def test_probe(probe, tmp_path, monkeypatch):
    folder = tmp_path / "cwd"
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    try:
        error = probe.run(folder)
    except CopyDecodeError as exc:
        error = str(exc)
    if probe.expect:
        assert error and probe.expect in error, error
    else:
        assert error == "", error
    stray = {f for f in _files(tmp_path) if not f.startswith(("cwd/run", "cwd/p.yaml", "cwd/pairs", "cwd/adapter.pt",
                                                              "cwd/f", "cwd/hostile.yaml", "cwd/bad.jsonl",
                                                              "cwd/dvc.yaml", "cwd/small.yaml", "cwd/big.jsonl",
                                                              "cwd/x.bundle", "cwd/n", "cwd/caf", "cwd/ok.jsonl", "cwd/d",
                                                              "cwd/mixed", "cwd/mine.jsonl", "cwd/edits"))} - {"cwd"}
    assert stray == set(), stray  # nothing written beside the inputs and the run folder
    assert not list(tmp_path.rglob(MARKER)) and not (ROOT / MARKER).exists()  # no planted code ran
    if (folder / "run").exists():  # a refused run leaves no outputs in its run folder
        assert not [f for f in _files(folder / "run") if f.startswith(("data/", "reports/html", "reports/notebooks"))
                    and f not in ("data", "data/.lock")]


def test_every_probe_id_is_unique():
    assert len({p.id for p in PROBES}) == len(PROBES)


def test_the_probe_table_names_every_fixed_defect():
    ids = " ".join(p.id for p in PROBES)
    for defect in ("N2", "N4", "N6", "N8", "N9", "N10", "N13", "N14", "N18", "N15", "N17", "D2", "D6", "D10", "D13", "D14",
                   "D17", "M5", "M6", "M11", "L2", "L3", "L7", "L11"):
        assert f"{defect}-" in ids, defect


INTERRUPTED_STAGE = """
import sys, time
import analysis.cli as cli
from analysis.parallel.workers import ParallelSettings, map_cases

def slow(chunk):
    time.sleep(0.2 * len(chunk))
    return list(chunk)

def run_stage(module, args, cfg):  # a parallel stage: 200 cases on 2 loky workers, about 20 s
    print("started", flush=True)
    return map_cases(slow, list(range(200)), ParallelSettings(2, "loky", 4, ""))

cli.run_stage = run_stage
sys.exit(cli.main(["--params", sys.argv[1], "--out", "run", "spans"]))
"""


@pytest.mark.slow
def test_N12_sigint_to_the_main_pid_only_of_a_background_parallel_stage(tmp_path):
    """N12: `copydecode spans ... &` from a script starts with SIGINT ignored (no job control), so
    `kill -INT PID` (the main process only) was lost and the stage ran to the end with rc 0. Now: exit
    130 with the documented message, no traceback, and the previous run's output kept."""
    import subprocess
    import sys
    import time

    old = tmp_path / "run/data/spans/spans.parquet"
    old.parent.mkdir(parents=True)
    old.write_bytes(b"a previous run's output")
    proc = subprocess.Popen([sys.executable, "-c", INTERRUPTED_STAGE, str(ROOT / "params.yaml")], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert proc.stdout.readline().strip() == "started"
        time.sleep(3)  # the workers are running chunks
        proc.send_signal(signal.SIGINT)  # to the main pid only
        out, err = proc.communicate(timeout=15)
    finally:
        proc.kill()
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    assert "copydecode spans: interrupted; finished outputs and checkpoints are kept" in err
    assert "Traceback" not in err
    assert old.read_bytes() == b"a previous run's output"


# ---------------------------------------------------------------- a run folder from someone else (issue 39)
#
# Each row plants an attack in a run folder (`run/`) beside an `outside/` folder of files the run must never
# touch, then runs the suite on it. The test asserts the named error, that every file outside the run folder
# is byte for byte as planted (nothing written, moved, truncated or deleted there) and that no planted code
# ran (no MARKER anywhere). Rows come from qa-review round 5 (H1-H5, M and L ids).


@dataclass(frozen=True)
class Attack:
    id: str
    plant: Callable[[Path, Path], None]  # (run folder, outside folder): lay the trap
    act: Callable[[Path, Path], str]     # run the suite from the run folder's parent; the error text ("" : accepted)
    expect: str                          # a substring of the named error ("" : must be accepted)
    check: Callable[[Path, Path], None] | None = None  # what else must hold afterwards


def copydecode(*argv: str) -> Callable[[Path, Path], str]:
    """`copydecode ARGV` from the folder holding `run/` (the shipped params unless ARGV names others);
    RUN and OUTSIDE in ARGV stand for the two folders' absolute paths."""
    def act(run: Path, outside: Path) -> str:
        args = [a.replace("RUN", str(run)).replace("OUTSIDE", str(outside)) for a in argv]
        return cli(*args)(run.parent)
    return act


def _snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry under `folder`: a file's bytes, a link's target, a folder's mark."""
    out: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        out[key] = (f"link:{os.readlink(path)}" if path.is_symlink() else "dir" if path.is_dir()
                    else path.read_bytes())
    return out


def _victims(outside: Path) -> None:
    (outside / "site-packages").mkdir(parents=True, exist_ok=True)
    (outside / "victim_overwritten").write_text("original")
    (outside / "victim_deleted").write_text("precious")
    (outside / "victimdir").mkdir(exist_ok=True)
    (outside / "victimdir/important.json").write_text("{}")
    (outside / "victimshards").mkdir(exist_ok=True)
    (outside / "victimshards/precious_dataset.parquet").write_bytes(b"PAR1 precious")


def journal(entries: Callable[[Path, Path], list], stage: str = "programs") -> Callable[[Path, Path], None]:
    """data/.pending/<stage>.json holding `entries(run, outside)`, and a payload file for it to move."""
    def plant(run: Path, outside: Path) -> None:
        _victims(outside)
        (run / "data/.pending").mkdir(parents=True)
        (run / "data/payload").write_text(f"import pathlib; pathlib.Path({str(outside / MARKER)!r}).write_text('x')\n")
        (run / "data/.payload.abcd1234").write_text("echo PWNED")
        (run / f"data/.pending/{stage}.json").write_text(json.dumps(entries(run, outside)))
    return plant


def _journal_untouched(run: Path, outside: Path) -> None:
    assert (run / "data/payload").is_file() and list((run / "data/.pending").glob("*.json"))  # left for the user


def link(name: str, target: Callable[[Path, Path], Path], before: Callable[[Path], None] | None = None):
    """`run/<name>` as a symbolic link to `target(run, outside)` (after `before(run)` laid the rest)."""
    def plant(run: Path, outside: Path) -> None:
        _victims(outside)
        if before is not None:
            before(run)
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).symlink_to(target(run, outside))
    return plant


def _express_outputs(run: Path) -> None:
    """Enough of a finished run for headline to have something to write: the committed tables and metrics."""
    import shutil

    for folder in ("reports/tables", "reports/metrics"):
        shutil.copytree(ROOT / folder, run / folder)


def _ok_pairs(run: Path) -> None:
    (run.parent / "ok.jsonl").write_text('{"source": "a = 1\\n", "target": "a = 2\\n"}\n')


def _committed_model(run: Path) -> None:
    """The folder the run starts from holds a latency model, which `--out` copies into the run folder."""
    import shutil

    (run.parent / "reports/kernels").mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "reports/kernels/latency_model.json", run.parent / "reports/kernels/latency_model.json")


def _model_replaces_the_link(run: Path, outside: Path) -> None:
    model = run / "reports/kernels/latency_model.json"
    assert model.is_file() and not model.is_symlink()  # the copy replaced the link, never wrote through it
    assert model.read_bytes() == (ROOT / "reports/kernels/latency_model.json").read_bytes()
    assert not (run / "reports/planted.json").exists()


def profile_settings(**options) -> Callable[[Path, Path], str]:
    """`kernels profile`'s settings with `options` (no model is built): RUN/OUTSIDE as in `copydecode`."""
    def act(run: Path, outside: Path) -> str:
        from kernels_profile.stages.profile import settings

        given = {k: v.replace("RUN", str(run)).replace("OUTSIDE", str(outside)) if isinstance(v, str) else v
                 for k, v in options.items()}
        params = params_with(**{"kernels.presets": {"../../../outside/evilpreset": {}, "mine": {
            "out": str(outside / "evil.parquet")}}})
        os.chdir(run)
        settings(params, **given)
        return ""
    return act


def preset_settings(module: str, table: str, name: str) -> Callable[[Path, Path], str]:
    """A stage's settings with the presets table `table` (dotted) holding `name`, selected (refused before any
    path is made)."""
    def act(run: Path, outside: Path) -> str:
        import importlib

        params = params_with()
        group, _, key = table.partition(".")
        params[group].setdefault(key, {})[name] = {}
        os.chdir(run)
        importlib.import_module(module).settings(params, preset=name)
        return ""
    return act


def _inside(path: Path) -> str:
    from analysis.pipeline.confine import confined

    confined(path, "checkpoint")
    assert path.name.startswith("tiny-"), path
    return ""


def pair_checkpoint(run: Path, outside: Path) -> str:
    """H4: the checkpoint of a pair measured with --model <absolute folder> lies under the root's checkpoints."""
    from analysis.layout import KERNEL_CHECKPOINTS
    from kernels_profile.measure.profiler import Pair

    os.chdir(run)
    path = Pair(str(outside / "models/tiny"), 8, "eager", 0).path(KERNEL_CHECKPOINTS, "k")
    assert path.parent == KERNEL_CHECKPOINTS and path.name == "tiny-c8-eager-r0-k.parquet", path
    from analysis.pipeline.confine import confined

    confined(path, "checkpoint")
    return ""


def own_journal(run: Path, outside: Path) -> None:
    """A journal this suite writes: programs killed between its journal and its renames."""
    _victims(outside)
    (run / "data/programs").mkdir(parents=True)
    (run / "data/programs/.programs.abcd1234.parquet").write_bytes(b"the new set")
    (run / "data/.pending").mkdir()
    (run / "data/.pending/programs.json").write_text(json.dumps([["data/programs/.programs.abcd1234.parquet",
                                                                  "data/programs/programs.parquet"]]))


def own_journal_completed(run: Path, outside: Path) -> None:
    assert (run / "data/programs/programs.parquet").read_bytes() == b"the new set"
    assert not (run / "data/.pending/programs.json").exists()


def step_cost_file(change: Callable[[dict], object] | bytes | None = None, steps: bytes | Callable[[Path], None] | None = None):
    """M4 (round 6): the run folder's reports/kernels/step_cost.json (the committed one, passed through `change`,
    or these bytes) and, for the replay, data/serving/steps.parquet (these bytes, or made by the function)."""
    def plant(run: Path, outside: Path) -> None:
        _victims(outside)
        document = json.loads((ROOT / "reports/kernels/step_cost.json").read_text())
        (run / "reports/kernels").mkdir(parents=True)
        if isinstance(change, bytes):
            text = change
        else:
            changed = change(document) if change is not None else None
            text = json.dumps(document if changed is None else changed).encode()
        (run / "reports/kernels/step_cost.json").write_bytes(text)
        (run / "data/serving").mkdir(parents=True)
        if isinstance(steps, bytes):
            (run / "data/serving/steps.parquet").write_bytes(steps)
        elif steps is not None:
            steps(run / "data/serving/steps.parquet")
    return plant


def _spec(**values) -> Callable[[dict], None]:
    return lambda document: document["environment"]["spec"].update(values)


def _term(term: str, value: float) -> Callable[[dict], None]:
    return lambda document: document["models"][0]["terms"].update({term: value})


def _steps(**columns) -> Callable[[Path], None]:
    """A replay sample of two steps in the right schema, with `columns` replaced."""
    def make(path: Path) -> None:
        import polars as pl

        from analysis.serving.steps import STEP_COLUMNS

        rows = {"step_id": ["a", "b"], "method": ["ar", "ar"], "concurrency": [1, 1], "max_num_batched_tokens": [2048, 2048],
                "stratum": ["decode only", "mixed"], "batch": [1, 2], "qs": [[1], [1, 4]], "contexts": [[10], [10, 20]],
                "kinds": [["decode"], ["decode", "prefill"]], "predicted_s": [0.1, 0.2]}
        rows.update(columns)
        pl.DataFrame(rows, schema={c: STEP_COLUMNS[c] if c not in columns else None for c in rows}).write_parquet(path)
    return make


def compared_run(params: str | None = None, big_table: bool = False) -> Callable[[Path, Path], None]:
    """M5 (round 6): a run folder for `compare` holding the committed coverage table, with this params.yaml, or a
    10 GB (sparse) case_costs table."""
    def plant(run: Path, outside: Path) -> None:
        import shutil

        _victims(outside)
        (run / "reports/percase").mkdir(parents=True)
        shutil.copy2(ROOT / "reports/percase/coverage.parquet", run / "reports/percase/coverage.parquet")
        if params is not None:
            (run / "params.yaml").write_text(params)
        if big_table:
            with (run / "reports/percase/case_costs.parquet").open("wb") as handle:
                handle.truncate(10 << 30)
    return plant


def special_corpus_records(run: Path, outside: Path) -> None:
    """L2 (round 6): a FIFO among the corpus records blocked headline; a 100,000-deep record raised."""
    _victims(outside)
    _express_outputs(run)
    (run / "data/.corpus").mkdir(parents=True)
    os.mkfifo(run / "data/.corpus/rivals.json")
    (run / "data/.corpus/spans.json").write_text("[" * 100_000 + "]" * 100_000)
    (run / "data/.corpus/bounds.json").write_bytes(b'{"stage": "bounds", "cases_sha256": "\xff"}')
    (run / "data/.corpus/perturb.json").symlink_to(run / "data/.corpus/rivals.json")  # a link to the FIFO, inside


ATTACKS = [
    Attack("H1-journal-overwrites-and-deletes-outside", journal(lambda run, out: [
        ["data/payload", str(out / "victim_overwritten")], [None, str(out / "victim_deleted")]]),
        copydecode("--out", "run", "headline"), "is not one of the stage's outputs", _journal_untouched),
    Attack("H1-journal-plants-a-pth-file", journal(lambda run, out: [
        ["data/payload", str(out / "site-packages/zz_evil.pth")]]),
        copydecode("--out", "run", "programs"), "is not one of the stage's outputs", _journal_untouched),
    Attack("H1-journal-climbs-out-with-dotdot", journal(lambda run, out: [
        ["data/programs/.programs.abcd1234.parquet", "data/programs/../../../outside/victim_overwritten"]]),
        copydecode("--out", "run", "headline"), "is not one of the stage's outputs", _journal_untouched),
    Attack("H1-journal-moves-a-foreign-file-onto-an-output", journal(lambda run, out: [
        ["data/payload", "data/programs/programs.parquet"]]),
        copydecode("--out", "run", "headline"), "is not the temporary file of", _journal_untouched),
    Attack("H1-journal-of-another-stages-output", journal(lambda run, out: [
        [None, "reports/metrics/corpora.json"]], stage="spans"),
        copydecode("--out", "run", "headline"), "is not one of the stage's outputs", _journal_untouched),
    Attack("H1-journal-not-a-list", journal(lambda run, out: {"a": 1}),
           copydecode("--out", "run", "headline"), "not a list of renames", _journal_untouched),
    Attack("H1-journal-of-the-stages-own-output-is-completed", own_journal,
           copydecode("--out", "run", "headline"), "nothing to report", own_journal_completed),
    Attack("H3-lock-a-symlink-to-a-file-outside", link("data/.lock", lambda run, out: out / "victim_overwritten"),
           copydecode("--out", "run", "headline"), "data/.lock is a symbolic link"),
    Attack("H3-metrics-a-symlink-to-a-folder-outside", link("metrics", lambda run, out: out / "victimdir",
                                                            before=_express_outputs),
           copydecode("--out", "run", "headline"), "metrics is a symbolic link"),
    Attack("H3-commit-shards-a-symlink-outside", link("data/corpora/commits", lambda run, out: out / "victimshards",
                                                      before=_ok_pairs),
           copydecode("--out", "run", "corpora", "--only", "--pairs", "ok.jsonl"),
           "data/corpora/commits is a symbolic link to a folder"),
    Attack("H3-data-a-symlink-outside", link("data", lambda run, out: out / "victimdir"),
           copydecode("--out", "run", "programs"), "data is a symbolic link"),
    Attack("H3-an-output-file-linked-outside", link("reports/metrics/corpora.json",
                                                    lambda run, out: out / "victim_overwritten", before=_ok_pairs),
           copydecode("--out", "run", "corpora", "--only", "--pairs", "ok.jsonl"),
           "corpora.json is a symbolic link out of the output root"),
    Attack("H3-reports-a-symlink-outside-before-the-model-copy", link(
        "reports", lambda run, out: out / "victimdir", before=_committed_model),
        copydecode("--out", "run", "headline"), "reports is a symbolic link"),
    Attack("H3-reports-kernels-a-symlink-outside-before-the-model-copy", link(
        "reports/kernels", lambda run, out: out / "victimdir", before=_committed_model),
        copydecode("--out", "run", "headline"), "reports/kernels is a symbolic link to a folder"),
    Attack("H3-model-copy-onto-a-dangling-link-outside", link(
        "reports/kernels/latency_model.json", lambda run, out: out / "planted.pth", before=_committed_model),
        copydecode("--out", "run", "headline"), "latency_model.json is a symbolic link out of the output root"),
    Attack("H3-model-copy-onto-a-dangling-link-inside-replaces-the-link", link(
        "reports/kernels/latency_model.json", lambda run, out: run / "reports/planted.json", before=_committed_model),
        copydecode("--out", "run", "headline"), "nothing to report", _model_replaces_the_link),
    Attack("H4-profile-model-folder-checkpoints-stay-inside", lambda run, out: (run.mkdir(), _victims(out)),
           pair_checkpoint, ""),
    Attack("H4-profile-preset-name-climbs-out", lambda run, out: (run.mkdir(), _victims(out)),
           profile_settings(preset="../../../outside/evilpreset"), "cannot name a file"),
    Attack("H4-profile-preset-out-outside", lambda run, out: (run.mkdir(), _victims(out)),
           profile_settings(preset="mine"), "lies outside the output root"),
    Attack("H4-profile-out-outside", lambda run, out: (run.mkdir(), _victims(out)),
           profile_settings(out="OUTSIDE/raw.parquet"), "lies outside the output root"),
    Attack("H4-e2e-preset-name-climbs-out", lambda run, out: (run.mkdir(), _victims(out)),
           preset_settings("kernels_profile.stages.e2e", "e2e.presets", "../../outside/x"), "cannot name a file"),
    Attack("H4-e2e-out-outside", lambda run, out: (run.mkdir(), _victims(out)),
           lambda run, out: (os.chdir(run), __import__("kernels_profile.stages.e2e", fromlist=["settings"]).settings(
               params_with(**{"e2e.presets": {"wide": {}}}), preset="wide", out=str(out / "e2e")), "")[-1],
           "lies outside the output root"),
    Attack("H4-pilot-preset-name-climbs-out", lambda run, out: (run.mkdir(), _victims(out)),
           preset_settings("kernels_profile.pilot.settings", "pilot.presets", "../../outside/x"), "cannot name a file"),
    Attack("H4-pilot-freeze-name-climbs-out", lambda run, out: (run.mkdir(), _victims(out)),
           lambda run, out: (os.chdir(run), __import__("kernels_profile.tools.pilot_sweep", fromlist=["freeze"]).freeze(
               "../../outside/x", {}, run / "data/pilot/x", run / "reports/pilot/frozen"), "")[-1],
           "cannot name a file"),
    # section 4: the serving work's settings and files (merged on main this round)
    Attack("S4-batched-preset-name-climbs-out", lambda run, out: (run.mkdir(), _victims(out)),
           preset_settings("kernels_profile.stages.batched", "kernels.batched_presets", "../../outside/x"), "cannot name a file"),
    Attack("S4-batched-preset-out-outside", lambda run, out: (run.mkdir(), _victims(out)),
           lambda run, out: (os.chdir(run), __import__("kernels_profile.stages.batched", fromlist=["x"]).settings(
               params_with(**{"kernels.batched_presets": {"mine": {"out": str(out / "evil.parquet")}}}),
               preset="mine"), "")[-1], "lies outside the output root"),
    Attack("S4-batched-model-folder-checkpoints-stay-inside", lambda run, out: (run.mkdir(), _victims(out)),
           lambda run, out: (os.chdir(run), _inside(__import__("kernels_profile.measure.batched_session",
                                                                fromlist=["x"]).unit_path(
               Path("data/kernels/batched_checkpoints"), str(out / "models/tiny"), "c8", 0, "k")))[-1], ""),
    # round 6, M4: the serving stages read the run folder's step-cost document and replay sample as data
    Attack("r6M4-replay-spec-threads-100000", step_cost_file(_spec(threads=100000)), copydecode("--out", "run", "serving", "replay"),
           "environment.spec.threads is 100000, above 8 threads per usable core"),
    Attack("r6M4-replay-spec-threads-negative", step_cost_file(_spec(threads=-1)), copydecode("--out", "run", "serving", "replay"),
           "environment.spec.threads must be a positive integer"),
    Attack("r6M4-replay-spec-threads-a-word", step_cost_file(_spec(threads="many")), copydecode("--out", "run", "serving", "replay"),
           "environment.spec.threads must be a positive integer"),
    Attack("r6M4-replay-spec-device", step_cost_file(_spec(device="tpu")), copydecode("--out", "run", "serving", "replay"),
           "environment.spec.device must be one of cpu, cuda"),
    Attack("r6M4-replay-deep-document", step_cost_file(b"[" * 100_000 + b"]" * 100_000),
           copydecode("--out", "run", "serving", "replay"), "step_cost.json is nested too deeply"),
    Attack("r6M4-replay-not-utf8", step_cost_file(b'{"schema": "\xff"}'), copydecode("--out", "run", "serving", "replay"),
           "step_cost.json is not UTF-8 text"),
    Attack("r6M4-replay-garbage-steps", step_cost_file(steps=b"PAR1 not a table"), copydecode("--out", "run", "serving", "replay"),
           "steps.parquet is not a readable parquet file"),
    Attack("r6M4-replay-steps-of-another-schema", step_cost_file(steps=_steps(qs=["1", "2"])),
           copydecode("--out", "run", "serving", "replay"), "not the replay sample's schema"),
    Attack("r6M4-replay-steps-negative-context", step_cost_file(steps=_steps(contexts=[[10], [-5, 20]])),
           copydecode("--out", "run", "serving", "replay"), "step 'b' needs one q >= 1 and one context >= 0 per sequence"),
    Attack("r6M4-simulate-negative-term", step_cost_file(_term("c0", -2100226.0)),
           lambda run, out: (os.chdir(run), __import__("analysis.stages.serving", fromlist=["x"]).load_sources(
               Path("reports/kernels/step_cost.json"), ("batched",)), "")[-1], "term c0 is -2100226.0"),
    Attack("r6M4-simulate-nan-term", step_cost_file(_term("c_w", float("nan"))),
           lambda run, out: (os.chdir(run), __import__("analysis.stages.serving", fromlist=["x"]).load_sources(
               Path("reports/kernels/step_cost.json"), ("batched",)), "")[-1], "term c_w is nan"),
    Attack("r6M4-simulate-huge-term", step_cost_file(_term("c_kv", 1e300)),
           lambda run, out: (os.chdir(run), __import__("analysis.stages.serving", fromlist=["x"]).load_sources(
               Path("reports/kernels/step_cost.json"), ("batched",)), "")[-1], "term c_kv is 1e+300"),
    Attack("r6M4-simulate-a-fifo-document", lambda run, out: (_victims(out), (run / "reports/kernels").mkdir(parents=True),
                                                             os.mkfifo(run / "reports/kernels/step_cost.json")),
           lambda run, out: (os.chdir(run), __import__("analysis.stages.serving", fromlist=["x"]).load_sources(
               Path("reports/kernels/step_cost.json"), ("batched",)), "")[-1], "not found (or not a plain file)"),
    Attack("r6M5-compare-a-run-whose-params-expand-a-billion-times", compared_run(LAUGHS),
           copydecode("compare", "RUN", "RUN"), "params.yaml: line 1: YAML anchors (&a) are not allowed"),
    Attack("r6M5-compare-a-run-whose-params-nest-50000-deep", compared_run("x: " + "[" * 50_000 + "]" * 50_000 + "\n"),
           copydecode("compare", "RUN", "RUN"), "params.yaml: not valid YAML (nested too deeply"),
    Attack("r6M5-compare-a-10-gb-table", compared_run(big_table=True), copydecode("compare", "RUN", "RUN"),
           "case_costs.parquet: 10,737,418,240 bytes, above the 1,073,741,824 such a file may hold; not read"),
    Attack("r6L1-a-hard-linked-lock-is-refused", lambda run, out: (_victims(out), _express_outputs(run), (run / "data").mkdir(),
                                                                   os.link(out / "victim_overwritten", run / "data/.lock")),
           copydecode("--out", "run", "headline"), "data/.lock has 1 other hard link(s)"),
    Attack("r6L2-special-corpus-records-judge-nothing", special_corpus_records, copydecode("--out", "run", "headline"),
           ""),
    Attack("L9-out-into-another-checkout", lambda run, out: (run.mkdir(), _victims(out),
                                                           (out / "clone").mkdir(), (out / "clone/dvc.yaml").write_text(
                                                               "stages: {}\n"), _ok_pairs(run)),
           copydecode("--out", "OUTSIDE/clone", "corpora", "--only", "--pairs", "ok.jsonl"),
           "holds dvc.yaml, so it is a project checkout"),
]


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.id for a in ATTACKS])
def test_attack(attack, tmp_path, monkeypatch):
    run, outside = tmp_path / "cwd/run", tmp_path / "outside"
    run.parent.mkdir()
    outside.mkdir()
    monkeypatch.chdir(run.parent)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    attack.plant(run, outside)
    before = _snapshot(outside)
    try:
        error = attack.act(run, outside)
    except CopyDecodeError as exc:
        error = str(exc)
    os.chdir(tmp_path)
    if attack.expect:
        assert error and attack.expect in error, error
    else:
        assert error == "", error
    assert _snapshot(outside) == before  # nothing outside the run folder written, moved or deleted
    assert not list(tmp_path.rglob(MARKER)) and not (ROOT / MARKER).exists()  # no planted code ran
    if attack.check is not None:
        attack.check(run, outside)


def test_every_high_has_an_attack_row():
    ids = " ".join(a.id for a in [*ATTACKS, *SLOW_ATTACKS, *ROUND6_SLOW_ATTACKS])
    for defect in ("H1", "H2", "H3", "H4", "H5"):
        assert f"{defect}-" in ids, defect


def test_every_round6_item_has_a_probe_row():
    """qa-review round 6: each high and each item fixed here has a row (M2, a method registry's, is not here)."""
    ids = " ".join(x.id for x in [*PROBES, *ATTACKS, *ROUND6_SLOW_ATTACKS])
    for item in ("H1", "H2", "H3", "M1", "M4", "M5", "M6", "M7", "L1", "L2", "L3", "L4", "L7", "L8", "L9", "L11", "L12"):
        assert f"r6{item}-" in ids, item


PLANTED_MODULE = "import pathlib\npathlib.Path({marker!r}).write_text('owned from ' + __file__)\n"


def planted_modules(run: Path, outside: Path) -> None:
    """H2: a run folder (a finished run's tables and metrics) carrying modules every template imports."""
    _victims(outside)
    _express_outputs(run)
    code = PLANTED_MODULE.format(marker=str(outside.parent / MARKER))
    for name in ("altair.py", "polars.py", "nbformat.py", "sitecustomize.py", "usercustomize.py"):
        (run / name).write_text(code)
    (run / "analysis").mkdir()
    (run / "analysis/__init__.py").write_text(code)
    (run / "analysis/present").mkdir()
    (run / "analysis/present/__init__.py").write_text(code)


def render_one_page(run: Path, outside: Path) -> str:
    from analysis.present.reports import render_notebook

    page = render_notebook("losslessness", {}, run)
    assert "round-trip" in page.path.read_text()
    return ""


def stale_round_trip(run: Path, outside: Path) -> None:
    """H5: a run folder whose round trip checked corpus Mine; then corpora rebuilt it from Other and
    programs ran again, but not the round trip."""
    _victims(outside)
    (run.parent / "mine.jsonl").write_text("".join(json.dumps({"case_id": f"m{i}", "source": f"a = {i}\n",
                                                               "target": f"a = {i + 1}\n"}) + "\n" for i in range(3)))
    (run.parent / "other.jsonl").write_text("".join(json.dumps({"case_id": f"o{i}", "source": f"b = {i}\n",
                                                                "target": f"b = {i + 2}\n"}) + "\n" for i in range(2)))
    for argv in (("corpora", "--only", "--pairs", "mine.jsonl", "--name", "Mine"), ("programs",), ("roundtrip",),
                 ("corpora", "--only", "--pairs", "other.jsonl", "--name", "Other"), ("programs",)):
        assert cli("--out", "run", *argv)(run.parent) == "", argv


def stale_round_trip_copied(run: Path, outside: Path) -> None:
    """M1: the same run folder copied without its mtimes (cp -r) keeps the verdict."""
    import shutil

    stale_round_trip(run, outside)
    shutil.copytree(run, run.parent / "copy")  # copies contents, new mtimes
    shutil.rmtree(run)
    (run.parent / "copy").rename(run)


SLOW_ATTACKS = [
    Attack("H2-reports-kernel-never-imports-from-the-run-folder", planted_modules, render_one_page, ""),
    Attack("H5-headline-refuses-a-round-trip-of-another-corpus", stale_round_trip,
           copydecode("--out", "run", "headline"), "stale: built from another corpus (`roundtrip` ran on a different"),
    Attack("M1-a-copied-run-folder-keeps-its-stale-verdict", stale_round_trip_copied,
           copydecode("--out", "run", "headline"), "`roundtrip` ran on a different"),
]


@pytest.mark.slow
@pytest.mark.parametrize("attack", SLOW_ATTACKS, ids=[a.id for a in SLOW_ATTACKS])
def test_slow_attack(attack, tmp_path, monkeypatch):
    test_attack(attack, tmp_path, monkeypatch)


@pytest.mark.slow
def test_R49_a_killed_field_benchmark_build_leaves_nothing_half_written(tmp_path):
    """SIGKILL while the corpora stage reads an edit benchmark (its temporary `datasets` cache open): the run
    folder holds no half-written output (no cases table, or a whole one), and the next run sweeps the killed
    run's cache and temporaries and writes every case."""
    import hashlib
    import subprocess
    import sys
    import time

    import polars as pl

    records = [{"task_id": f"EditEval/{i}", "instruction": "edit", "input": f"x = {i}\n" * 20,
                "output": f"x = {i}\n" * 19 + "y = 0\n"} for i in range(40_000)]
    (tmp_path / "big.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    entry = {"dataset": "big.jsonl", "name": "EditEval", "language": "python",
             "sha256": hashlib.sha256((tmp_path / "big.jsonl").read_bytes()).hexdigest(),
             "fields": {"source": "input", "target": "output", "instruction": "instruction", "case_id": "task_id"}}
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(params_with(**{"corpora.datasets": [entry]})))
    temp = tmp_path / "tmp"
    temp.mkdir()
    argv = [sys.executable, "-c", "import sys\nfrom analysis.cli import main\nsys.exit(main(sys.argv[1:]))",
            "--params", "small.yaml", "--out", "run", "corpora", "--only", "datasets"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(temp)}
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not list(temp.glob(f"copydecode-datasets-{proc.pid}-*")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)  # checked once by hand: it lands while the cache is open
    proc.wait()
    cases = tmp_path / "run/data/corpora/cases.parquet"
    written = [p for p in (tmp_path / "run").rglob("*") if p.is_file() and not p.name.startswith(".")
               and p.parts[-2:] != ("data", ".lock")] if (tmp_path / "run").exists() else []
    if cases.exists():  # the kill came after the set was written: then it is whole
        assert pl.read_parquet(cases).height == len(records)
    else:
        assert not [p for p in written if "data" in p.relative_to(tmp_path / "run").parts[:1]], written
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert pl.read_parquet(cases).height == len(records)
    assert not list(temp.glob(f"copydecode-datasets-{proc.pid}-*"))  # the killed run's cache is swept
    assert not [p for p in (tmp_path / "run/data").rglob(".*") if p.name != ".lock" and p.is_file()
                and p.parent.name not in (".corpus",)]
# ---------------------------------------------------------------- round 6 (qa-review round 6: ids `r6H1-`, ...)
#
# H1: a package planted in a run folder, or in the folder the command starts in, must not run in any process
# the suite starts. The CLI runs as a user runs it (the console script, its own process), so every worker is
# a fresh process of that run; the payload writes the marker and then hands over to the real package (the
# stage must still succeed: a crash would hide whether the planted code ran).

PLANTED_PACKAGE = """import importlib, os, sys
open({marker!r}, "a").write(__name__ + " in pid " + str(os.getpid()) + "\\n")
_here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
del sys.modules[__name__]
sys.modules[__name__] = importlib.import_module(__name__)
"""
# what a worker's bootstrap imports (loky, multiprocessing's spawn, dask's nanny) and what a chunk unpickles
PLANTED_PACKAGES = ("joblib", "multiprocessing", "distributed", "dask", "tornado", "cloudpickle", "psutil", "polars",
                    "numpy", "yaml", "tqdm", "analysis")
SMALL_PAIRS = "".join(json.dumps({"case_id": f"c{i}", "source": "".join(f"x{k} = {k}\n" for k in range(8)),
                                  "target": "".join(f"x{k} = {k + (k == i)}\n" for k in range(8))}) + "\n"
                      for i in range(6))


def _plant_packages(folder: Path, marker: Path) -> None:
    for name in PLANTED_PACKAGES:
        (folder / name).mkdir(exist_ok=True)
        (folder / name / "__init__.py").write_text(PLANTED_PACKAGE.format(marker=str(marker)))


def small_run_with_planted_packages(run: Path, outside: Path) -> None:
    """A run folder of six pairs (corpora and programs run serially here), then packages planted in it and in
    the folder the command starts in."""
    _victims(outside)
    _committed_model(run)
    (run.parent / "mine.jsonl").write_text(SMALL_PAIRS)
    for argv in (("corpora", "--only", "--pairs", "mine.jsonl", "--name", "Mine"), ("programs",)):
        assert cli("--out", "run", "--set", "parallel.n_jobs=1", *argv)(run.parent) == "", argv
    for folder in (run, run.parent):
        _plant_packages(folder, outside.parent / MARKER)


def console(*argv: str, where: str = "parent") -> Callable[[Path, Path], str]:
    """The console script `copydecode ARGV` in a process of its own, started in the run folder's parent (or
    in the run folder itself: where="run"); the error text is stderr."""
    def act(run: Path, outside: Path) -> str:
        import subprocess
        import sys

        script = Path(sys.executable).parent / "copydecode"
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
        done = subprocess.run([sys.executable, str(script), "--params", str(ROOT / "params.yaml"), *argv],
                              cwd=run if where == "run" else run.parent, env=env, capture_output=True, text=True,
                              timeout=600)
        assert "Traceback" not in done.stderr, done.stderr[-3000:]
        return "" if done.returncode == 0 else done.stderr or f"exit {done.returncode}"
    return act


def each(*acts: Callable[[Path, Path], str]) -> Callable[[Path, Path], str]:
    """Every act in turn; the first error text (or "")."""
    def act(run: Path, outside: Path) -> str:
        for one in acts:
            error = one(run, outside)
            if error:
                return error
        return ""
    return act





SMALL_SERVING = ("--set", "serving.sources=[batched]", "--set", "serving.engine.max_num_batched_tokens=[2048]",
                 "--set", "serving.closed_loop.concurrency=[1, 4]", "--set", "serving.closed_loop.min_requests=20",
                 "--set", "serving.open_loop.qps_fractions=[0.5]", "--set", "serving.open_loop.requests=20",
                 "--set", "serving.headline_concurrency=[1, 4]", "--set", "serving.replay.concurrency=[1, 4]")


def stale_serving(run: Path, outside: Path) -> None:
    """H2 (round 6): `serving simulate` ran on corpus Mine's forwards; then corpora rebuilt the cases from Other
    and programs and rivals ran again, but not the simulation. The run starts beside the committed latency
    model (which `--out` copies in) and the committed step-cost model."""
    import shutil

    _victims(outside)
    _committed_model(run)
    (run / "reports/kernels").mkdir(parents=True)
    shutil.copy2(ROOT / "reports/kernels/step_cost.json", run / "reports/kernels/step_cost.json")
    (run.parent / "reports/tables").mkdir(parents=True)
    for table in ("step_cost_terms.csv", "step_cost_residuals.csv"):  # the serving page's, copied in by --out
        shutil.copy2(ROOT / "reports/tables" / table, run.parent / "reports/tables" / table)
    (run.parent / "mine.jsonl").write_text(SMALL_PAIRS)
    (run.parent / "other.jsonl").write_text(SMALL_PAIRS.replace('"c', '"o').replace("x", "y"))
    for argv in (("corpora", "--only", "--pairs", "mine.jsonl", "--name", "Mine"), ("programs",), ("rivals",),
                 ("serving", "simulate", *SMALL_SERVING),
                 ("corpora", "--only", "--pairs", "other.jsonl", "--name", "Other"), ("programs",), ("rivals",)):
        assert cli("--out", "run", "--set", "parallel.n_jobs=1", *argv)(run.parent) == "", argv


def serving_page_and_readme_say_stale(run: Path, outside: Path) -> None:
    from analysis.errors import StaleInputError
    from analysis.tools.readme import write_readme_results
    from analysis.present.reports import page_stale_reasons
    from analysis.present.index import stale_pages_reasons

    stale = stale_pages_reasons(run)
    assert [r for r in page_stale_reasons("serving", stale) if "`serving simulate`" in r], stale
    assert [r for r in page_stale_reasons("summary", stale) if "`serving simulate`" in r], stale
    with pytest.raises(StaleInputError, match="`serving simulate` ran on a different"):
        write_readme_results(run)
    # the page renders with the run's own headline concurrencies (L5: it read vs_ar_c16 and failed) and says stale
    from analysis.present.reports import render_notebook

    page = render_notebook("serving", {}, run, stale=page_stale_reasons("serving", stale)).path.read_text()
    assert "stale: built from another corpus" in page and "Gains at concurrency 1 and 4" in page


ROUND6_SLOW_ATTACKS = [
    Attack("r6H1-loky-workers-of-programs-spans-rivals-import-nothing-from-the-run-folder",
           small_run_with_planted_packages,
           each(*(console("--out", "run", stage) for stage in ("programs", "spans", "rivals"))), ""),
    Attack("r6H1-loky-workers-import-nothing-from-the-working-folder", small_run_with_planted_packages,
           console("spans", where="run"), ""),
    Attack("r6H1-dask-local-cluster-workers-import-nothing-from-the-run-folder", small_run_with_planted_packages,
           console("--out", "run", "--set", "parallel.backend=dask", "spans"), ""),
    Attack("r6H2-headline-page-and-readme-refuse-a-serving-simulation-of-another-corpus", stale_serving,
           copydecode("--out", "run", "headline"), "`serving simulate` ran on a different",
           serving_page_and_readme_say_stale),
]


@pytest.mark.slow
@pytest.mark.parametrize("attack", ROUND6_SLOW_ATTACKS, ids=[a.id for a in ROUND6_SLOW_ATTACKS])
def test_round6_slow_attack(attack, tmp_path, monkeypatch):
    test_attack(attack, tmp_path, monkeypatch)
