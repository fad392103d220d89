"""Every command and params key the documentation shows works as written (issue 41, B2-B4).

The commands and keys are extracted from README.md, docs/*.md and every `copydecode ... --help` text:
code blocks and inline code in the markdown, `--set` examples and `params X.Y` mentions in the help. Each
params key must exist in the shipped params.yaml (YAML snippets are merged into it and checked as a
params file is); each `copydecode` command must parse, with every `--set` applied; each `dvc` command must
parse with DVC's own parser and its `-S` keys exist; `python -m M` must name a module that runs; papermill
parameters must be the template's own. The cheap commands (`--help`, `--version`) are run.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from fixtures import ROOT

DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
COMMAND_WORDS = ("copydecode", "dvc", "python", "python3", "papermill", "jupyter", "pip")
FILE_SUFFIXES = {"html", "md", "csv", "json", "jsonl", "py", "parquet", "svg", "png", "ipynb", "yaml", "yml", "txt",
                 "lock", "toml", "bundle", "gguf", "patch", "sh", "tar", "gz"}
# placeholders the docs write in capitals, and the example value a command is parsed with
PLACEHOLDERS = {"STAGE": "corpora", "NAME": "coverage", "DIR": "runs/x", "FILE": "edits.jsonl", "A": "runs/a",
                "B": "runs/b", "HF_ID_OR_DIR": "runs/model", "PRESET": "pilot-long", "JSON": "{}", "STEM": "runs/c",
                "KEY": "kernel.latency_form", "VALUE": "interp", "QUIET_DIR": "runs/q", "BUSY_DIR": "runs/b",
                "RECORDS": "records.parquet", "ROOT": ".", "OUT": "runs/o", "C": "HEvalFix-Py", "PATH": "repo",
                "REV": "HEAD", "N": "8"}


@dataclass(frozen=True)
class Found:
    """One command or key as the documentation writes it, and where."""

    text: str
    where: str


# ---------------------------------------------------------------- extraction

def _fences(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced code block."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M)


def _prose(text: str) -> str:
    return re.sub(r"^```\w*\n.*?^```", "", text, flags=re.S | re.M)


def _inline_code(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", _prose(text))


def _expand_loops(line: str) -> list[str]:
    """`for x in a b; do CMD $x ...; done` as one command per value; other lines as they are."""
    loop = re.fullmatch(r"\s*for (\w+) in ([^;]+); do (.*?); done\s*", line)
    if not loop:
        return [line]
    var, values, body = loop.groups()
    return [body.replace(f"${var}", value) for value in values.split()]


def _split_commands(block: str) -> list[str]:
    """Shell lines of a code block: continuations joined, comments dropped, `&&`, `||` and `;` split
    (`|| break` dropped), loops expanded."""
    joined = re.sub(r"\\\n\s*", " ", block)
    out = []
    for line in joined.splitlines():
        line = re.sub(r"\s+#\s.*$", "", line).strip()
        if not line or line.startswith("#"):
            continue
        for expanded in _expand_loops(line):
            # split on the operators outside quotes only (`python -c "import x; print(x)"` is one command)
            for part in re.split(r"\s*(?:&&|\|\||;)\s*(?=(?:[^\"]*\"[^\"]*\")*[^\"]*$)", expanded):
                if part and part not in ("break", "done") and part.split()[0] in COMMAND_WORDS:
                    out.append(part)
    return out


def markdown_commands() -> list[Found]:
    found = []
    for path in DOCS:
        text = path.read_text()
        where = str(path.relative_to(ROOT))
        for lang, body in _fences(text):
            if lang in ("", "bash", "sh", "shell", "console"):
                found += [Found(c, where) for c in _split_commands(body)]
        found += [Found(c, where) for code in _inline_code(text) if not _fragment(code) for c in _split_commands(code)]
    return found


def _fragment(code: str) -> bool:
    """Inline code naming an option of a command in prose (`dvc exp run -S` rewrites ...), not a command."""
    return code.split()[-1].startswith("-") and "=" not in code.split()[-1] and code.split()[-1] not in (
        "--help", "--version", "--check", "--only")


def _params_groups() -> set[str]:
    return set(yaml.safe_load((ROOT / "params.yaml").read_text()))


def _dotted_keys(text: str, groups: set[str]) -> list[str]:
    """Dotted names whose first part is a params group (`kernel.latency_form`), not files or modules."""
    keys = []
    for match in re.finditer(r"(?<![\w./-])([a-z_][\w-]*(?:\.[\w-]+)+)(?![\w/(])", text):
        key = match.group(1).rstrip(".")
        parts = key.split(".")
        if parts[0] in groups and parts[-1] not in FILE_SUFFIXES and len(parts) > 1:
            keys.append(key)
    return keys


def markdown_keys() -> list[Found]:
    groups = _params_groups()
    found = []
    for path in DOCS:
        text = path.read_text()
        where = str(path.relative_to(ROOT))
        for code in _inline_code(text):
            if code.split()[0] not in COMMAND_WORDS and not code.startswith("-"):
                found += [Found(k, where) for k in _dotted_keys(code.partition("=")[0], groups)]
    return found


def markdown_yaml() -> list[Found]:
    return [Found(body, str(path.relative_to(ROOT))) for path in DOCS
            for lang, body in _fences(path.read_text()) if lang in ("yaml", "yml")]


def _parsers():
    """(command words, parser) of the console script and every subcommand, depth first."""
    import argparse

    from analysis.cli import build_parser

    out = []

    def walk(words, parser):
        out.append((words, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk([*words, name], sub)

    walk([], build_parser())
    return out


def help_texts() -> list[Found]:
    return [Found(parser.format_help(), "copydecode " + " ".join(words) + " --help") for words, parser in _parsers()]


def help_commands() -> list[Found]:
    found = []
    for h in help_texts():
        flat = re.sub(r"\s+", " ", h.text)
        found += [Found(c, h.where) for code in re.findall(r"`([^`]+)`", flat) for c in _split_commands(code)]
    return found


def help_keys() -> list[Found]:
    groups = _params_groups()
    found = []
    for h in help_texts():
        flat = re.sub(r"\s+", " ", h.text)
        sets = [k for k in re.findall(r"--set '?([\w.-]+)=", flat) if k not in PLACEHOLDERS]
        mentions = re.findall(r"\bparams `?([\w.-]+)", flat)
        found += [Found(k, h.where) for k in sets]
        found += [Found(k, h.where) for m in mentions for k in _dotted_keys(m, groups)]
    return found


# ---------------------------------------------------------------- checks

def _params() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def key_problem(key: str, params: dict) -> str | None:
    """None when `key` names a setting of params.yaml (a free subtree such as presets takes any key below
    it; a list is entered through its entries); else what is wrong, with the closest key."""
    from analysis.pipeline.params import FREE_KEYS, did_you_mean

    node, walked = params, []
    for part in key.split("."):
        if ".".join(walked) in FREE_KEYS:
            return None
        if isinstance(node, list):
            node = next((e for e in node if isinstance(e, dict) and part in e), None)
            if node is None:
                break
        if not isinstance(node, dict) or part not in node:
            from analysis.pipeline.params import _dotted_keys as known

            return f"no such setting {key!r} in params.yaml" + did_you_mean(key, sorted(known(params)))
        node = node[part]
        walked.append(part)
    return None


def _substituted(command: str) -> list[str]:
    words = shlex.split(command)
    return [PLACEHOLDERS.get(w, w) for w in words]


def _placeholder_free(words: list[str]) -> bool:
    return not any(re.search(r"<[^>]+>|\.\.\.|\{[^}]*\.\.\.", w) for w in words)


def copydecode_problem(words: list[str], params: dict) -> str | None:
    """None when `copydecode WORDS` parses and its --set keys exist (the stage validates their values)."""
    from analysis.cli import build_parser
    from analysis.pipeline.params import apply_overrides
    from analysis.errors import ParamsError

    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            args = build_parser().parse_args(words)
    except SystemExit as exc:
        if exc.code == 0:  # --help, --version
            return None
        return stderr.getvalue().strip().splitlines()[-1] if stderr.getvalue().strip() else f"exit {exc.code}"
    overrides = [*getattr(args, "overrides", []), *getattr(args, "overrides_after", [])]
    try:
        apply_overrides(params, overrides)
    except ParamsError as exc:
        return str(exc)
    return None


def dvc_problem(words: list[str], params: dict) -> str | None:
    """None when DVC's own parser takes `dvc WORDS` and every `-S`/`--set-param` key exists."""
    import logging

    from dvc.cli import DvcParserError, parse_args

    stderr, logged = io.StringIO(), []
    handler = logging.Handler()
    handler.emit = lambda record: logged.append(record.getMessage())
    logging.getLogger("dvc").addHandler(handler)
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            args = parse_args(words)
    except SystemExit as exc:
        return None if exc.code == 0 else (stderr.getvalue().strip() or f"exit {exc.code}")
    except DvcParserError:
        return "; ".join(logged) or "DVC's parser refuses it"
    finally:
        logging.getLogger("dvc").removeHandler(handler)
    for group in getattr(args, "set_param", None) or []:
        for item in group if isinstance(group, list) else [group]:
            problem = key_problem(item.partition("=")[0], params)
            if problem:
                return problem
    for option in ("drop", "keep"):
        value = getattr(args, option, None)
        for regex in (value if isinstance(value, list) else [value] if value else []):
            try:
                re.compile(regex)
            except re.error as exc:
                return f"--{option} {regex!r} is not a regular expression ({exc})"
    return None


def python_m_problem(words: list[str]) -> str | None:
    """None when `python -m MODULE` runs something: a package with __main__ or a module with a main guard."""
    import importlib.util

    module = words[words.index("-m") + 1]
    spec = importlib.util.find_spec(module)
    if spec is None:
        return f"no module {module!r}"
    if spec.submodule_search_locations:
        return None if importlib.util.find_spec(f"{module}.__main__") else f"package {module!r} has no __main__"
    source = Path(spec.origin).read_text() if spec.origin and spec.origin.endswith(".py") else ""
    if spec.origin and not spec.origin.startswith(str(ROOT)):
        return None  # a third-party tool (pytest, pip, venv)
    return None if re.search(r"""if __name__ == ["']__main__["']""", source) else (
        f"`python -m {module}` does nothing: the module has no __main__ (use the copydecode subcommand)")


def papermill_problem(words: list[str]) -> str | None:
    import nbformat

    template = ROOT / words[1]
    if not template.is_file():
        return f"no template {words[1]}"
    nb = nbformat.read(template, as_version=4)
    cell = next((c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    names = set(re.findall(r"^(\w+)\s*=", cell.source, flags=re.M)) if cell else set()
    given = [words[i + 1] for i, w in enumerate(words) if w in ("-p", "--parameters")]
    unknown = [g for g in given if g not in names]
    return f"{words[1]} has no parameter {unknown}" if unknown else None


def pip_problem(words: list[str]) -> str | None:
    import tomllib

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"].get("optional-dependencies", {}))
    for w in words:
        asked = re.fullmatch(r"\.\[([\w,-]+)\]", w)
        if asked and not set(asked.group(1).split(",")) <= extras:
            return f"pyproject.toml has no extra {asked.group(1)!r} (extras: {sorted(extras)})"
    return None


def command_problem(command: str, params: dict) -> str | None:
    """What is wrong with one documented command (None: nothing). `a|b` alternatives are each checked; a
    command's bare name in prose (`copydecode compare`, no arguments) is a mention, not a command."""
    words = _substituted(command.replace("\\|", "|"))
    if not _placeholder_free(words):
        return None  # a pattern (`<source>/<model>`), not a command; its keys are checked on their own
    alternatives = next((i for i, w in enumerate(words) if re.fullmatch(r"[\w-]+(?:\|[\w-]+)+", w)), None)
    if alternatives is not None:
        problems = [command_problem(shlex.join([*words[:alternatives], w, *words[alternatives + 1:]]), params)
                    for w in words[alternatives].split("|")]
        return next((p for p in problems if p), None)
    problem = _one_command_problem(words, params)
    if problem and "arguments are required" in problem and not any(w.startswith("-") for w in words):
        return None
    return problem


def _one_command_problem(words: list[str], params: dict) -> str | None:
    head = words[0]
    if head == "copydecode":
        return copydecode_problem(words[1:], params)
    if head == "dvc":
        return dvc_problem(words[1:], params)
    if head in ("python", "python3") and "-m" in words:
        return python_m_problem(words)
    if head == "papermill":
        return papermill_problem(words)
    if head == "pip":
        return pip_problem(words)
    if head == "jupyter" and len(words) > 2:
        return None if (ROOT / words[2]).exists() else f"no such file {words[2]}"
    return None


# ---------------------------------------------------------------- the tests

def test_the_extraction_finds_what_the_docs_hold():
    """The checks below are only as good as the extraction: it finds the README's own commands and keys."""
    commands = {f.text for f in markdown_commands()}
    assert "dvc repro" in commands and 'python -m pytest -m "not slow and not model and not browser"' in commands
    assert any(c.startswith("copydecode corpora --out runs/express --only") for c in commands)
    assert any(c.startswith("copydecode reports --out runs/express") for c in commands)  # from the for loop
    assert "corpora.humanevalpack.source" in {f.text for f in markdown_keys()}
    assert any("--set" in f.text for f in help_texts())
    assert {f.where for f in help_keys()} and len(help_texts()) > 20


def test_every_documented_params_key_exists():
    params = _params()
    found = markdown_keys() + help_keys()
    problems = sorted({f"{f.where}: {f.text}: {p}" for f in found if (p := key_problem(f.text, params))})
    assert not problems, "\n".join(problems)


def test_every_documented_yaml_snippet_is_a_valid_params_fragment():
    """A snippet whose top-level keys are params groups, merged into params.yaml, passes the params file's
    own key check (a stale key fails there exactly as it fails a user)."""
    from analysis.pipeline.params import check_known_keys

    params, groups = _params(), _params_groups()
    checked, problems = 0, []
    for snippet in markdown_yaml():
        try:
            doc = yaml.safe_load(snippet.text)
        except yaml.YAMLError as exc:
            problems.append(f"{snippet.where}: a YAML block does not parse: {exc}")
            continue
        if not isinstance(doc, dict) or not set(doc) <= groups:
            continue
        checked += 1
        try:
            check_known_keys(doc, params, snippet.where)
        except Exception as exc:  # noqa: BLE001 (the error is the finding)
            problems.append(str(exc))
    assert checked > 0
    assert not problems, "\n".join(problems)


def test_every_documented_command_parses():
    params = _params()
    found = markdown_commands() + help_commands()
    problems = sorted({f"{f.where}: `{f.text}`: {p}" for f in found if (p := command_problem(f.text, params))})
    assert not problems, "\n".join(problems)


def test_the_cheap_documented_commands_run():
    """`--help` and `--version` of every copydecode command the docs show, and each subcommand's help."""
    from analysis.cli import main

    cheap = {tuple(_substituted(f.text)[1:]) for f in markdown_commands() + help_commands()
             if f.text.startswith("copydecode") and ({"--help", "--version"} & set(f.text.split()))}
    cheap |= {(*words, "--help") for words, _ in _parsers()}
    assert len(cheap) > 20
    for argv in sorted(cheap):
        with contextlib.redirect_stdout(io.StringIO()) as out, pytest.raises(SystemExit) as exited:
            main(list(argv))
        assert exited.value.code == 0 and out.getvalue().strip(), argv


@pytest.mark.parametrize("command, problem", [
    ("copydecode --set bounds.latency_form=quadratic bounds", "did you mean 'kernel.latency_form'"),
    ("copydecode corpra", "did you mean 'corpora'"),
    ("dvc exp run -S bounds.kernel_sources=[paper]", "no such setting"),
    ("python -m analysis.present.charts", "does nothing"),
])
def test_a_stale_command_is_caught(command, problem):
    """The findings of the review (B2-B4), spelled as they were: each check would have caught its one."""
    found = command_problem(command, _params())
    assert found is not None and problem in found, found


def test_a_stale_key_or_yaml_snippet_is_caught():
    from analysis.pipeline.params import check_known_keys

    assert "kernel.sources" in (key_problem("bounds.kernel_sources", _params()) or "") or \
        key_problem("bounds.kernel_sources", _params()) is not None
    with pytest.raises(Exception, match="kernel_sources"):
        check_known_keys({"bounds": {"kernel_sources": ["fit"]}}, _params(), "docs/own-model.md")


def test_the_readme_says_how_to_return_to_the_committed_outputs():
    """A run rewrites the committed outputs and stages dvc.lock; the README's way back names every tracked
    output folder that a stage writes into git (dvc.yaml outs with cache: false)."""
    text = (ROOT / "README.md").read_text()
    back = re.search(r"`git checkout HEAD -- ([^`]+)`", text)
    assert back, "the README no longer says how to return to the committed outputs"
    named = back.group(1).split()
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    tracked = {str(next(iter(o))) for s in spec["stages"].values() for o in s.get("outs", [])
               if isinstance(o, dict) and next(iter(o.values())).get("cache") is False}
    tops = {t.split("/")[0] for t in tracked}
    assert tops <= set(named) and "dvc.lock" in named, (tops, named)
