"""Bounded memory (analysis.parallel.shards): shard reads and writes, the merge of programs with cases, and the
per-case stages giving the same outputs for any shard size."""

import json
from pathlib import Path

import polars as pl
import pytest
import yaml
from fixtures import params_with

from analysis.cli import main
from analysis.pipeline.digest import recorded_inputs
from analysis.errors import CorpusError, ParamsError
from analysis.layout import PERTURB_RESULTS
from analysis.parallel.shards import ShardWriter, iter_frames, iter_joined_programs, shard_cases

SCHEMA = {"case_id": pl.String, "framing": pl.String, "n": pl.Int64}


def numbered(n: int, start: int = 0) -> pl.DataFrame:
    return pl.DataFrame({"case_id": [f"c{i:03d}" for i in range(start, start + n)], "framing": ["body"] * n,
                         "n": list(range(start, start + n))}, schema=SCHEMA)


def test_writer_appends_shards_and_reader_returns_them_in_order(tmp_path):
    path = tmp_path / "t.parquet"
    with ShardWriter(path, SCHEMA, metadata={"copydecode.inputs": json.dumps({"x": "abc"})}) as out:
        for start in range(0, 10, 4):
            out.write(numbered(min(4, 10 - start), start))
        out.write(numbered(0))  # an empty shard adds nothing
    assert out.rows == 10
    assert pl.read_parquet(path).equals(numbered(10))
    assert recorded_inputs(path) == {"x": "abc"}
    frames = list(iter_frames(path, 3))
    assert [f.height for f in frames] == [3, 3, 3, 1]
    assert pl.concat(frames).equals(numbered(10))
    assert list(iter_frames(path, 3, ["n"]))[1]["n"].to_list() == [3, 4, 5]


def test_writer_is_atomic_and_checks_columns(tmp_path):
    path = tmp_path / "t.parquet"
    with pytest.raises(ValueError, match="shard columns"):
        with ShardWriter(path, SCHEMA) as out:
            out.write(numbered(2).select("n", "case_id", "framing"))
    assert not path.exists() and not list(tmp_path.iterdir())  # no partial file, no temporary left
    with ShardWriter(path, SCHEMA):
        pass
    assert pl.read_parquet(path).height == 0 and pl.read_parquet(path).schema == pl.Schema(SCHEMA)


def write(frame: pl.DataFrame, path, rows: int):
    with ShardWriter(path, dict(frame.schema), row_group_rows=rows) as out:
        out.write(frame)
    return path


@pytest.fixture()
def files(tmp_path):
    cases = pl.DataFrame({"case_id": [f"k{i}" for i in range(7)] + ["k0"], "framing": ["body"] * 7 + ["decl"],
                          "source": [f"s{i}" for i in range(8)], "target": [f"t{i}" for i in range(8)]})
    programs = pl.DataFrame([{"case_id": c, "framing": f, "level": lv, "program": f"{c}/{f}/{lv}"}
                             for c, f in zip(cases["case_id"], cases["framing"]) if c != "k4"  # k4: no program
                             for lv in ("line", "token")])
    return write(cases, tmp_path / "cases.parquet", 2), write(programs, tmp_path / "programs.parquet", 3), cases, programs


@pytest.mark.parametrize("shard", [1, 2, 3, 5, 100])
def test_joined_shards_are_the_whole_join_in_order(files, shard):
    cases_path, programs_path, cases, programs = files
    whole = programs.join(cases, on=["case_id", "framing"], how="left", validate="m:1")
    parts = list(iter_joined_programs(cases_path, programs_path, shard))
    assert pl.concat(parts).equals(whole)
    assert all(p.select("case_id", "framing").unique().height <= shard for p in parts)  # bounded by the shard


def test_an_orphan_or_reordered_program_is_named(files, tmp_path):
    cases_path, _, cases, programs = files
    orphan = write(pl.concat([programs, programs.head(1).with_columns(case_id=pl.lit("ghost"))]),
                   tmp_path / "orphan.parquet", 3)
    with pytest.raises(CorpusError, match="not in its order.*'ghost'.*rerun `copydecode programs`"):
        list(iter_joined_programs(cases_path, orphan, 2))
    reordered = write(pl.concat([programs.tail(2), programs.head(programs.height - 2)]), tmp_path / "r.parquet", 3)
    with pytest.raises(CorpusError, match="not in its order"):
        list(iter_joined_programs(cases_path, reordered, 2))


def test_shard_size_param_is_checked():
    with pytest.raises(ParamsError, match="missing 'parallel.shard_cases'"):
        shard_cases({})  # no default in code: params.yaml is its one source
    assert shard_cases({"parallel": {"shard_cases": 3}}) == 3
    for bad in (0, -1, True, "2", 1.5):
        with pytest.raises(ParamsError, match="shard_cases"):
            shard_cases({"parallel": {"shard_cases": bad}})


def test_an_unreadable_file_is_a_named_error(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet")
    with pytest.raises(CorpusError, match="bad.parquet: not a readable parquet file"):
        list(iter_frames(bad, 2))


OUTPUTS = ("data/corpora/cases.parquet", "data/programs/programs.parquet", "data/spans/spans.parquet",
           "data/spans/coverage_per_case.parquet", str(PERTURB_RESULTS))
TABLES = ("coverage", "span_histogram", "line_boundaries_inside_tokens", "optimal", "min_copy_sweep", "perturbation",
          "perturbation_crossing")
METRICS = ("corpora", "roundtrip", "coverage", "optimal", "perturbation")
STAGES = ("corpora", "programs", "roundtrip", "spans", "optimal", "perturb")


@pytest.mark.slow
def test_stages_give_the_same_outputs_for_any_shard_size(tmp_path, monkeypatch, hep_dir):
    """corpora -> programs -> roundtrip -> spans -> optimal -> perturb with 7-case shards (every file in
    many row groups), with one shard, and with 60-case shards on 2 joblib workers: the same tables, parquet
    contents and metrics."""
    from fixtures import SCRATCH_STAGE_PARAMS as SMALL
    from fixtures import one_context_model, write_model

    results = {}
    for shard, jobs in ((7, 1), (5000, 1), (60, 2)):
        folder = tmp_path / f"shard{shard}"
        folder.mkdir()
        monkeypatch.chdir(folder)
        (folder / "params.yaml").write_text(yaml.safe_dump(params_with(**{
            **SMALL, "corpora.humanevalpack.framings": ["body", "decl"], "corpora.humanevalpack.local_dir": str(hep_dir),
            "spans.bootstrap_resamples": 20, "optimal.kernel_sources": ["fit"], "optimal.min_copies": [1, 4],
            "parallel.shard_cases": shard, "parallel.n_jobs": jobs})))
        write_model(folder, one_context_model())
        for stage in STAGES:
            assert main(["--params", "params.yaml", stage]) == 0, (shard, stage)
        results[shard] = folder
    one = results[5000]
    assert pl.read_parquet_metadata(results[7] / OUTPUTS[1]).get("copydecode.inputs") is not None
    assert len(pl.read_parquet(one / OUTPUTS[0]).filter(pl.col("framing") == "decl")) == 164
    for other in (results[7], results[60]):
        for name in OUTPUTS:
            assert pl.read_parquet(other / name).equals(pl.read_parquet(one / name)), (other.name, name)
        for name in TABLES:
            for suffix in (".csv", ".md"):
                path = f"reports/tables/{name}{suffix}"
                assert (other / path).read_bytes() == (one / path).read_bytes(), (other.name, path)
        for name in METRICS:
            path = f"reports/metrics/{name}.json"
            assert (other / path).read_text() == (one / path).read_text(), (other.name, path)


def test_spill_keeps_frames_on_disk_and_reads_them_back_identically():
    from analysis.parallel.shards import Spill

    parts = [pl.DataFrame({"case_id": ["a", "b"], "copied": [1, 2], "share": [0.5, None]},
                          schema={"case_id": pl.String, "copied": pl.UInt32, "share": pl.Float64}),
             pl.DataFrame({"case_id": ["c"], "copied": [7], "share": [1.25]},
                          schema={"case_id": pl.String, "copied": pl.UInt32, "share": pl.Float64})]
    with Spill() as spill:
        scans = [spill.put(p) for p in parts]
        assert all(isinstance(s, pl.LazyFrame) for s in scans)  # nothing held in memory
        folder = Path(spill._dir.name)
        assert len(list(folder.glob("*.parquet"))) == 2
        back = Spill.concat(scans)
        assert back.schema == parts[0].schema and back.equals(pl.concat(parts))
        assert Spill.concat([parts[0]]).equals(parts[0])
    assert not folder.exists()  # removed with the stage
