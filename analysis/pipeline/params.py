"""Reading params.yaml and the one validator vocabulary: every check of a settings value (`get`,
`positive_int`, `number`, `choice`, `number_list`, `typed_entry`, `check_threads`, ...) lives here.
Each stage's `settings(params)` builds its typed settings from these; nothing else reads the params dict."""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import types
import typing
from pathlib import Path
from typing import Any

import yaml

from analysis.errors import ParamsError
from analysis.pipeline.confine import OutputRootError, safe_name

DEFAULT_PARAMS = Path("params.yaml")
# The shipped params file is the schema of known keys: a key it does not hold is a typo or a
# setting no stage reads. Below these keys the names are free (presets) or checked by their stage.
SCHEMA_PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"
FREE_KEYS = ("kernels.presets", "kernels.batched_presets", "serving.methods", "serving.best_of", "kernels.profile", "pilot.presets", "reports.parameters", "corpora.commit_defaults")
SEED_KEY = re.compile(r"(^|_)seed$")


class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load, but a key given twice in one mapping (a second `programs:` group) is an error, not last-wins,
    and anchors and aliases (`&a`, `*a`) are refused: nested aliases make a small file expand to billions
    of nodes (a 21 KB file exhausted memory), and a params file has no need of them."""

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise ParamsError(f"line {event.start_mark.line + 1}: YAML aliases (*{event.anchor}) are not allowed in "
                              "params; write the value out")
        if getattr(event, "anchor", None) is not None:
            raise ParamsError(f"line {event.start_mark.line + 1}: YAML anchors (&{event.anchor}) are not allowed in "
                              "params; write the value out")
        return super().compose_node(parent, index)


def _construct_unique(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise ParamsError(f"the key {key!r} is given twice in one mapping (lines {seen[key] + 1} and "
                              f"{key_node.start_mark.line + 1}); YAML would keep only the last")
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique)


def parse_params_text(text: str) -> Any:
    """A params document's text as every params file is read: a safe loader, no anchors or aliases, no key twice;
    a ParamsError for YAML that is not valid or nested too deeply."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        raise ParamsError(f"not valid YAML ({exc})".replace("\n", " ")) from exc
    except RecursionError:
        raise ParamsError("not valid YAML (nested too deeply for a params file)") from None


def load_params(path: str | Path = DEFAULT_PARAMS, check_keys: bool = True) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        hint = ("run from the repository root or pass --params" if path == DEFAULT_PARAMS
                else "check the --params path" + (": it is a folder" if path.is_dir() else ""))
        raise ParamsError(f"{path}: no params file ({hint})")
    try:
        params = parse_params_text(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ParamsError(f"{path}: not UTF-8 text ({exc})") from exc
    except ParamsError as exc:
        raise ParamsError(f"{path}: {exc}") from None
    if not isinstance(params, dict):
        raise ParamsError(f"{path}: expected a mapping of stage names to settings")
    if check_keys and SCHEMA_PARAMS.is_file() and Path(path).resolve() != SCHEMA_PARAMS:
        check_known_keys(params, load_params(SCHEMA_PARAMS, check_keys=False), path)
    return params


def parse_value(raw: str, where: str) -> Any:
    """A `--set` VALUE, parsed as a params file is: no anchors or aliases, no key given twice, a
    named error for nesting too deep; the empty string stays ''."""
    if not raw.strip():
        return ""
    try:
        return yaml.load(raw, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        raise ParamsError(f"{where}: the value {shown(raw)} is not valid YAML ({exc})".replace("\n", " ")) from None
    except RecursionError:
        raise ParamsError(f"{where}: the value is nested too deeply for a setting") from None
    except ParamsError as exc:
        raise ParamsError(f"{where}: {exc}".replace("line 1: ", "")) from None


SHOWN_CHARS = 120  # of a value quoted in an error message: a large one would bury the message


def shown(value: Any) -> str:
    """`repr(value)`, cut to SHOWN_CHARS with its full length said."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}... ({len(text):,} characters)"


def _key_paths(node: Any, prefix: str = "") -> set[str]:
    """Every dotted key of nested mappings (lists and the FREE_KEYS subtrees are not entered)."""
    paths: set[str] = set()
    if not isinstance(node, dict) or prefix in FREE_KEYS:
        return paths
    for key, value in node.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        paths.add(dotted)
        paths |= _key_paths(value, dotted)
    return paths


def check_known_keys(params: dict, schema: dict, path: str | Path) -> None:
    """Every key of `params` must be one the shipped params.yaml holds (groups and keys alike)."""
    known = _key_paths(schema)
    unknown = sorted(k for k in _key_paths(params) if k not in known and k.rpartition(".")[0] in known | {""})
    if unknown:
        hint = did_you_mean(unknown[0], sorted(known))
        raise ParamsError(f"{path}: unknown setting{'s' if len(unknown) > 1 else ''} {unknown} (not in the shipped "
                          f"params.yaml, so no stage reads {'them' if len(unknown) > 1 else 'it'}){hint}")


def get(params: dict[str, Any], dotted: str, kind: type | tuple[type, ...] | None = None) -> Any:
    """Look up 'stage.key.sub'; a missing key or a value of the wrong type names the key."""
    node: Any = params
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ParamsError(f"params: missing {dotted!r}")
        node = node[part]
    if kind is not None and not isinstance(node, kind) or isinstance(node, bool) and kind in (int, float, (int, float)):
        raise ParamsError(f"params: {dotted!r} must be {_kind_name(kind)}, got {shown(node)}")
    if kind is int and SEED_KEY.search(dotted.rpartition(".")[2]) and node < 0:  # every seed feeds numpy's SeedSequence
        raise ParamsError(f"params: {dotted!r} must be >= 0, got {node}")
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


def _range_text(lo: float | None, hi: float | None) -> str:
    """'[1, inf)', '(-inf, 5]' or '[1, 5]': an open side is written as infinity, never as None."""
    return f"{'(-inf' if lo is None else f'[{lo}'}, {'inf)' if hi is None else f'{hi}]'}"


def number(params: dict[str, Any], dotted: str, lo: float | None = None, hi: float | None = None) -> float:
    value = get(params, dotted, (int, float))
    if not math.isfinite(value):
        raise ParamsError(f"params: {dotted!r} must be a finite number, got {value!r}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ParamsError(f"params: {dotted!r} must lie in {_range_text(lo, hi)}, got {value!r}")
    return float(value)


def known_keys(params: dict[str, Any], dotted: str, known) -> dict[str, Any]:
    """The mapping at `dotted`, holding no key outside `known` (a typo would otherwise be ignored)."""
    group = get(params, dotted, dict)
    unknown = sorted(set(group) - set(known))
    if unknown:
        names = ", ".join(repr(f"{dotted}.{k}") for k in unknown)
        raise ParamsError(f"params: unknown setting {names}; {dotted!r} knows {', '.join(known)}")
    return group


def interval_level(params: dict[str, Any], dotted: str) -> float:
    """A confidence level: strictly between 0 and 1."""
    value = number(params, dotted)
    if not 0 < value < 1:
        raise ParamsError(f"params: {dotted!r} is a confidence level and must lie strictly between 0 and 1, got {value}")
    return value


def did_you_mean(value: Any, known) -> str:
    """"; did you mean 'X'?" when one of `known` is close to `value` (difflib), else ""."""
    close = difflib.get_close_matches(str(value), [str(k) for k in known], n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def did_you_mean_path(path: str | Path) -> str:
    """"; did you mean 'DIR/NAME'?" when a file or folder beside the missing `path` has a close name."""
    path = Path(path)
    try:
        siblings = [p.name for p in (path.parent if str(path.parent) else Path(".")).iterdir()]
    except OSError:
        return ""
    close = difflib.get_close_matches(path.name, siblings, n=1)
    return f"; did you mean {str(path.parent / close[0])!r}?" if close else ""


def choice(params: dict[str, Any], dotted: str, allowed) -> str:
    value = get(params, dotted, str)
    if value not in allowed:
        raise ParamsError(f"params: {dotted!r} must be one of {', '.join(map(str, allowed))}; got {value!r}"
                          + did_you_mean(value, allowed))
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
                integer: bool = False, nonempty: bool = True, distinct: bool = False) -> tuple:
    values = get(params, dotted, list)
    if nonempty and not values:
        raise ParamsError(f"params: {dotted!r} must not be empty")
    kind = int if integer else (int, float)
    for v in values:
        if isinstance(v, bool) or not isinstance(v, kind) or not math.isfinite(v):
            raise ParamsError(f"params: {dotted!r} must hold {'integers' if integer else 'numbers'}, got {v!r}")
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise ParamsError(f"params: {dotted!r} values must lie in {_range_text(lo, hi)}, got {v!r}")
    if distinct and len(set(values)) != len(values):
        raise ParamsError(f"params: {dotted!r} lists a value twice: {values}")
    return tuple(int(v) if integer else float(v) for v in values)


# ---------------------------------------------------------------- single values (a value already read)

def check_slack(slack: Any, where: str = "contention_slack") -> float:
    """A number of cores >= 0 that other processes may keep busy before a timed run counts as contended."""
    if isinstance(slack, bool) or not isinstance(slack, (int, float)) or not 0 <= slack < float("inf"):
        raise ParamsError(f"{where} must be a number of cores >= 0 (0.5 = half a core), got {slack!r}")
    return float(slack)


# A thread count above this many per usable core oversubscribes the machine so far that every timing
# measures the scheduler (and 1000 threads is a typo): refused at settings time.
THREADS_PER_CORE_LIMIT = 8


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), else os.cpu_count()."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_threads(threads: Any, where: str = "threads") -> int | None:
    """A torch thread count: an integer from 1 to THREADS_PER_CORE_LIMIT x the usable cores, or None
    for torch's default."""
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ParamsError(f"{where} must be a positive integer or null (torch's default), got {threads!r}")
    cores = usable_cores()
    if threads > THREADS_PER_CORE_LIMIT * cores:
        raise ParamsError(f"{where} is {threads}, above {THREADS_PER_CORE_LIMIT} threads per usable core "
                          f"({THREADS_PER_CORE_LIMIT} x {cores} = {THREADS_PER_CORE_LIMIT * cores} on this machine); "
                          "set at most that, or null for torch's default")
    return threads


def check_threshold(threshold: Any, where: str = "noisy_drift") -> float:
    """A drift share > 0 above which a timed run is marked noisy (0.15 = 15%)."""
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold < float("inf"):
        raise ParamsError(f"{where} must be a share > 0 (0.15 = 15%), got {threshold!r}")
    return float(threshold)


# ---------------------------------------------------------------- typed entries of a list (corpora.commits[i], ...)

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
NON_NEGATIVE = ("seed", "min_lines", "max_lines", "max_cases", "max_line_chars", "generated_scan_lines")


def check_annotated(annotation, value, key: str):
    """`value` checked against a settings field's annotation (str, int, float, bool, tuple[str, ...],
    or one of those | None); returns it in the field's type or raises naming `key`."""
    options = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) \
        else (annotation,)
    if value is None and type(None) in options:
        return None
    kinds = [o for o in options if o is not type(None)]
    kind = kinds[0] if len(kinds) == 1 else None
    if kind is str and isinstance(value, str):
        return value
    if kind is bool and isinstance(value, bool):
        return value
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    if typing.get_origin(kind) is tuple and isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    if typing.get_origin(kind) is dict and isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return dict(value)
    wanted = {str: "a string", int: "an integer", float: "a finite number", bool: "true or false"}.get(
        kind, "a mapping of strings to strings" if typing.get_origin(kind) is dict else "a list of strings")
    raise ParamsError(f"params: {key!r} must be {wanted}{' or null' if type(None) in options else ''}, got {value!r}")


def typed_entry(kind: type, entry: object, where: str, defaults: dict | None = None, defaults_where: str = ""):
    """A settings dataclass from a params mapping: unknown keys, wrong types and negative counts or
    seeds are named by their full key (`corpora.commits[0].seed`, or the defaults' key they came from)."""
    if not isinstance(entry, dict):
        raise ParamsError(f"params: {where} must be a mapping, got {entry!r}")
    known = {f.name: f for f in dataclasses.fields(kind)}
    hints = typing.get_type_hints(kind)
    for mapping, place in ((defaults or {}, defaults_where), (entry, where)):
        unknown = sorted(set(mapping) - set(known))
        if unknown:
            raise ParamsError(f"params: {place} has unknown keys {unknown}; known: {', '.join(known)}")
    values = {}
    for key, value in {**(defaults or {}), **entry}.items():
        full = f"{where}.{key}" if key in entry else f"{defaults_where}.{key}"
        if key in entry and where.startswith("--") and key in ("name", "language"):
            full = f"--{key}"  # a command-line input's --name/--language, not a params key
        values[key] = check_annotated(hints[key], value, full)
        if key in NON_NEGATIVE and values[key] < 0:
            raise ParamsError(f"params: {full!r} must be >= 0, got {value!r}")
        if key == "name" and value is not None and not NAME_PATTERN.fullmatch(value):
            raise ParamsError(f"params: {full!r} must be letters, digits, '.', '_', '+' or '-' (starting with a "
                              f"letter or digit), got {value!r}")
    missing = [name for name, f in known.items() if name not in values
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        also = f" or {defaults_where}" if defaults_where else ""
        raise ParamsError(f"params: {where}{also} must set {missing}")
    return kind(**values)


def _kind_name(kind) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    return kind.__name__ if kind else "set"


# ---------------------------------------------------------------- presets

def merge_preset(params: dict[str, Any], group: str, presets: str, name: str | None) -> dict[str, Any]:
    """The params group `group` overlaid with the preset `name` of the group `presets` (the one preset
    merge): a mapping in the preset overlays the group's mapping key by key, at any depth; any other
    value replaces the group's. With no name, a copy of the group."""
    base = get(params, group, dict)
    if name is None:
        return _overlay(base, {})

    try:  # a preset's name names its output folder or file (data/e2e/<preset>/, data/kernels/<preset>.parquet)
        safe_name(name, f"preset {presets}:")
    except OutputRootError as exc:
        raise ParamsError(str(exc)) from None
    table = get(params, presets, dict)
    if name not in table:
        raise ParamsError(f"params: unknown preset {name!r} in {presets!r}; known: {', '.join(map(str, table))}")
    preset = table[name]
    if not isinstance(preset, dict):
        raise ParamsError(f"params: preset '{presets}.{name}' must be a mapping of {group} settings, got {preset!r}")
    return _overlay(base, preset)


def _overlay(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = {k: _overlay(v, {}) if isinstance(v, dict) else v for k, v in base.items()}
    for key, value in over.items():
        both = isinstance(value, dict) and isinstance(merged.get(key), dict)
        merged[key] = _overlay(merged[key], value) if both else (_overlay(value, {}) if isinstance(value, dict) else value)
    return merged


# ---------------------------------------------------------------- --set KEY=VALUE


def apply_overrides(params: dict, overrides: list[str]) -> dict:
    """A copy of `params` with each KEY=VALUE applied (VALUE parsed as YAML). The key must already exist
    (an unknown one is a named error with the closest known key); the stage's settings validate the value."""
    import copy

    out = copy.deepcopy(params)
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ParamsError(f"--set expects KEY=VALUE (e.g. kernel.latency_form=quadratic), got {shown(item)}")
        value = parse_value(raw, f"--set {key}")
        *parents, last = key.split(".")
        node = _at(out, ".".join(parents))
        known = isinstance(node, dict) and last in node
        if not known and _inherited(out, key):  # a setting the preset inherits: set on the preset itself
            node, known = _at(out, ".".join(parents)), True
        if not known or not isinstance(node, dict):
            raise ParamsError(f"--set {key}: no such setting in the params file"
                              + did_you_mean(key, sorted(_dotted_keys(params))))
        node[last] = value
        if isinstance(value, dict) and SCHEMA_PARAMS.is_file():  # only keys a stage reads (`bootstrap_resample`)
            alone: dict = value
            for part in reversed(key.split(".")):
                alone = {part: alone}
            check_known_keys(alone, load_params(SCHEMA_PARAMS, check_keys=False), f"--set {key}")
    return out


# preset table -> the group each of its presets overlays (merge_preset's callers): a preset inherits every setting
# of its group, so `--set kernels.batched_presets.NAME.threads=2` sets one the preset does not spell out
PRESET_GROUPS = {"kernels.presets": "kernels.profile", "kernels.batched_presets": "kernels.batched",
                 "e2e.presets": "e2e", "pilot.presets": "pilot"}


def _inherited(params: dict, key: str) -> bool:
    """Whether `key` names a setting an existing preset inherits from its group (so --set may add it there)."""
    for table, group in PRESET_GROUPS.items():
        if not key.startswith(table + "."):
            continue
        name, _, rest = key[len(table) + 1:].partition(".")
        presets = _at(params, table)
        base = _at(params, group)
        if not rest or not isinstance(presets, dict) or not isinstance(presets.get(name), dict) or base is None:
            return False
        *parents, last = rest.split(".")
        inherited, preset = _at(base, ".".join(parents)) if parents else base, presets[name]
        for part in parents:  # the preset's own mapping on the way, made where it inherits the group's
            if not isinstance(preset.setdefault(part, {}), dict):
                return False
            preset = preset[part]
        return isinstance(inherited, dict) and last in inherited
    return False


def _at(node: Any, dotted: str) -> Any:
    for part in dotted.split(".") if dotted else ():
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _dotted_keys(node, prefix: str = "") -> set[str]:
    keys: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            dotted = f"{prefix}.{key}" if prefix else str(key)
            keys |= {dotted} | _dotted_keys(value, dotted)
    return keys
