"""The headline metrics (`copydecode headline`): the only dvc metrics, a few dozen figures that
`dvc metrics show` prints as one grid (rows = measures, columns = corpora), generic over the kernel
sources, models and corpora the tables hold."""

from __future__ import annotations

import json
from pathlib import Path
import os
import re
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest
import yaml
from fixtures import ROOT

from analysis.claims.engine import claims
from analysis.claims.verdict import DIFFERS, NOT_AT_SCALE, NOT_COMPARABLE, REPRODUCED
from analysis.errors import ParamsError
from analysis.present.headline import (
    claims_summary,
    CORPUS_KEYS,
    HEADLINE_DIR,
    HeadlineSettings,
    bound_rows,
    build_headline,
    POOL_ALL_SUFFIX,
    corpus_key,
    em_rows,
    cpu_family,
    kernel_rows,
    source_key,
    write_headline,
)
from analysis.layout import METRICS, TABLES
from analysis.pooling import POOLED

# Every row is one of these measures; <source>/<model>/<context> vary with the tables.
# Every name ends in its unit (P8): `_x` a ratio, `_pct` a share in percent, `_n` a count (flags and the machine's
# name carry none).
ROW_PATTERNS = (
    r"cov_(line|token)(_all)?_pct",
    r"bound_[a-z0-9.-]+_(ideal|dir)_x",
    r"kernel_[a-z0-9.-]+(_c\d+)?_x",
    r"em_(line|token)(_all)?_pct",
    r"e2e_[a-z0-9.-]+_((linedec|tokdec|line|token|pld|suffix)_x|cases_n)",
    r"e2ew_[a-z0-9.-]+_((linedec|tokdec|line|token|pld|suffix)_x|cases_n)",
    r"pilot(_held)?_(before|after)_pct",
    r"roundtrip_fail_n",
    r"noisy_(kernel|e2e|e2ew)",
    r"machine(_cores_n)?",
    r"sv_[a-z0-9.-]+_c\d+r?_x",
    r"rivals_best_ratio(_all)?_x",
)
MAX_PATH = 40  # `metrics/<row>.json`: with the 8 value columns, `dvc metrics show` is 110 characters wide
KERNEL_KEYS = {"n008", "n512"}
MAX_FIGURES = 300  # a bounded grid: this repository's outputs give about 275 (the field's two benchmarks add a column
# to each per-corpus row; H200 kernel sources add bound and kernel
# rows; the frozen e2e-wide run seven e2ew_ rows and its noise flag of two pools; batched serving 30: 5 sources x 3 concurrencies x 2;
# the head-to-head at batch 1: 7)


def _committed_headline():
    return build_headline(HeadlineSettings(), ["fit", "paper"], ROOT / TABLES, ROOT / METRICS)


def test_headline_key_set_and_size_from_the_committed_outputs():
    head = _committed_headline()
    assert head.missing == []
    stems = set(head.rows)
    for stem in stems:
        assert any(re.fullmatch(p, stem) for p in ROW_PATTERNS), f"unexpected headline row {stem!r}"
    # every measure the issue asks for is there
    for needed in ("cov_line_pct", "bound_fit_ideal_x", "bound_fit_dir_x", "bound_paper_ideal_x", "bound_paper_dir_x",
                   "kernel_paper_x", "em_line_pct", "pilot_before_pct", "pilot_after_pct", "roundtrip_fail_n"):
        assert needed in stems
    assert any(s.startswith("kernel_fit_c") for s in stems)
    assert any(re.fullmatch(r"e2e_.+_line_x", s) for s in stems) and any(re.fullmatch(r"e2e_.+_token_x", s) for s in stems)
    columns = set().union(*(set(v) for v in head.rows.values()))
    assert columns <= set(CORPUS_KEYS.values()) | KERNEL_KEYS, columns
    assert {"hepy", "hejs", "click", "express", "probe", "pooled"} <= columns
    figures = sum(len(v) for v in head.rows.values())
    assert 30 <= figures <= MAX_FIGURES
    assert all(isinstance(x, (int, float)) and not isinstance(x, bool)
               for stem, v in head.rows.items() if stem != "machine" for x in v.values())
    assert isinstance(head.rows["machine"]["pooled"], str)


def test_headline_figures_are_the_tables_figures_and_pooled_means_the_papers_corpora():
    head = _committed_headline()
    paper_pool = pl.read_csv(ROOT / TABLES / "bounds_paper_pool.csv", infer_schema_length=None).filter(
        (pl.col("kernel_source") == "fit") & (pl.col("level") == "line") & (pl.col("variant") == "ideal")
        & (pl.col("framing") == "body") & (pl.col("pooling") == "ratio_of_sums"))
    assert paper_pool["n_cases"][0] == 482
    assert head.rows["bound_fit_ideal_x"]["pooled"] == round(paper_pool["bound"][0], 2)
    cov = pl.read_csv(ROOT / TABLES / "coverage.csv").filter(
        (pl.col("level") == "line") & pl.col("framing").is_in(["body", "unit"])
        & pl.col("corpus").is_in(["HEvalFix-Py", "HEvalFix-JS", "ProbeEdit-S"]))
    assert cov.height == 3  # summed copied over summed gold tokens of the paper's three corpora, by hand
    assert head.rows["cov_line_pct"]["pooled"] == round(100 * cov["copied_tokens"].sum() / cov["gold_tokens"].sum(), 1)
    everything = pl.read_csv(ROOT / TABLES / "coverage.csv").filter(
        (pl.col("level") == "line") & (pl.col("framing") == "body") & (pl.col("corpus") == "pooled"))
    assert head.rows[f"cov_line{POOL_ALL_SUFFIX}_pct"] == {"pooled": round(100 * everything["coverage"][0], 1)}
    assert head.rows["roundtrip_fail_n"] == {
        "pooled": json.loads((ROOT / METRICS / "roundtrip.json").read_text())["failed"]}


def test_the_paper_kernel_row_is_the_log_log_line_through_the_papers_two_points():
    """Between its two points the paper kernel is a power law: at N=64, halfway in log N from 8 to 512, the
    ratio is the geometric mean of 6.8x and 303x (hand-computed: 45.392); not the paper's own points read back."""
    head = build_headline(HeadlineSettings(kernel_ns=(8, 64, 512), decimals=3), ["paper"], ROOT / TABLES, ROOT / METRICS)
    assert head.rows["kernel_paper_x"]["n064"] == pytest.approx((6.8 * 303.0) ** 0.5, abs=1e-3) == pytest.approx(45.392, abs=1e-3)


def test_committed_headline_files_match_a_fresh_build():
    """The committed metrics/ is what the stage writes from the committed tables."""
    assert (ROOT / HEADLINE_DIR).is_dir(), f"no committed {HEADLINE_DIR}/: `dvc repro headline` writes it"
    head = _committed_headline()
    on_disk = {p.stem: json.loads(p.read_text()) for p in (ROOT / HEADLINE_DIR).glob("*.json")}
    assert on_disk == head.rows


def test_em_rows_pool_the_papers_corpora_and_label_every_corpus_pool():
    rows = []
    for corpus, framing, n, em in (("HEvalFix-Py", "body", 164, 0.2), ("HEvalFix-JS", "body", 164, 0.0),
                                   ("HEvalFix-Py", "decl", 164, 0.9), ("ProbeEdit-S", "unit", 154, 0.0),
                                   ("CommitEdits-click", "file", 600, 0.0), ("pooled", "body", 1082, 0.0303)):
        rows.append({"level": "line", "kind": "both", "rate": 1.0, "corpus": corpus, "framing": framing,
                     "em": em, "n_cases": n})
    out = em_rows(pl.DataFrame(rows), HeadlineSettings())
    assert out["em_line_pct"]["pooled"] == round(100 * 164 * 0.2 / 482, 1) == 6.8  # the paper's three corpora, 482 cases
    assert out[f"em_line{POOL_ALL_SUFFIX}_pct"] == {"pooled": 3.0} and out["em_line_pct"]["hepy"] == 20.0
    assert set(out["em_line_pct"]) == {"hepy", "hejs", "probe", "click", "pooled"}  # no extra column


def test_bound_rows_are_generic_over_kernel_sources():
    rows = []
    for source in ("fit", "h200/qwen2.5-7b/eager"):
        for variant in ("ideal", "overhead"):
            for corpus, framing in (("HEvalFix-Py", "body"), ("HEvalFix-Py", "decl"), ("Mine", "pair"), ("pooled", "body")):
                rows.append({"level": "line", "corpus": corpus, "framing": framing, "variant": variant,
                             "kernel_source": source, "bound": 2.0 if framing == "decl" else 3.14159,
                             "pooling": "ratio_of_sums" if corpus == "pooled" else "corpus"})
    out = bound_rows(pl.DataFrame(rows), HeadlineSettings(decimals=3))
    assert set(out) == {"bound_fit_ideal_x", "bound_fit_dir_x", "bound_h200-q7b_ideal_x", "bound_h200-q7b_dir_x"}
    # the table's pool holds "Mine", which the paper does not: `pooled` is the paper's pool, absent here
    assert out["bound_h200-q7b_dir_x"] == {"hepy": 3.142, "mine": 3.142}
    paper = pl.DataFrame([{"level": "line", "corpus": "pooled", "framing": "body", "variant": "overhead",
                           "kernel_source": "h200/qwen2.5-7b/eager", "bound": 1.5, "pooling": "ratio_of_sums",
                           "pool": "paper"}])
    assert bound_rows(pl.DataFrame(rows), HeadlineSettings(), paper)["bound_h200-q7b_dir_x"]["pooled"] == 1.5
    only_paper = [r for r in rows if r["corpus"] != "Mine"]  # then the table's own pool is the paper's
    assert bound_rows(pl.DataFrame(only_paper), HeadlineSettings())["bound_h200-q7b_dir_x"]["pooled"] == 3.14


def test_kernel_rows_per_source_and_context():
    frame = pl.DataFrame({"kernel_source": ["fit"] * 4 + ["h200/qwen2.5-7b/eager"] * 2,
                          "model": ["m"] * 4 + ["qwen2.5-7b"] * 2, "context": [256, 256, 2048, 2048, 256, 256],
                          "n": [8, 512, 8, 512, 8, 512], "speedup": [4.0, 15.0, 3.9, 15.3, 7.1, 250.0],
                          "is_strongest": [True] * 6})
    out = kernel_rows(frame, ["fit"], HeadlineSettings())
    # contexts zero-padded to the widest (P8): c0256 sorts before c2048, as DVC sorts rows by name
    assert out == {"kernel_fit_c0256_x": {"n008": 4.0, "n512": 15.0}, "kernel_fit_c2048_x": {"n008": 3.9, "n512": 15.3},
                   "kernel_h200-q7b_c0256_x": {"n008": 7.1, "n512": 250.0}}
    assert list(out) == sorted(out)


def test_absent_inputs_are_named_and_stale_files_removed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the row files are one output set inside the output root
    tables, metrics = tmp_path / "tables", tmp_path / "metrics"
    tables.mkdir()
    shutil.copy(ROOT / TABLES / "coverage.csv", tables / "coverage.csv")
    head = build_headline(HeadlineSettings(), [], tables, metrics, tmp_path / "frozen")
    assert set(head.rows) == {"cov_line_pct", "cov_token_pct", "cov_line_all_pct", "cov_token_all_pct"}
    assert str(tables / "bounds.csv") in head.missing and str(metrics / "roundtrip.json") in head.missing
    out = tmp_path / "headline"
    out.mkdir()
    (out / "bound_old-source_ideal.json").write_text("{}")
    written = write_headline(head, out)
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in written) == [
        "cov_line_all_pct.json", "cov_line_pct.json", "cov_token_all_pct.json", "cov_token_pct.json"]


@pytest.mark.parametrize("bad", [{"kernel_ns": []}, {"kernel_ns": [8, -1]}, {"perturb_rate": 2}, {"decimals": "3"},
                                 {"decimals": 9}, {"framing": ""}, {"kernal_ns": [8]}])
def test_bad_headline_settings_are_named_errors(bad):
    from fixtures import params_with

    from analysis.stages.headline import settings

    key = next(iter(bad))
    with pytest.raises(ParamsError, match=f"'headline.{key}'"):
        settings(params_with(**{f"headline.{key}": bad[key]}))


def test_metric_paths_are_short_enough_for_120_columns():
    """Every row's path from the committed tables fits `dvc metrics show` in 120 columns (they were
    up to 78 characters: reports/metrics/headline/kernel_h200-qwen2.5-1.5b-static-compiled_c2048.json)."""
    head = _committed_headline()
    paths = [f"{HEADLINE_DIR}/{stem}.json" for stem in head.rows]
    assert max(len(p) for p in paths) <= MAX_PATH, max(paths, key=len)
    assert source_key("h200/qwen2.5-1.5b/static_compiled") == "h200-q1.5b-sc"
    assert source_key("h200/qwen2.5-7b/eager") == "h200-q7b" and source_key("fit") == "fit"
    assert source_key("h200-devtime/qwen2.5-1.5b") == "h200dt-q1.5b"
    assert source_key("gpu/My Model/static") == "gpu-my-model-st"
    assert source_key("llama-3.2-1b-cuda/llama-3.2-1b/eager") == "llama-3.2-1b-cuda"  # the model is not repeated


def test_headline_carries_the_runs_noise_flags_and_machine(tmp_path):
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    (metrics / "kernels.json").write_text(json.dumps({"run_environment": {
        "noisy": False, "machine": {"cpu_model": "Intel(R) Xeon(R) Platinum 8480+", "logical_cores": 8}}}))
    (metrics / "e2e.json").write_text(json.dumps({"environment": {"noisy": True, "cpu_model": "x"}}))
    head = build_headline(HeadlineSettings(), [], tmp_path / "tables", metrics)
    assert head.rows["noisy_kernel"] == {"pooled": 0} and head.rows["noisy_e2e"] == {"pooled": 1}
    assert head.rows["machine"] == {"pooled": "Xeon"} and head.rows["machine_cores_n"] == {"pooled": 8}
    (metrics / "kernels.json").unlink()
    head = build_headline(HeadlineSettings(), [], tmp_path / "tables", metrics)
    assert "noisy_kernel" not in head.rows and head.rows["machine"] == {"pooled": "x"}
    assert str(metrics / "kernels.json") in head.missing
    assert cpu_family("AMD EPYC 7763 64-Core Processor") == "EPYC" and cpu_family("aarch64") == "aarch64"
    committed = _committed_headline()
    assert {"noisy_kernel", "noisy_e2e", "machine"} <= set(committed.rows)


def test_corpus_keys_are_short_and_a_users_corpus_gets_a_slug():
    assert corpus_key("HEvalFix-Py") == "hepy" and corpus_key("My Edits/2") == "my-edits-2"
    assert max(len(k) for k in CORPUS_KEYS.values()) <= 8


def test_only_the_headline_files_are_dvc_metrics():
    dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    declared = [next(iter(m)) if isinstance(m, dict) else m
                for stage in dvc["stages"].values() for m in stage.get("metrics", [])]
    assert declared == [str(HEADLINE_DIR)]
    assert "metrics" not in dvc or dvc["metrics"] == []


def _committed_metrics_repo(dest: Path) -> Path:
    """A scratch git repository holding dvc.yaml, .dvc/config and the headline rows as the headline stage
    builds them now from the tables and metrics committed at HEAD (with HEAD's params): the grid the committed
    outputs give under this code. Not the committed metrics/ files (stale whenever a change renames a row,
    until the next run is committed), nor the workspace's grid (its widths follow the digits of this machine's
    timings: a user's noisy run made an n8 column one character wider, issue 41)."""
    import io
    import tarfile

    from analysis.layout import E2E_FROZEN
    from analysis.stages.headline import settings

    archive = subprocess.run(["git", "archive", "--format=tar", "HEAD", "--", "dvc.yaml", ".dvc/config",
                              "params.yaml", str(TABLES), str(METRICS), str(E2E_FROZEN)],
                             cwd=ROOT, capture_output=True, check=False)
    if archive.returncode != 0:
        pytest.skip(f"no committed tables to build from ({archive.stderr.decode(errors='replace').strip()})")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")
    s = settings(yaml.safe_load((dest / "params.yaml").read_text()))
    head = build_headline(s.chosen, list(s.kernel_sources), dest / TABLES, dest / METRICS, dest / E2E_FROZEN)
    cwd = Path.cwd()
    os.chdir(dest)  # the row files are one output set inside the output root
    try:
        write_headline(head, HEADLINE_DIR)
    finally:
        os.chdir(cwd)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    return dest


# A run's e2e rows carry the HEvalFix pool (`he`), a column the committed e2e table may predate: the grid leaves
# room for it (a ratio column: its name, 2 decimals and the 3-space gap).
E2E_POOL_COLUMN = len("12.34") + 3


def test_dvc_metrics_show_is_one_narrow_grid(tmp_path):
    """P8: within 120 columns, rows and columns in numeric order, built fresh from the committed tables."""
    if not shutil.which("dvc"):
        pytest.skip("dvc not on PATH")
    repo = _committed_metrics_repo(tmp_path)
    out = subprocess.run(["dvc", "metrics", "show"], cwd=repo, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "COLUMNS": "200"})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    reserve = 0 if re.search(r"\she\s", lines[0]) else E2E_POOL_COLUMN
    # 120 characters on the paper's corpora; each further corpus (the field's benchmarks) is one 8-character column
    further = [c for c in lines[0].split()[1:] if c not in {"hepy", "hejs", "click", "express", "probe", "he", "pooled"}
               | KERNEL_KEYS]
    assert max(len(line) for line in lines) + reserve <= 120 + 8 * len(further), (max(len(line) for line in lines),
                                                                                   reserve, further)
    assert len(lines) == 1 + len(list((repo / HEADLINE_DIR).glob("*.json")))
    assert any(line.startswith(f"{HEADLINE_DIR}/bound_fit_ideal_x.json") for line in lines)
    columns = lines[0].split()[1:]
    assert "n008" in columns and "n512" in columns and "n8" not in columns and "held" not in columns
    kernel_rows = [line.split()[0] for line in lines if line.startswith(f"{HEADLINE_DIR}/kernel_fit_c")]
    contexts = [int(re.search(r"_c(\d+)_x", row).group(1)) for row in kernel_rows]
    assert len(contexts) >= 2 and contexts == sorted(contexts)  # c0256 before c2048: numeric order


def test_readme_documents_the_tested_experiment_commands():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Metrics, plots and experiments"):readme.index("<!-- results:start -->")]
    assert "\ncopydecode experiments " in section and "--drop" not in section  # P9: no hand-written regex
    assert "dvc exp run -S kernel.latency_form=quadratic" in section and "dvc queue start -j 1" in section
    for row in ("cov_line_pct", "bound_<source>_ideal_x", "kernel_<source>_c<context>_x", "em_line_pct",
                "pilot_before_pct", "roundtrip_fail_n"):
        assert f"`{row}`" in section


def test_claims_summary_is_short_and_taken_from_the_other_outputs(tmp_path):
    """reports/metrics/headline.json's figures, built beside the metrics/ rows (one producer)."""
    for folder in (TABLES, METRICS):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    (tmp_path / METRICS / "headline.json").unlink(missing_ok=True)
    head = claims_summary(tmp_path / TABLES, tmp_path / METRICS)
    items = claims(tmp_path / TABLES, tmp_path / METRICS)
    assert head["reproduced"] == sum(c.verdict == REPRODUCED for c in items)
    assert head["differ"] == sum(c.verdict == DIFFERS for c in items)
    assert head["not_reproduced_at_scale"] == sum(c.verdict == NOT_AT_SCALE for c in items)
    assert head["not_comparable"] == sum(c.verdict == NOT_COMPARABLE for c in items)
    cov = pl.read_csv(tmp_path / TABLES / "coverage.csv").filter(
        (pl.col("level") == "line") & pl.col("framing").is_in(["body", "unit"])
        & pl.col("corpus").is_in(["HEvalFix-Py", "HEvalFix-JS", "ProbeEdit-S"]))
    assert head["cov_line_pooled"] == pytest.approx(cov["copied_tokens"].sum() / cov["gold_tokens"].sum(), abs=1e-4)
    bounds = pl.read_csv(tmp_path / TABLES / "bounds_paper_pool.csv", infer_schema_length=None).filter(
        (pl.col("kernel_source") == "paper") & (pl.col("pooling") == "ratio_of_sums")
        & (pl.col("level") == "line") & (pl.col("variant") == "ideal") & (pl.col("framing") == "body"))
    assert bounds["n_cases"][0] == 482 and head["bound_paper_pooled"] == pytest.approx(bounds["bound"][0], abs=0.01)
    # one short row in `dvc metrics show`: flat, few keys
    assert len(head) <= 13 and not any(isinstance(v, (dict, list)) for v in head.values())
    (tmp_path / TABLES / "coverage.csv").unlink()
    assert "cov_line_pooled" not in claims_summary(tmp_path / TABLES, tmp_path / METRICS)


def test_headline_files_are_written_and_removed_as_one_set(tmp_path, monkeypatch):
    """L6: the row files were written one by one and the stale ones then deleted; a failure half way left
    a mix of two runs' figures."""
    import json

    from analysis.pipeline import io
    from analysis.present.headline import Headline, write_headline

    monkeypatch.chdir(tmp_path)
    old = Headline()
    old.rows = {"cov_line": {"a": 1}, "gone": {"a": 2}}
    write_headline(old, Path("metrics"))
    new = Headline()
    new.rows = {"cov_line": {"a": 3}, "em_line": {"a": 4}}
    real = io.write_text

    def failing(text, path):
        if str(path).endswith("em_line.json"):
            raise OSError("disk full")
        real(text, path)

    monkeypatch.setattr(io, "write_text", failing)
    with pytest.raises(OSError):
        write_headline(new, Path("metrics"))
    assert {p.name: json.loads(p.read_text()) for p in (tmp_path / "metrics").glob("*.json")} == {
        "cov_line.json": {"a": 1}, "gone.json": {"a": 2}}  # the old set whole
    monkeypatch.setattr(io, "write_text", real)
    write_headline(new, Path("metrics"))
    assert sorted(p.name for p in (tmp_path / "metrics").iterdir()) == ["cov_line.json", "em_line.json"]


def test_kernel_rows_are_the_judged_comparisons_not_the_graph_loop():
    """C5: `dvc metrics show` held only the H200 graph/eager rows (the strongest AR loop, prefill not
    graph-captured: not judged); the judged eager/eager ratios were no metric at all."""
    from analysis.present.headline import kernel_rows

    rows = []
    for baseline, comparison, judged, t_ar in (("eager", "eager/eager", True, 2.0), ("static_compiled", "graph/eager", False, 0.2)):
        for n in (8, 512):
            rows.append({"kernel_source": f"h200/qwen2.5-7b/{baseline}", "source": "h200", "model": "qwen2.5-7b",
                         "context": 256, "n": n, "baseline": baseline, "speedup": (10.0 if judged else 1.0) * n / 8,
                         "t_ar": t_ar * n, "is_strongest": not judged, "comparison": comparison, "judged": judged})
    out = kernel_rows(pl.DataFrame(rows), [], HeadlineSettings())
    assert out == {"kernel_h200-q7b_c256_x": {"n008": 10.0, "n512": 640.0}}


def test_serving_and_pilot_rows_carry_units_in_numeric_order():
    """P8: every row name ends in its unit; the serving concurrencies are zero-padded (c001 < c016 < c128 as
    text, as DVC sorts rows); the pilot's held-out split is a row of its own, not a `held` column. Over AR: the
    headline Copy-as-Decode method at the source's headline budget (the gains table's `headline` row); over the best
    rival: Copy-as-Decode's best variant there (the claims' decision)."""
    from analysis.present.headline import pilot_rows, serving_rows

    claim = pl.DataFrame({"max_num_batched_tokens": [512, 512, 2048], "method": ["cad", "zz", "cad"],
                          "headline": [True, False, False],
                          "kernel_source": ["fit", "fit", "fit"], "vs_ar_c1": [1.5, 9.0, 7.0],
                          "vs_ar_c16": [2.25, 9.0, 7.0], "vs_ar_c128": [3.0, 9.0, 7.0],
                          "vs_best_rival_c1": [1.1, 9.0, 7.0], "vs_best_rival_c16": [None, 9.0, 7.0],
                          "vs_best_rival_c128": [1.3, 9.0, 7.0]})
    out = serving_rows(claim, HeadlineSettings())
    assert out == {"sv_fit_c001_x": {"pooled": 1.5}, "sv_fit_c016_x": {"pooled": 2.25}, "sv_fit_c128_x": {"pooled": 3.0},
                   "sv_fit_c001r_x": {"pooled": 9.0}, "sv_fit_c016r_x": {"pooled": 9.0},
                   "sv_fit_c128r_x": {"pooled": 9.0}}
    assert [k for k in sorted(out) if not k.endswith("r_x")] == ["sv_fit_c001_x", "sv_fit_c016_x", "sv_fit_c128_x"]
    pilot = pl.DataFrame({"mode": ["program"] * 5, "phase": ["before", "before", "after", "after", "after"],
                          "split": ["heldout", "HEvalFix-Py", "heldout", "HEvalFix-Py", "HEvalFix-Py"],
                          "em": [0.0, 0.0303, 0.0606, 0.0303, 0.0909]})
    assert pilot_rows(pilot, HeadlineSettings()) == {
        "pilot_held_before_pct": {"pooled": 0.0}, "pilot_before_pct": {"hepy": 3.0},
        "pilot_held_after_pct": {"pooled": 6.1}, "pilot_after_pct": {"hepy": 6.1}}
