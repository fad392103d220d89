"""The forwards table (shared interface 1): its schema and every row checked, named errors otherwise."""

import polars as pl
import pytest
from fixtures import forwards_frame

from analysis.serving.forwards import ForwardsError, check_forwards, read_forwards, traces


def test_the_fixture_is_a_valid_table_and_becomes_traces():
    frame = check_forwards(forwards_frame(4))
    found = traces(frame)
    assert len(found) == 4 * 4
    ar = found[("case/1", "ar")]
    assert ar.new_tokens == (1,) * ar.gold_tokens and ar.output_tokens == ar.gold_tokens
    copy = found[("case/1", "copy-line-decoded")]
    assert max(copy.new_tokens) == 20 and copy.output_tokens == copy.gold_tokens


@pytest.mark.parametrize("change, message", [
    (lambda f: f.drop("emitted"), "missing columns"),
    (lambda f: f.with_columns(emitted=pl.col("emitted").list.slice(1)), "different lengths"),
    (lambda f: f.with_columns(new_tokens=pl.col("new_tokens").list.eval(pl.element() * 0)), "appends no token"),
    (lambda f: f.with_columns(prompt_tokens=pl.lit(-1)), "negative prompt_tokens"),
    (lambda f: f.with_columns(emitted=pl.col("emitted").list.eval(pl.element() * 0)), "emits no output token"),
    (lambda f: pl.concat([f, f.head(1)]), "appear twice"),
    (lambda f: f.head(0), "no rows"),
    (lambda f: f.with_columns(gold_tokens=pl.lit("many")), "does not have its type"),
])
def test_a_bad_table_is_a_named_error(change, message):
    with pytest.raises(ForwardsError, match=message):
        check_forwards(change(forwards_frame(2)))


def test_a_missing_or_foreign_file_names_the_stage_that_writes_it(tmp_path):
    with pytest.raises(ForwardsError, match="rivals stage writes it"):
        read_forwards(tmp_path / "forwards.parquet")
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(ForwardsError, match="not a readable parquet"):
        read_forwards(tmp_path / "bad.parquet")
