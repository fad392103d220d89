"""params.yaml stays in block style, with comments on their own line above the key they explain, in
the layout DVC's YAML writer keeps: `dvc exp run -S key=value` changes that one line and drops no comment.

Flow collections (`{a: 1}`, `[x, y]`) and trailing comments make `dvc exp run -S` rewrites and
merges of new keys error-prone; only the empty collections `{}` and `[]` (which have no block form)
are allowed. DVC rewrites every list (ruamel attaches a comment after a list to the list, so it goes
too), so a key after a list has its comment at the top of its group. The conversion to block style
(the commits after c7feace) changed no key or value (checked then with yaml.safe_load; keys have
moved since, by design).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PARAMS = ROOT / "params.yaml"


def flow_collections(text: str) -> list[str]:
    """Paths of non-empty mappings/sequences written in flow style."""
    found: list[str] = []

    def walk(node: yaml.Node, path: str) -> None:
        if isinstance(node, yaml.MappingNode):
            if node.flow_style and node.value:
                found.append(f"{path or '<root>'} (line {node.start_mark.line + 1})")
            for key, value in node.value:
                walk(value, f"{path}.{key.value}" if path else str(key.value))
        elif isinstance(node, yaml.SequenceNode):
            if node.flow_style and node.value:
                found.append(f"{path} (line {node.start_mark.line + 1})")
            for i, item in enumerate(node.value):
                walk(item, f"{path}[{i}]")

    walk(yaml.compose(text), "")
    return found


def trailing_comments(text: str) -> list[int]:
    """Line numbers where a comment follows a key or value on the same line."""
    lines = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        in_quote = None
        for i, char in enumerate(stripped):
            if char in "'\"" and in_quote in (None, char):
                in_quote = None if in_quote else char
            elif char == "#" and in_quote is None and i > 0 and stripped[i - 1] in " \t":
                lines.append(number)
                break
    return lines


def test_helpers_detect_flow_and_trailing_comments():
    text = "a:\n  b: {c: 1}\n  d: [1, 2]\n  e: []\n  f: {}\n  g: 'x # y'\n  h: 3   # note\n"
    assert flow_collections(text) == ["a.b (line 2)", "a.d (line 3)"]
    assert trailing_comments(text) == [7]


def test_params_yaml_is_block_style_with_comments_above_keys():
    text = PARAMS.read_text()
    assert flow_collections(text) == [], "params.yaml: write these in block style (one item a line)"
    assert trailing_comments(text) == [], "params.yaml: put these comments on their own line above the key"


def _dvc_set(tmp_path, text: str, override: str) -> list[str]:
    """The diff lines (- old, + new) that `dvc exp run -S override` makes to a params file with `text`."""
    import difflib

    hydra = pytest.importorskip("dvc.utils.hydra")
    path = tmp_path / "params.yaml"
    path.write_text(text)
    hydra.apply_overrides(str(path), [override])
    return [line for line in difflib.unified_diff(text.splitlines(), path.read_text().splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("---", "+++"))]


def test_dvc_exp_run_set_changes_one_line_and_drops_no_comment(tmp_path):
    """What `dvc exp run -S` writes into params.yaml: the overridden value's line and nothing else (C9: a
    `null` written out, which DVC's writer renders as an empty value, was six more changed lines; params.yaml
    writes its nulls as empty values, the same YAML null)."""
    text = PARAMS.read_text()
    for override, changed in (("kernel.latency_form=quadratic", ["-  latency_form: interp", "+  latency_form: quadratic"]),
                              ("e2e.pld.sweep_k=[64,256]", ["-    sweep_k: []", "+    sweep_k:", "+    - 64", "+    - 256"])):
        diff = [line.rstrip() for line in _dvc_set(tmp_path, text, override)]
        assert sorted(diff) == sorted(changed), (override, diff)
        assert not [line for line in diff if line.lstrip("-+ ").startswith("#")], override


def test_params_yaml_writes_no_explicit_null():
    """DVC's writer turns `key: null` into `key:`; written that way already, a `-S` run leaves it alone."""
    assert [n for n, line in enumerate(PARAMS.read_text().splitlines(), 1)
            if not line.lstrip().startswith("#") and line.rstrip().endswith((": null", ": ~"))] == []


def test_the_dvc_check_catches_a_comment_after_a_list(tmp_path):
    text = "a:\n  xs:\n  - 1\n  # lost\n  s: 2\n"
    assert "-  # lost" in _dvc_set(tmp_path, text, "a.s=3")
