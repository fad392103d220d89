"""Reading params.yaml and checking single values. `analysis.config` builds the typed per-stage
settings from these; nothing else reads the params dict."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import yaml

from analysis.errors import ParamsError

DEFAULT_PARAMS = Path("params.yaml")


def load_params(path: str | Path = DEFAULT_PARAMS) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"{path}: no params file (run from the repository root or pass --params)")
    try:
        params = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ParamsError(f"{path}: not valid YAML ({exc})".replace("\n", " ")) from exc
    except UnicodeDecodeError as exc:
        raise ParamsError(f"{path}: not UTF-8 text ({exc})") from exc
    if not isinstance(params, dict):
        raise ParamsError(f"{path}: expected a mapping of stage names to settings")
    return params


def params_hash(path: str | Path = DEFAULT_PARAMS) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


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


def get_or(params: dict[str, Any], dotted: str, default: Any, kind: type | tuple[type, ...] | None = None) -> Any:
    try:
        get(params, dotted)
    except ParamsError:
        return default
    return get(params, dotted, kind)


def positive_int(params: dict[str, Any], dotted: str, minimum: int = 1) -> int:
    value = get(params, dotted, int)
    if value < minimum:
        raise ParamsError(f"params: {dotted!r} must be >= {minimum}, got {value}")
    return value


def number(params: dict[str, Any], dotted: str) -> float:
    value = get(params, dotted, (int, float))
    if not math.isfinite(value):
        raise ParamsError(f"params: {dotted!r} must be a finite number, got {value!r}")
    return float(value)


def interval_level(params: dict[str, Any], dotted: str) -> float:
    """A confidence level: strictly between 0 and 1."""
    value = number(params, dotted)
    if not 0 < value < 1:
        raise ParamsError(f"params: {dotted!r} is a confidence level and must lie strictly between 0 and 1, got {value}")
    return value


def choice(params: dict[str, Any], dotted: str, allowed) -> str:
    value = get(params, dotted, str)
    if value not in allowed:
        raise ParamsError(f"params: {dotted!r} must be one of {', '.join(map(str, allowed))}; got {value!r}")
    return value


def choices(params: dict[str, Any], dotted: str, allowed, nonempty: bool = True) -> tuple[str, ...]:
    """A list whose every item is one of `allowed` (no duplicates)."""
    values = get(params, dotted, list)
    if nonempty and not values:
        raise ParamsError(f"params: {dotted!r} must not be empty; choose from {', '.join(map(str, allowed))}")
    bad = [v for v in values if not isinstance(v, str) or v not in allowed]
    if bad:
        raise ParamsError(f"params: {dotted!r} has unknown values {bad}; known: {', '.join(map(str, allowed))}")
    if len(set(values)) != len(values):
        raise ParamsError(f"params: {dotted!r} lists a value twice: {values}")
    return tuple(values)


def number_list(params: dict[str, Any], dotted: str, lo: float | None = None, hi: float | None = None,
                integer: bool = False, nonempty: bool = True) -> tuple:
    values = get(params, dotted, list)
    if nonempty and not values:
        raise ParamsError(f"params: {dotted!r} must not be empty")
    kind = int if integer else (int, float)
    for v in values:
        if isinstance(v, bool) or not isinstance(v, kind) or not math.isfinite(v):
            raise ParamsError(f"params: {dotted!r} must hold {'integers' if integer else 'numbers'}, got {v!r}")
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise ParamsError(f"params: {dotted!r} values must lie in [{lo}, {hi}], got {v!r}")
    return tuple(int(v) if integer else float(v) for v in values)


def _kind_name(kind) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    return kind.__name__ if kind else "set"
