"""HumanEvalPack -> HEvalFix-<Lang> cases (the case schema: `analysis.corpora.cases`).

HEvalFix framings (MISSION.md): `body` edits buggy_solution into canonical_solution; `decl` prefixes
both with the declaration; `prompt` prefixes both with the prompt (signature and docstring).

HumanEvalPack comes from a local folder of `<lang>.jsonl` files (param `corpora.humanevalpack.local_dir`,
overridden by the environment variable COPYDECODE_HUMANEVALPACK_DIR) or from the hub
(`datasets.load_dataset("bigcode/humanevalpack", lang, split="test")`); the origin used is recorded
in the metrics. `source`:
- `local`: the folder; it must exist.
- `hub`: the hub, whatever the folder.
- `auto`: the folder when one is set; the hub only when no folder is set at all. A folder that is
  set but missing is an error at once, naming it: a missing folder is nearly always a wrong path or
  an unmounted share, and falling back to the hub silently took ~25 s offline and then reported a
  hub error that never named the folder. Ask for the hub with `source: hub`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from analysis.corpora.cases import Case
from analysis.corpora.entries import FRAMINGS, check_framings, check_language, hevalfix_corpus
from analysis.corpora.jsonl import read_jsonl as read_jsonl_records
from analysis.pipeline.digest import file_digest
from analysis.errors import CorpusError

REQUIRED_FIELDS: tuple[str, ...] = (
    "task_id", "prompt", "declaration", "buggy_solution", "canonical_solution",
)
HUB_ID = "bigcode/humanevalpack"
ENV_DIR = "COPYDECODE_HUMANEVALPACK_DIR"
# sha256 of the files in ../shared/data/humanevalpack (its README); other languages are not pinned
KNOWN_SHA256: dict[str, str] = {
    "python": "b1376d72be4bd016a62ad043d9de3846edb8d63edf1222da802a31330c14c3a7",
    "js": "04c86c1fac5f33818d9187cba278ed1dfc66cc259372dd8342126aa580fb7569",
}


@dataclass(frozen=True)
class CorpusOrigin:
    corpus: str
    origin: str  # "local:<path>" or "hub:<id>"
    sha256: str | None
    n_records: int


def resolve_local_dir(local_dir: str | os.PathLike | None) -> Path | None:
    env = os.environ.get(ENV_DIR)
    chosen = env if env else local_dir
    return Path(chosen) if chosen else None


def read_jsonl(path: Path) -> list[dict]:
    """Read HumanEvalPack records; any defect is a CorpusError naming file, line and field."""
    records = read_jsonl_records(path, f"set {ENV_DIR} or corpora.humanevalpack.local_dir")
    for record in records:
        check_record(record.data, f"{path}:{record.line}")
    return [record.data for record in records]


def check_record(record: dict, where: str) -> None:
    for field in REQUIRED_FIELDS:
        if field not in record:
            raise CorpusError(f"{where}: missing field {field!r}")
        if not isinstance(record[field], str):
            raise CorpusError(
                f"{where}: field {field!r} must be a string, got {type(record[field]).__name__}"
            )
    instruction = record.get("instruction")
    if instruction is not None and not isinstance(instruction, str):
        raise CorpusError(f"{where}: field 'instruction' must be a string, got {type(instruction).__name__}")


def load_humanevalpack(
    language: str, local_dir: str | os.PathLike | None, source: str = "auto", verify_sha256: bool = True
) -> tuple[list[dict], CorpusOrigin]:
    check_language(language)
    if source not in ("auto", "local", "hub"):
        raise CorpusError(f"corpora.humanevalpack.source must be auto, local or hub, got {source!r}")
    folder = resolve_local_dir(local_dir)
    if source == "hub" or (source == "auto" and folder is None):
        return _load_from_hub(language)
    if folder is None:
        raise CorpusError(f"source is 'local' but no folder is set ({ENV_DIR} or local_dir)")
    if not folder.is_dir():
        set_by = f"environment variable {ENV_DIR}" if os.environ.get(ENV_DIR) else "corpora.humanevalpack.local_dir"
        raise CorpusError(
            f"HumanEvalPack folder {folder} (from {set_by}) does not exist; fix the path, or set "
            f"corpora.humanevalpack.source: hub to load {HUB_ID} from the hub instead"
        )
    path = folder / f"{language}.jsonl"
    records = read_jsonl(path)
    digest = file_digest(path)
    expected = KNOWN_SHA256.get(language)
    if verify_sha256 and expected and digest != expected:
        raise CorpusError(f"{path}: sha256 {digest} differs from the pinned {expected}")
    origin = CorpusOrigin(hevalfix_corpus(language), f"local:{path}", digest, len(records))
    return records, origin


def _load_from_hub(language: str) -> tuple[list[dict], CorpusOrigin]:
    try:
        from datasets import load_dataset

        dataset = load_dataset(HUB_ID, language, split="test")
    except Exception as exc:  # offline, missing config, ...: say which and how to fix it
        raise CorpusError(
            f"could not load {HUB_ID} config {language!r} from the hub ({type(exc).__name__}: {exc}); "
            f"set {ENV_DIR} to a folder holding {language}.jsonl"
        ) from exc
    records = [dict(r) for r in dataset]
    for k, record in enumerate(records):
        check_record(record, f"hub:{HUB_ID}/{language}[{k}]")
    return records, CorpusOrigin(hevalfix_corpus(language), f"hub:{HUB_ID}/{language}", None, len(records))


BUGFIX_INSTRUCTION = "Fix bugs in {name}."


def bugfix_instruction(name: str) -> str:
    """HumanEvalFix's own instruction (bigcode-evaluation-harness, humanevalfix): the buggy function is
    the input, the request names it. The pilot asks its HEvalFix-Py cases and its `bugfix` training
    cases with it."""
    return BUGFIX_INSTRUCTION.format(name=name)


def framed_pair(record: dict, framing: str) -> tuple[str, str]:
    buggy, fixed = record["buggy_solution"], record["canonical_solution"]
    if framing == "body":
        return buggy, fixed
    if framing == "decl":
        return record["declaration"] + buggy, record["declaration"] + fixed
    if framing == "prompt":
        return record["prompt"] + buggy, record["prompt"] + fixed
    raise CorpusError(f"unknown framing {framing!r}; known: {', '.join(FRAMINGS)}")


def hevalfix_cases(records: list[dict], language: str, framings) -> list[Case]:
    check_framings(framings)
    corpus = hevalfix_corpus(language)
    cases = []
    for framing in framings:
        for record in records:
            number = record["task_id"].rsplit("/", 1)[-1]
            source, target = framed_pair(record, framing)
            cases.append(Case(f"{corpus}/{number}", corpus, language, framing, source, target,
                              record.get("instruction")))
    return cases
