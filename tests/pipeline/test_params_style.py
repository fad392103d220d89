"""params.yaml stays in block style, with comments on their own line above the key they explain.

Flow collections (`{a: 1}`, `[x, y]`) and trailing comments make `dvc exp run -S` rewrites and
merges of new keys error-prone; only the empty collections `{}` and `[]` (which have no block form)
are allowed. The conversion to block style (commit 0a512d0) changed no key or value (checked then
against c7feace with yaml.safe_load).
"""

from __future__ import annotations

from pathlib import Path

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
