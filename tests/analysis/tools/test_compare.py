"""`copydecode compare`: paired figures of two synthetic run folders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from analysis.errors import ParamsError

from analysis import cli
from analysis.tools.compare import (CompareError, CompareSettings, compare_runs, load_run, mcnemar_exact,
                              paired_bootstrap, to_html, to_markdown)
from analysis.layout import CASE_COSTS, E2E_MEASUREMENTS, PERTURB_RESULTS

SETTINGS = CompareSettings(resamples=400, seed=0, ci=0.95, alpha=0.05, framing="body", perturb_rate=1.0)


def _corpus(case_id: str) -> str:
    return "C1" if int(case_id.rsplit("/", 1)[1]) % 2 else "C2"


def _costs(ids: list[str], copied: np.ndarray, regen_scale: float = 1.0) -> pl.DataFrame:
    n = len(ids)
    return pl.DataFrame({
        "case_id": ids, "corpus": [_corpus(i) for i in ids], "framing": ["unit"] * n,
        "level": ["line"] * n, "gold_tokens": [100] * n, "copied_tokens": copied.astype(int).tolist(),
        "program_ideal": (101 - copied).astype(float).tolist(), "directive_seconds": [1.0] * n,
        "regen": [100.0 * regen_scale] * n, "program_overhead": (102 - copied).astype(float).tolist(),
        "extrapolated_spans": [0] * n, "extrapolated_regen": [False] * n,
        "kernel_source": ["fit"] * n, "baseline": ["eager"] * n,
    })


def _perturb(ids: list[str], match: np.ndarray) -> pl.DataFrame:
    n = len(ids)
    return pl.DataFrame({
        "case_id": ids, "corpus": [_corpus(i) for i in ids], "framing": ["unit"] * n,
        "level": ["line"] * n, "kind": ["both"] * n, "rate": [1.0] * n, "seed": [0] * n,
        "outcome": ["match" if m else "mismatch" for m in match], "touched": [1] * n, "n_copies": [2] * n,
    })


def _run(root: Path, costs: pl.DataFrame, perturb: pl.DataFrame) -> Path:
    for frame, rel in ((costs, CASE_COSTS), (perturb, PERTURB_RESULTS)):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        frame.write_parquet(root / rel)
    return root


@pytest.fixture
def runs(tmp_path):
    rng = np.random.default_rng(1)
    ids = [f"c/{i}" for i in range(120)]
    copied = rng.integers(40, 70, len(ids))
    match = rng.random(len(ids)) < 0.3
    base = _run(tmp_path / "base", _costs(ids, copied), _perturb(ids, match))
    same = _run(tmp_path / "same", _costs(ids, copied), _perturb(ids, match))
    better_match = match | (rng.random(len(ids)) < 0.5)
    better = _run(tmp_path / "better", _costs(ids, np.minimum(copied + 20, 99)), _perturb(ids, better_match))
    return base, same, better


def _rows(comparison) -> dict[tuple[str, str], object]:
    return {(r.figure, r.corpus): r for r in comparison.rows}


def test_a_real_difference_is_significant(runs):
    base, _, better = runs
    rows = _rows(compare_runs(load_run(str(base)), load_run(str(better)), SETTINGS))
    for figure in ("cov_line", "bound_fit_ideal", "bound_fit_dir", "em_line"):
        row = rows[(figure, "pooled")]
        assert row.diff > 0 and row.ci_low > 0 and row.significant, row
    assert rows[("em_line", "pooled")].p_value < 0.001
    assert rows[("cov_line", "pooled")].n == 120 and rows[("cov_line", "C1")].n == 60


def test_identical_runs_are_not_significant(runs):
    base, same, _ = runs
    comparison = compare_runs(load_run(str(base)), load_run(str(same)), SETTINGS)
    assert comparison.rows and not any(r.significant for r in comparison.rows)
    assert all(r.diff == 0 and r.ci_low == 0 and r.ci_high == 0 for r in comparison.rows)
    assert _rows(comparison)[("em_line", "pooled")].p_value == 1.0


def test_mismatched_case_ids_are_named_and_left_out(tmp_path, runs):
    base, _, _ = runs
    ids = [f"c/{i}" for i in range(3, 120)] + ["new/1"]
    copied = np.full(len(ids), 50)
    other = _run(tmp_path / "other", _costs(ids, copied), _perturb(ids, np.zeros(len(ids), bool)))
    comparison = compare_runs(load_run(str(base)), load_run(str(other)), SETTINGS)
    assert _rows(comparison)[("cov_line", "pooled")].n == 117
    text = to_markdown(comparison)
    assert "3 case ids only in A (c/0, c/1, c/2)" in text and "1 only in B (new/1)" in text


def test_no_shared_case_is_a_named_error(tmp_path, runs):
    base, _, _ = runs
    other = _run(tmp_path / "other", _costs(["z/1"], np.array([5])), _perturb(["z/1"], np.array([True])))
    with pytest.raises(CompareError, match=r"share no rows.*only in .*'c/0'"):
        compare_runs(load_run(str(base)), load_run(str(other)), SETTINGS)


def test_missing_run_is_a_named_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(CompareError, match="none of the per-case outputs"):
        load_run(str(tmp_path / "empty"))
    with pytest.raises(CompareError, match="neither a run folder nor a git revision"):
        load_run(str(tmp_path / "absent"), repo=tmp_path)


def test_bootstrap_is_seeded_and_paired():
    rng = np.random.default_rng(0)
    a = rng.random(50)
    ones = np.ones(50)
    first = paired_bootstrap(a, ones, a + 0.1, ones, 300, np.random.default_rng(5), 0.95)
    again = paired_bootstrap(a, ones, a + 0.1, ones, 300, np.random.default_rng(5), 0.95)
    assert first == again
    assert first == pytest.approx((0.1, 0.1))  # paired: a constant shift has no spread at all


def test_mcnemar_exact_matches_the_binomial():
    a = np.array([True] * 10 + [False] * 10)
    b = np.array([True] * 10 + [True] * 8 + [False] * 2)  # 8 discordant pairs, all for B
    assert mcnemar_exact(a, b) == pytest.approx(2 * 0.5 ** 8)


def test_html_is_escaped(runs):
    base, same, _ = runs
    comparison = compare_runs(load_run(str(base)), load_run(str(same)), SETTINGS)
    comparison.a = "<script>x</script>"
    page = to_html(comparison)
    assert "<script>x" not in page and "&lt;script&gt;x" in page


def test_cli_writes_markdown_and_html(runs, tmp_path, capsys):
    base, _, better = runs
    stem = tmp_path / "out" / "cmp"
    assert cli.main(["compare", str(base), str(better), "--out", str(stem)]) == 0
    markdown = (tmp_path / "out" / "cmp.md").read_text()
    assert "| cov_line | pooled | 120 |" in markdown and "yes" in markdown
    assert (tmp_path / "out" / "cmp.html").read_text().startswith("<!doctype html>")
    assert cli.main(["compare", str(base), str(tmp_path / "nope")]) == 2
    assert "neither a run folder" in capsys.readouterr().err


@pytest.mark.slow
def test_git_revisions_are_read_from_the_dvc_cache(tmp_path, runs):
    """A revision's dvc-tracked per-case outputs are read without a checkout (dvc.api at that commit)."""
    import shutil
    import subprocess

    from dvc.repo import Repo

    base, _, better = runs
    repo = tmp_path / "repo"
    repo.mkdir()
    git = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    dvc = Repo.init(str(repo))
    for label, run in (("first", base), ("second", better)):
        for rel in (CASE_COSTS, PERTURB_RESULTS):
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(run / rel, repo / rel)
            dvc.add(str(repo / rel))
        git("add", "-A")
        git("commit", "-qm", label)
    git("tag", "baseline", "HEAD~1")
    comparison = compare_runs(load_run("baseline", repo), load_run("HEAD", repo), SETTINGS)
    assert _rows(comparison)[("cov_line", "pooled")].significant
    # a `dvc exp save` experiment, by name: the workspace back at the first run's outputs
    for rel in (CASE_COSTS, PERTURB_RESULTS):
        shutil.copy(base / rel, repo / rel)
        dvc.add(str(repo / rel))
    dvc.experiments.save(name="back-to-base")
    comparison = compare_runs(load_run("baseline", repo), load_run("back-to-base", repo), SETTINGS)
    assert comparison.rows and not any(r.significant for r in comparison.rows)


def _e2e(ids: list[str], cad_seconds: float, rng) -> pl.DataFrame:
    rows = []
    for case in ids:
        for repeat in range(3):
            rows.append(("m-1", _corpus(case), case, "ar", repeat, 2.0 + 0.1 * rng.random()))
            rows.append(("m-1", _corpus(case), case, "cad_line", repeat, cad_seconds * (1 + 0.1 * rng.random())))
    return pl.DataFrame(rows, orient="row", schema=["model", "corpus", "case_id", "method", "repeat", "seconds"])


def test_e2e_speedup_is_paired_on_cases(runs, tmp_path):
    base, _, better = runs
    rng = np.random.default_rng(3)
    ids = [f"c/{i}" for i in range(10)]
    for root, cad in ((base, 1.0), (better, 0.5)):
        (root / E2E_MEASUREMENTS).parent.mkdir(parents=True, exist_ok=True)
        _e2e(ids, cad, rng).write_parquet(root / E2E_MEASUREMENTS)
    row = _rows(compare_runs(load_run(str(base)), load_run(str(better)), SETTINGS))[("e2e_m-1_line", "pooled")]
    assert row.n == 10 and 1.9 < row.a < 2.3 and 3.8 < row.b < 4.6 and row.significant


def test_settings_come_from_params():
    from fixtures import params_with

    from analysis.tools.compare import settings

    s = settings(params_with(), "a", "b")
    assert (s.stats.resamples, s.stats.ci, s.stats.alpha, str(s.out)) == (2000, 0.95, 0.05, "runs/compare/a-vs-b")
    with pytest.raises(ParamsError, match="'compare.ci'"):
        settings(params_with(**{"compare.ci": 1.5}), "a", "b")
    with pytest.raises(ParamsError, match="'compare.resampels'"):
        settings(params_with(**{"compare.resampels": 5}), "a", "b")
