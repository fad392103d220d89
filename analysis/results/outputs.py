"""Reading the stages' outputs back for the reports: committed tables and metrics under reports/,
parquet outputs under data/, the fitted latency model; each absent file is a ParamsError that names
the command that writes it. `pick` and `pick_framing` filter a table the way a notebook parameter does."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from analysis.errors import CorpusError, MissingOutputError, ParamsError
from analysis.layout import CASES, LATENCY_MODEL, METRICS, TABLES
from analysis.pooling import framing_filter, framing_view, is_single_framing
from analysis.pipeline.io import read_parquet

BOUNDS_COLUMNS = ("kernel_source", "pooling", "extrapolated_spans")


def table(name: str, root: Path = TABLES, infer_all_rows: bool = False) -> pl.DataFrame:
    """The report table `name` (reports/tables/<name>.csv); an absent one is a MissingOutputError."""
    found = optional_table(name, root, infer_all_rows)
    if found is None:
        raise MissingOutputError(f"{Path(root) / f'{name}.csv'} not found; run `dvc repro` first")
    return found


def optional_table(name: str, root: Path = TABLES, infer_all_rows: bool = False) -> pl.DataFrame | None:
    """The report table `name`, or None when no stage wrote it (an optional stage not run). A table with
    no rows and no columns (e.g. no paper corpora) is an empty frame. `infer_all_rows` reads every row
    before choosing a column's type (a column empty in its first rows)."""
    path = Path(root) / f"{name}.csv"
    if not path.is_file():
        return None
    try:
        return pl.read_csv(path, infer_schema_length=None if infer_all_rows else 100)
    except pl.exceptions.NoDataError:
        return pl.DataFrame()


def metrics(name: str, root: Path = METRICS) -> dict:
    path = Path(root) / f"{name}.json"
    if not path.is_file():
        raise ParamsError(f"{path} not found; run `dvc repro` first")
    return json.loads(path.read_text())


def read_parquet_output(path: Path, stage: str) -> pl.DataFrame:
    """A stage's parquet output (data/...), or a ParamsError naming the stage that writes it."""
    return read_parquet(path, stage, ParamsError)


def latency_model(path: Path = LATENCY_MODEL) -> dict:
    if not Path(path).is_file():
        raise ParamsError(f"{path} not found; run `copydecode kernels fit` first")
    return json.loads(Path(path).read_text())


def bounds_frame(tables: Path = TABLES) -> pl.DataFrame:
    """reports/tables/bounds.csv, checked for the kernel-source format (kernel_source, pooling)."""
    frame = table("bounds", tables)
    missing = [c for c in BOUNDS_COLUMNS if c not in frame.columns]
    if missing:
        raise ParamsError(f"{Path(tables) / 'bounds.csv'} has no {', '.join(missing)} column(s): it predates kernel "
                          "sources; rerun `copydecode bounds`")
    return frame


def pick(frame: pl.DataFrame, **filters) -> pl.DataFrame:
    """Filter on each given column; 'all' (or None) keeps everything; an unknown value is an error."""
    for column, value in filters.items():
        if value in (None, "all"):
            continue
        known = sorted(set(frame[column].cast(pl.String).to_list()))
        if str(value) not in known:
            raise ParamsError(f"unknown {column} {value!r}; known: {', '.join(known)}")
        frame = frame.filter(pl.col(column).cast(pl.String) == str(value))
    return frame


def pick_framing(frame: pl.DataFrame, framing: str) -> pl.DataFrame:
    """A framing's rows plus the single-framing corpora (the pooling rule of analysis.pooling)."""
    if framing in (None, "all"):
        return frame
    known = set(frame["framing"].to_list())
    # a run of single-framing corpora only (a user's pairs, commits) joins every framing's view
    if framing not in known and not (known and all(is_single_framing(f) for f in known)):
        raise ParamsError(f"unknown framing {framing!r}; known: {', '.join(sorted(known))}")
    return frame.filter(framing_filter(framing))


def pick_view(frame: pl.DataFrame, framing: str) -> pl.DataFrame:
    """`pick_framing`, keeping only the framing's own pooled rows (analysis.pooling.framing_view)."""
    if framing in (None, "all"):
        return frame
    return pick_framing(frame, framing).filter(framing_view(framing))


def require_outputs(stage: str) -> None:
    """`headline` and `reports` summarise other stages' outputs: on a root that holds none (no cases
    table, no report table) there is nothing to report, which is an error, not an empty success."""
    if not CASES.is_file() and not any(TABLES.glob("*.csv")):
        raise CorpusError(f"nothing to report: this output root holds no stage output (no {CASES}, no {TABLES}/*.csv); "
                          f"run `copydecode corpora` and the stages after it before `copydecode {stage}`")
