"""Per-case stages through joblib: n_jobs 2 gives the serial tables byte for byte; param validation."""

import functools
import io

import numpy as np
import polars as pl
import pytest

from analysis.corpora.cases import Case, cases_frame
from analysis.errors import ParamsError
from analysis.oracle.optimal import CostModel, TokenizerDirectives
from analysis.parallel.workers import ParallelSettings, check_parallel, chunked, map_cases, parallel_settings
from analysis.oracle import span_frames
from analysis.stages import perturb as perturb_stage
from analysis.oracle.programs import oracle_programs
from analysis.stages.roundtrip import roundtrip_failures
from analysis.coverage.spans import build_spans

SERIAL = ParallelSettings(n_jobs=1, backend="loky", chunks_per_job=4, address="")
TWO = ParallelSettings(n_jobs=2, backend="loky", chunks_per_job=3, address="")


def parquet_bytes(frame: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    return buffer.getvalue()


def make_cases(n: int = 14) -> list[Case]:
    cases = []
    for i in range(n):
        lines = [f"value_{i}_{k} = compute({k}, {i})\n" for k in range(12 + i)]
        edited = list(lines)
        edited[i % len(lines)] = f"value_{i} = changed({i})\n"
        if i % 3 == 0:
            edited.insert(2, "import os\n")
        if i % 4 == 1:
            edited = edited[6:] + edited[:6]  # a reordering: several copies
        cases.append(Case(f"T/{i:03d}", "T-A" if i % 2 else "T-B", "python", "file",
                                  "".join(lines), "".join(edited)))
    return cases


@pytest.fixture(scope="module")
def tables(qwen):
    cases = make_cases()
    programs = oracle_programs(cases, qwen, 1, SERIAL)
    joined = programs.join(cases_frame(cases).select("case_id", "framing", "source", "target"),
                           on=["case_id", "framing"], how="left")
    return cases, programs, joined


def test_chunks_are_contiguous_and_cover_the_items():
    items = list(range(11))
    parts = chunked(items, 4)
    assert [x for p in parts for x in p] == items and len(parts) == 4 and all(parts)
    assert chunked(items, 50) == [[x] for x in items]


def test_map_cases_keeps_order_across_workers():
    items = list(range(25))
    assert map_cases(_double_all, items, TWO) == [2 * x for x in items]
    assert map_cases(_double_all, items, SERIAL) == [2 * x for x in items]


def _double_all(chunk):
    return [2 * x for x in chunk]


def test_programs_byte_identical(qwen, tables):
    cases, programs, _ = tables
    parallel = oracle_programs(cases, qwen, 1, TWO)
    assert parquet_bytes(parallel) == parquet_bytes(programs)
    assert programs.height == 2 * len(cases)


def test_roundtrip_same_failures(qwen, tables):
    _, _, joined = tables
    assert roundtrip_failures(joined, qwen, TWO) == roundtrip_failures(joined, qwen, SERIAL) == []
    broken = joined.with_columns(target=pl.when(pl.col("case_id") == "T/003").then(pl.lit("x\n"))
                                 .otherwise(pl.col("target")))
    assert roundtrip_failures(broken, qwen, TWO) == roundtrip_failures(broken, qwen, SERIAL) != []


def test_spans_byte_identical(qwen, tables):
    _, _, joined = tables
    serial = build_spans(joined, qwen, 60, SERIAL)
    assert serial.height > joined.height
    assert parquet_bytes(build_spans(joined, qwen, 60, TWO)) == parquet_bytes(serial)


def test_optimal_span_frames_byte_identical(qwen, tables):
    cases, _, joined = tables
    directives = TokenizerDirectives(qwen)
    sources = qwen.encode_many([c.source for c in cases])
    targets = qwen.encode_many([c.target for c in cases])
    programs = {(r["case_id"], r["level"]): r["program"] for r in joined.iter_rows(named=True)}
    from analysis.grammar.program import parse

    oracle_cases = [span_frames.OracleCase(c.case_id, c.corpus, c.framing, s, t,
                                             {lv: parse(programs[(c.case_id, lv)]) for lv in ("line", "token")})
                    for c, s, t in zip(cases, sources, targets)]
    cost = CostModel(0.02, functools.partial(np.multiply, 1e-4))  # picklable prefill
    levels = ("line", "token")
    for oracle, param in (("covmax", None), ("token_oracle", 4), ("optimal", cost)):
        serial = span_frames.parallel_span_frame(oracle_cases, levels if oracle != "token_oracle" else ("token",),
                                                   oracle, param, directives, SERIAL)
        two = span_frames.parallel_span_frame(oracle_cases, levels if oracle != "token_oracle" else ("token",),
                                                oracle, param, directives, TWO)
        assert serial.height > 0
        assert parquet_bytes(two) == parquet_bytes(serial), oracle


def test_perturbation_byte_identical(qwen, tables):
    _, _, joined = tables
    cases = perturb_stage.perturb_cases(joined, qwen, ("line", "token"))
    base = dict(tokenizer="qwen2.5", levels=("line", "token"), framings=("body",), kinds=("start", "end"),
                rates=(0.0, 0.5, 1.0), seeds=(0, 1), definitions=("strict",))
    serial = perturb_stage.perturbation_results(cases, perturb_stage.PerturbSettings(**base, parallel=SERIAL, shard_cases=2000), "strict")
    two = perturb_stage.perturbation_results(cases, perturb_stage.PerturbSettings(**base, parallel=TWO, shard_cases=2000), "strict")
    assert serial.height == len(cases) * 2 * 3 * 2
    assert parquet_bytes(two) == parquet_bytes(serial)


@pytest.mark.parametrize("bad", [
    dict(n_jobs=0), dict(n_jobs=-2), dict(n_jobs=True), dict(n_jobs="2"), dict(backend="spark"),
    dict(chunks_per_job=0),
])
def test_bad_parallel_settings_are_named(bad):
    with pytest.raises(ParamsError, match="parallel"):
        check_parallel(ParallelSettings(**{"n_jobs": 2, "backend": "loky", "chunks_per_job": 4, "address": "", **bad}))


def test_cluster_backend_names_the_extra(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    for backend in ("dask", "ray"):
        with pytest.raises(ParamsError, match=r"\[cluster\]"):
            check_parallel(ParallelSettings(n_jobs=2, backend=backend, chunks_per_job=4, address=""))
    # without the package check (e.g. a cluster launcher validating a params file) the name is accepted
    assert check_parallel(ParallelSettings(n_jobs=2, backend="dask", chunks_per_job=4, address=""), need_packages=False).backend == "dask"


def test_parallel_params_have_no_default_in_code():
    with pytest.raises(ParamsError, match="missing 'parallel.n_jobs'"):
        parallel_settings({})
    with pytest.raises(ParamsError, match="missing 'parallel.chunks_per_job'"):
        parallel_settings({"parallel": {"n_jobs": 2, "backend": "threading"}})
    two = {"n_jobs": 2, "backend": "threading", "chunks_per_job": 4, "address": ""}
    assert parallel_settings({"parallel": two}) == ParallelSettings(2, "threading", 4, "")
    with pytest.raises(ParamsError, match="n_jobs"):
        parallel_settings({"parallel": {**two, "n_jobs": 0}})


def test_tokenizer_travels_to_workers_as_its_spec(qwen):
    import pickle

    data = pickle.dumps(qwen)
    assert len(data) < 1000  # the spec, not the vocabulary
    again = pickle.loads(data)
    text = "def f(x):\n    return x + 1  # caf\u00e9\n"
    assert again.encode(text).ids == qwen.encode(text).ids
