"""`copydecode decode`: run the Copy-as-Decode decoder on one case of data/corpora/cases.parquet.

    copydecode decode --case-id ProbeEdit-S/3 [--model smollm2-135m] [--framing body]
    python -m kernels_profile.stages.decode --case-id ProbeEdit-S/3   (the same, with its own flags)

Prints the program the model wrote, the resolved output, whether it matches the target, and the
timings (prompt prefill, decode steps, copy prefills, mask time) with token counts. The dvc stage runs
the params' case (decode.case_id, decode.model) and writes reports/metrics/decode.json; a run with a
--case-id or --model from the command line only prints, so it never overwrites the tracked metrics.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import polars as pl

from analysis.corpora.cases import read_cases
from analysis.config import Config
from analysis.errors import CopyDecodeError, CorpusError, ParamsError
from analysis.io import write_json, write_table
from analysis.layout import CASES, METRICS, TABLES
from analysis.params import choice, choices, get, get_or, positive_int
from analysis.stages.common import timed
from kernels_profile.models import DTYPES, known_models
from kernels_profile.sequence import TEMPLATES


@dataclass(frozen=True)
class DecodeSettings:
    case_id: str
    framing: str
    model: str
    weights: str
    dtype: str
    budget: int
    unit: str
    template: str
    mask_models: tuple[str, ...]     # vocabularies of the mask benchmark beside llguidance
    mask_programs: int
    mask_lines: int
    mask_apply_repeats: int


def settings(cfg: Config, args=None) -> DecodeSettings:
    p = cfg.params
    case_id = getattr(args, "case_id", None) or get(p, "decode.case_id", str)
    model = getattr(args, "model", None) or get(p, "decode.model", str)
    if model not in known_models():
        raise ParamsError(f"params: decode.model: unknown model {model!r}; known: {', '.join(known_models())}")
    return DecodeSettings(
        case_id=case_id,
        framing=getattr(args, "framing", None) or get(p, "decode.framing", str),
        model=model,
        weights=get_or(p, "decode.weights", "gguf" if model == "smollm2-135m" else "random", str),
        dtype=choice(p, "decode.dtype", DTYPES),
        budget=positive_int(p, "decode.budget"),
        unit=choice(p, "decode.unit", ("lines", "tokens")),
        template=choice(p, "decode.template", ("program",)),
        mask_models=choices(p, "decode.mask_benchmark.models", tuple(known_models())),
        mask_programs=positive_int(p, "decode.mask_benchmark.programs"),
        mask_lines=positive_int(p, "decode.mask_benchmark.lines"),
        mask_apply_repeats=positive_int(p, "decode.mask_benchmark.apply_repeats"),
    )


def find_case(cases: pl.DataFrame, case_id: str, framing: str) -> dict:
    rows = cases.filter(pl.col("case_id") == case_id)
    if rows.is_empty():
        raise CorpusError(f"decode: no case {case_id!r} in {CASES}")
    framed = rows.filter(pl.col("framing") == framing) if rows.height > 1 else rows
    if framed.is_empty():
        raise CorpusError(f"decode: case {case_id!r} has no framing {framing!r} "
                          f"(it has {', '.join(sorted(rows['framing']))})")
    return framed.row(0, named=True)


def run(cfg: Config, args=None) -> dict:
    from kernels_profile.decoder import (
        DecodeError,
    )

    s = settings(cfg, args)
    case = find_case(read_cases(CASES), s.case_id, s.framing)
    if not (case["instruction"] or "").strip():  # refused before minutes of model loading
        raise DecodeError(f"{s.case_id}: the edit instruction is empty (the case has none)")
    with timed("decode"):
        return _decode_and_benchmark(s, case, args)


def _decode_and_benchmark(s: DecodeSettings, case: dict, args) -> dict:
    from kernels_profile.decoder import decode, load_for_decoding, result_record

    lm, tok = load_for_decoding(s.model, s.weights, s.dtype, "cpu")
    result = decode(lm, tok, case["source"], case["instruction"] or "", TEMPLATES[s.template], s.budget,
                    unit=s.unit, case=s.case_id)
    record = {"case_id": s.case_id, "model": s.model, **result_record(result, case["target"])}
    if not (getattr(args, "case_id", None) or getattr(args, "model", None) or getattr(args, "framing", None)):
        from kernels_profile import maskbench

        results = maskbench.run_models(s.mask_models, maskbench.line_programs(s.mask_programs, s.mask_lines),
                                       s.mask_lines, apply_repeats=s.mask_apply_repeats)
        write_table(pl.DataFrame(maskbench.summary_rows(results)), TABLES / "mask_benchmark", digits=1)
        write_json({**record, "mask_benchmark": results}, METRICS / "decode.json")
    return record


def main(argv: list[str] | None = None) -> int:
    import json

    parser = argparse.ArgumentParser(prog="python -m kernels_profile.stages.decode", description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--case-id", dest="case_id", default=None)
    parser.add_argument("--model", default=None)
    parser.add_argument("--framing", default=None)
    args = parser.parse_args(argv)
    try:
        print(json.dumps(run(Config.load(args.params), args), indent=2, default=str))
    except CopyDecodeError as exc:
        print(f"copydecode decode: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
