"""params.yaml -> typed, checked settings. Every constant that changes a result lives in params.yaml."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from analysis.errors import ParamsError

DEFAULT_PARAMS = Path("params.yaml")


def load_params(path: str | Path = DEFAULT_PARAMS) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"{path}: no params file (run from the repository root or pass --params)")
    params = yaml.safe_load(path.read_text())
    if not isinstance(params, dict):
        raise ParamsError(f"{path}: expected a mapping of stage names to settings")
    return params


def get(params: dict[str, Any], dotted: str, kind: type | tuple[type, ...] | None = None) -> Any:
    """Look up 'stage.key.sub'; a missing key or a value of the wrong type names the key."""
    node: Any = params
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ParamsError(f"params: missing {dotted!r}")
        node = node[part]
    if kind is not None and not isinstance(node, kind) or isinstance(node, bool) and kind in (int, float, (int, float)):
        raise ParamsError(f"params: {dotted!r} must be {_kind_name(kind)}, got {node!r}")
    return node


def positive_int(params: dict[str, Any], dotted: str, minimum: int = 1) -> int:
    value = get(params, dotted, int)
    if value < minimum:
        raise ParamsError(f"params: {dotted!r} must be >= {minimum}, got {value}")
    return value


def _kind_name(kind) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    return kind.__name__ if kind else "set"
