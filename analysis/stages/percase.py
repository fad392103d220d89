"""`copydecode percase`: the run's per-case tables, committed under reports/percase/ (analysis.results.percase).

Each per-case output under data/ that this run has is rewritten, recompressed (zstd, params
`percase.compression_level`), to reports/percase/<name>.parquet; samples.jsonl holds one line per case
and method; manifest.json says what each copy was built from (the sha256 of its data/ file), its rows
and bytes, and which tables this run did not have. A table the run lacks (a one-off run without e2e or
the pilot) is listed as absent, and its old copy removed, so the folder never mixes two runs.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import polars as pl

from analysis.errors import CorpusError, ParamsError
from analysis.layout import PERCASE_MANIFEST, SAMPLES
from analysis.parallel.progress import timed
from analysis.pipeline.digest import file_digest
from analysis.pipeline.io import read_parquet, remove_output, write_json, write_text, write_with
from analysis.pipeline.params import get, known_keys
from analysis.results.percase import TABLES, rivals_sample_lines, sample_lines

ZSTD_LEVELS = range(1, 23)


@dataclass(frozen=True)
class PerCaseSettings:
    compression_level: int  # zstd level of the committed copies (1-22; higher is smaller and slower)


# `copydecode percase`: its help line and what it reads and writes (the CLI's --help)
HELP = ("copy the run's per-case tables into reports/percase/ (committed), with samples.jsonl: one line per case "
        "and method")
READS_WRITES = ("reads the per-case outputs under data/ (cases, programs, spans, coverage, case costs, "
                "perturbation, e2e measurements, pilot records, the rivals' priced methods; any may be absent); writes "
                "reports/percase/*.parquet, reports/percase/samples.jsonl and reports/percase/manifest.json")


def settings(params: dict) -> PerCaseSettings:
    known_keys(params, "percase", ["compression_level"])
    level = get(params, "percase.compression_level", int)
    if isinstance(level, bool) or level not in ZSTD_LEVELS:
        raise ParamsError(f"params: 'percase.compression_level' must be a zstd level 1-22, got {level!r}")
    return PerCaseSettings(level)


def _unique(frame: pl.DataFrame, keys: tuple[str, ...], name: str) -> None:
    """A copy whose key columns do not identify its rows would pair wrongly in `compare`: refused here."""
    missing = [k for k in keys if k not in frame.columns]
    if missing:
        raise CorpusError(f"{name}: the per-case table lacks its key column(s) {missing}")
    dup = frame.group_by(list(keys)).len().filter(pl.col("len") > 1)
    if dup.height:
        raise CorpusError(f"{name}: {dup.height} duplicate rows on {list(keys)}, e.g. {dup.row(0, named=True)}")


def compact_parquet(frame: pl.DataFrame, level: int) -> bytes:
    """The table as parquet bytes, zstd at `level`, no column statistics (nothing reads them here)."""
    buffer = io.BytesIO()
    frame.write_parquet(buffer, compression="zstd", compression_level=level, statistics=False)
    return buffer.getvalue()


def run(s: PerCaseSettings) -> dict:
    present = [t for t in TABLES if t.source.is_file()]
    if not any(t.name == "cases" for t in present):
        raise CorpusError(f"nothing to copy: no {TABLES[0].source}; run `copydecode corpora` and the stages after "
                          "it before `copydecode percase`")
    with timed("percase"):
        frames, manifest = {}, {"tables": {}, "absent": []}
        for table in TABLES:
            if table not in present:
                remove_output(table.committed)
                manifest["absent"].append({"table": table.name, "source": str(table.source), "stage": table.stage})
                continue
            frame = read_parquet(table.source, f"copydecode {table.stage}", CorpusError)
            _unique(frame, table.keys, str(table.source))
            frames[table.name] = frame
            data = compact_parquet(frame, s.compression_level)
            write_with(lambda tmp, d=data: tmp.write_bytes(d), table.committed)
            manifest["tables"][table.name] = {
                "path": str(table.committed), "source": str(table.source), "source_sha256": file_digest(table.source),
                "rows": frame.height, "columns": frame.columns, "bytes": len(data)}
        lines = sample_lines(frames)
        if "rivals" in frames:  # the head-to-head per case: its own lines (analysis.rivals.table)
            lines += rivals_sample_lines(frames["rivals"])
        text = "\n".join(lines) + ("\n" if lines else "")
        write_text(text, SAMPLES)
        manifest["samples"] = {"path": str(SAMPLES), "lines": len(lines), "bytes": len(text.encode("utf-8"))}
        manifest["bytes"] = sum(t["bytes"] for t in manifest["tables"].values()) + manifest["samples"]["bytes"]
        write_json(manifest, PERCASE_MANIFEST)
    return {"tables": len(frames), "samples": len(lines), "megabytes": round(manifest["bytes"] / 1e6, 2)}
