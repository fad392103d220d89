"""`copydecode decode`: run the Copy-as-Decode decoder on one case of data/corpora/cases.parquet.

    copydecode decode --case-id ProbeEdit-S/3 [--model smollm2-135m] [--framing body]

Prints the program the model wrote, the resolved output, whether it matches the target, and the
timings (prompt prefill, decode steps, copy prefills, mask time) with token counts. The dvc stage runs
the params' case (decode.case_id, decode.model) and writes reports/metrics/decode.json; a run with a
--case-id, --model or --framing from the command line only prints, so it never overwrites the
tracked metrics. `settings(params, ...)` is the only reader of the `decode` group.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analysis.corpora.cases import read_cases
from analysis.corpora.humanevalpack import FRAMINGS
from analysis.errors import CorpusError, ParamsError
from analysis.pipeline.io import write_json, write_table
from analysis.layout import CASES, METRICS, TABLES
from analysis.pooling import SINGLE_FRAMINGS
from analysis.pipeline.params import choice, choices, did_you_mean, get, positive_int
from analysis.parallel.progress import timed
from kernels_profile.decode.decoder import MASK_ENGINES, DecodeError, decode, load_for_decoding, result_record
from kernels_profile.runtime.models import DTYPES, known_models
from kernels_profile.runtime.hf import TEMPLATES
from kernels_profile.decode import maskbench


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
    mask_engine: str                 # suite (this suite's FSM) | llguidance (its matcher, forced-span grammar)
    mask_models: tuple[str, ...]     # vocabularies of the mask benchmark beside llguidance
    mask_programs: int
    mask_lines: int
    mask_apply_repeats: int
    mask_threads: int                # torch threads while a mask is applied
    from_command_line: bool          # a case, model or framing given on the command line: print only


# `copydecode decode`: its help line and what it reads and writes (the CLI's --help)
HELP = "the Copy-as-Decode decoder on one case (--case-id, --model)"
READS_WRITES = ("reads data/corpora/cases.parquet, data/programs/programs.parquet and the model's weights; writes "
                "reports/tables/mask_benchmark.*, reports/metrics/decode.json")


def add_arguments(parser) -> None:
    """`decode`'s own options (settings(params, case_id, model, framing))."""
    parser.add_argument("--case-id", dest="case_id", help="the case to decode (default: params decode.case_id)")
    parser.add_argument("--model", help="the model (default: params decode.model)")
    parser.add_argument("--framing", help="the framing of a multi-framing corpus (default: params)")


def settings(params: dict, case_id: str | None = None, model: str | None = None,
             framing: str | None = None) -> DecodeSettings:
    """decode, validated; `case_id`, `model` and `framing` (the command line's) replace the params'."""
    p = params
    framing_given = framing
    chosen = model or get(p, "decode.model", str)
    framing = framing or get(p, "decode.framing", str)
    if framing not in FRAMINGS + SINGLE_FRAMINGS:
        known = FRAMINGS + SINGLE_FRAMINGS
        raise ParamsError(f"decode: framing {framing!r} unknown; known: {', '.join(known)}"
                          f"{did_you_mean(framing, known)} (params decode.framing or --framing)")
    if chosen not in known_models():
        raise ParamsError(f"params: decode.model: unknown model {chosen!r}; known: {', '.join(known_models())}")
    return DecodeSettings(
        case_id=case_id or get(p, "decode.case_id", str),
        framing=framing,
        model=chosen,
        weights=get(p, "decode.weights", str),
        dtype=choice(p, "decode.dtype", DTYPES),
        budget=positive_int(p, "decode.budget"),
        unit=choice(p, "decode.unit", ("lines", "tokens")),
        template=choice(p, "decode.template", ("program",)),
        mask_engine=choice(p, "decode.mask_engine", MASK_ENGINES),
        mask_models=choices(p, "decode.mask_benchmark.models", tuple(known_models())),
        mask_programs=positive_int(p, "decode.mask_benchmark.programs"),
        mask_lines=positive_int(p, "decode.mask_benchmark.lines"),
        mask_apply_repeats=positive_int(p, "decode.mask_benchmark.apply_repeats"),
        mask_threads=positive_int(p, "decode.mask_benchmark.threads"),
        from_command_line=bool(case_id or model or framing_given),
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


def run(s: DecodeSettings) -> dict:
    case = find_case(read_cases(CASES), s.case_id, s.framing)
    if not (case["instruction"] or "").strip():  # refused before minutes of model loading
        raise DecodeError(f"{s.case_id}: the edit instruction is empty (the case has none)")
    with timed("decode"):
        return _decode_and_benchmark(s, case)


def _decode_and_benchmark(s: DecodeSettings, case: dict) -> dict:
    lm, tok = load_for_decoding(s.model, s.weights, s.dtype, "cpu")
    result = decode(lm, tok, case["source"], case["instruction"] or "", TEMPLATES[s.template], s.budget,
                    unit=s.unit, case=s.case_id, mask_engine=s.mask_engine)
    record = {"case_id": s.case_id, "model": s.model, "mask_engine": s.mask_engine,
              **result_record(result, case["target"])}
    if not s.from_command_line:
        results = maskbench.run_models(s.mask_models, maskbench.line_programs(s.mask_programs, s.mask_lines),
                                       s.mask_lines, apply_repeats=s.mask_apply_repeats, threads=s.mask_threads,
                                       cases=maskbench.line_cases(s.mask_programs, s.mask_lines))
        write_table(pl.DataFrame(maskbench.summary_rows(results)), TABLES / "mask_benchmark", digits=1)
        write_json({**record, "mask_benchmark": results}, METRICS / "decode.json")
    return record
