"""`copydecode compare`: paired figures of two synthetic run folders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from analysis.errors import ParamsError

from analysis import cli
from analysis.stats import CHUNK_CELLS, mcnemar_exact, paired_bootstrap, sign_test
from analysis.tools.compare import CompareError, CompareSettings, compare_runs, load_run
from analysis.tools.compare_page import params_diff, to_html, to_markdown
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
    for figure in ("cov_line_all_pct", "bound_fit_ideal_all_x", "bound_fit_dir_all_x", "em_line_all_pct"):
        row = rows[(figure, "pooled")]
        assert row.diff > 0 and row.ci_low > 0 and row.significant, row
    assert rows[("em_line_all_pct", "pooled")].p_value < 0.001
    assert rows[("cov_line_all_pct", "pooled")].n == 120 and rows[("cov_line_pct", "C1")].n == 60


def test_identical_runs_are_not_significant(runs):
    base, same, _ = runs
    comparison = compare_runs(load_run(str(base)), load_run(str(same)), SETTINGS)
    assert comparison.rows and not any(r.significant for r in comparison.rows)
    assert all(r.diff == 0 and r.ci_low == 0 and r.ci_high == 0 for r in comparison.rows)
    assert _rows(comparison)[("em_line_all_pct", "pooled")].p_value == 1.0


def test_mismatched_case_ids_are_named_and_left_out(tmp_path, runs):
    base, _, _ = runs
    ids = [f"c/{i}" for i in range(3, 120)] + ["new/1"]
    copied = np.full(len(ids), 50)
    other = _run(tmp_path / "other", _costs(ids, copied), _perturb(ids, np.zeros(len(ids), bool)))
    comparison = compare_runs(load_run(str(base)), load_run(str(other)), SETTINGS)
    assert _rows(comparison)[("cov_line_all_pct", "pooled")].n == 117
    text = to_markdown(comparison)
    assert "3 case ids only in A (c/0, c/1, c/2)" in text and "1 only in B (new/1)" in text


def test_no_shared_case_is_a_named_error(tmp_path, runs):
    base, _, _ = runs
    other = _run(tmp_path / "other", _costs(["z/1"], np.array([5])), _perturb(["z/1"], np.array([True])))
    with pytest.raises(CompareError, match=r"share no rows.*only in .*'c/0'"):
        compare_runs(load_run(str(base)), load_run(str(other)), SETTINGS)


def test_missing_run_is_a_named_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(CompareError, match="none of the per-case tables"):
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


def test_the_sign_test_on_booleans_matches_the_binomial():
    a = np.array([True] * 10 + [False] * 10)
    b = np.array([True] * 10 + [True] * 8 + [False] * 2)  # 8 discordant pairs, all for B
    assert sign_test(a, b) == pytest.approx(2 * 0.5 ** 8)


def test_html_is_escaped(runs):
    base, same, _ = runs
    import dataclasses

    comparison = compare_runs(load_run(str(base)), load_run(str(same)), SETTINGS)
    comparison.a = dataclasses.replace(comparison.a, label="<script>x</script>")
    page = to_html(comparison)
    assert "<script>x" not in page and "&lt;script&gt;x" in page


def test_cli_writes_markdown_and_html(runs, tmp_path, capsys):
    base, _, better = runs
    out = tmp_path / "out" / "cmp"
    assert cli.main(["compare", str(base), str(better), "--out", str(out)]) == 0
    markdown = (out / "compare.md").read_text()
    assert "| cov_line_all_pct | pooled | 120 |" in markdown and "yes" in markdown
    assert (out / "compare.html").read_text().startswith("<!doctype html>")
    captured = capsys.readouterr()
    assert captured.out.startswith("# Comparison") and '"figures"' not in captured.out  # no JSON after the markdown
    assert "figures differ significantly; wrote" in captured.err
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
    assert _rows(comparison)[("cov_line_all_pct", "pooled")].significant
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
            rows.append(("m-1", _corpus(case), case, "copy-line-ideal", repeat, cad_seconds * (1 + 0.1 * rng.random())))
    return pl.DataFrame(rows, orient="row", schema=["model", "corpus", "case_id", "method", "repeat", "seconds"])


def test_e2e_speedup_is_paired_on_cases(runs, tmp_path):
    base, _, better = runs
    rng = np.random.default_rng(3)
    ids = [f"c/{i}" for i in range(10)]
    for root, cad in ((base, 1.0), (better, 0.5)):
        (root / E2E_MEASUREMENTS).parent.mkdir(parents=True, exist_ok=True)
        _e2e(ids, cad, rng).write_parquet(root / E2E_MEASUREMENTS)
    row = _rows(compare_runs(load_run(str(base)), load_run(str(better)), SETTINGS))[("e2e_m-1_line_x", "pooled")]
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


# ---------------------------------------------------------------- one value per case (correctness review D6)

def _seeded_perturb(ids: list[str], match: np.ndarray, seeds: int) -> pl.DataFrame:
    """`seeds` replicate rows per case, each with the case's own outcome."""
    frames = [_perturb(ids, match).with_columns(seed=pl.lit(seed, pl.Int64)) for seed in range(seeds)]
    return pl.concat(frames)


def test_perturbation_seeds_are_averaged_before_pairing(tmp_path):
    """Ten seeds per case are replicates of one case: n counts cases, and the CI and p-value are those of
    the cases (as wide as with one seed), not of ten times as many independent rows."""
    rng = np.random.default_rng(4)
    ids = [f"c/{i}" for i in range(60)]
    copied = np.full(len(ids), 50)
    match = rng.random(len(ids)) < 0.3
    better = match | (rng.random(len(ids)) < 0.2)
    rows = {}
    for seeds in (1, 10):
        a = _run(tmp_path / f"a{seeds}", _costs(ids, copied), _seeded_perturb(ids, match, seeds))
        b = _run(tmp_path / f"b{seeds}", _costs(ids, copied), _seeded_perturb(ids, better, seeds))
        rows[seeds] = _rows(compare_runs(load_run(str(a)), load_run(str(b)), SETTINGS))[("em_line_all_pct", "pooled")]
    one, ten = rows[1], rows[10]
    assert ten.n == one.n == 60
    assert (ten.a, ten.b, ten.p_value) == (one.a, one.b, one.p_value)
    assert ten.ci_high - ten.ci_low == pytest.approx(one.ci_high - one.ci_low)


def test_seed_shares_are_compared_per_case(tmp_path):
    """A case matched by 3 of 10 seeds in A and 7 of 10 in B counts +0.4 for B in the sign test."""
    ids = [f"c/{i}" for i in range(12)]
    def run(name: str, hits: int) -> Path:
        frames = [_perturb(ids, np.full(len(ids), s < hits)).with_columns(seed=pl.lit(s, pl.Int64)) for s in range(10)]
        return _run(tmp_path / name, _costs(ids, np.full(len(ids), 50)), pl.concat(frames))
    row = _rows(compare_runs(load_run(str(run("a", 3))), load_run(str(run("b", 7))), SETTINGS))[("em_line_all_pct", "pooled")]
    assert (row.n, row.a, row.b) == (12, pytest.approx(30.0), pytest.approx(70.0))  # percent, as dvc metrics show
    assert row.p_value == pytest.approx(2 * 0.5 ** 12) and row.significant


def test_sign_test_is_mcnemar_on_binary_values():
    a = np.array([True] * 10 + [False] * 10)
    b = np.array([True] * 10 + [True] * 8 + [False] * 2)
    assert sign_test(a.astype(float), b.astype(float)) == pytest.approx(mcnemar_exact(int((a & ~b).sum()),
                                                                                     int((~a & b).sum())))
    assert sign_test(np.array([0.2, 0.5]), np.array([0.2, 0.5])) == 1.0


def test_pilot_base_rows_without_a_seed_are_paired(tmp_path):
    """The base model's pilot rows carry no seed (null); they pair with each other, never dropped."""
    from fixtures import pilot_record

    from analysis.layout import PILOT_RECORDS

    def records(after_hits: int, seeds: int) -> pl.DataFrame:
        rows = [pilot_record(phase="before", seed=None, split="heldout", case_id=f"h/{i}", exact_match=False)
                for i in range(6)]
        rows += [pilot_record(phase="after", seed=s, split="heldout", case_id=f"h/{i}", exact_match=i < after_hits)
                 for s in range(seeds) for i in range(6)]
        return pl.DataFrame(rows)
    for name, hits, seeds in (("a", 0, 1), ("b", 6, 2)):
        (tmp_path / name / PILOT_RECORDS).parent.mkdir(parents=True)
        records(hits, seeds).write_parquet(tmp_path / name / PILOT_RECORDS)
    comparison = compare_runs(load_run(str(tmp_path / "a")), load_run(str(tmp_path / "b")), SETTINGS)
    rows = _rows(comparison)
    assert rows[("pilot_program_before_pct", "heldout")].n == 6
    after = rows[("pilot_program_after_pct", "heldout")]
    assert (after.n, after.a, after.b) == (6, 0.0, 100.0)
    assert any("A averages 1 seed(s) per case, B 2" in n for n in comparison.notes)


# ---------------------------------------------------------------- malformed per-case files (QA M9)

def _write_costs(root: Path, frame: pl.DataFrame) -> Path:
    (root / CASE_COSTS).parent.mkdir(parents=True, exist_ok=True)
    frame.write_parquet(root / CASE_COSTS)
    return root


@pytest.mark.parametrize("change, message", [
    (lambda f: f.drop("copied_tokens"), r"b: the case_costs table lacks column\(s\) \['copied_tokens'\]"),
    (lambda f: f.drop("framing"), r"b: the case_costs table lacks column\(s\) \['framing'\]"),
    (lambda f: f.select("case_id"), r"b: the case_costs table lacks column\(s\) \['corpus', 'framing'"),
    (lambda f: f.with_columns(pl.col("case_id").str.replace("c/", "").cast(pl.Int64)),
     r"the key column 'case_id' is Int64 in .*a but String in .*b"),
])
def test_malformed_tables_are_named_errors(tmp_path, change, message):
    ids = [f"c/{i}" for i in range(20)]
    good = _costs(ids, np.full(len(ids), 50))
    a, b = _write_costs(tmp_path / "a", good), _write_costs(tmp_path / "b", change(good))
    if "Int64 in" in message:  # the odd one is A here, to check the error names the right run
        a, b = _write_costs(tmp_path / "a", change(good)), _write_costs(tmp_path / "b", good)
    with pytest.raises(CompareError, match=message):
        compare_runs(load_run(str(a)), load_run(str(b)), SETTINGS)


def test_a_key_column_is_never_dropped_from_the_pairing():
    from analysis.tools.compare import pair_tables

    a = pl.DataFrame({"case_id": ["x", "x"], "level": ["line", "token"], "v": [1, 2]})
    b = pl.DataFrame({"case_id": ["x"], "v": [1]})
    with pytest.raises(CompareError, match="B lacks the key column 'level'"):
        pair_tables(a, b, ("case_id", "level"), ("A", "B"), "t")


def test_a_damaged_file_is_named(tmp_path, runs):
    base, _, _ = runs
    bad = tmp_path / "bad"
    (bad / CASE_COSTS).parent.mkdir(parents=True)
    (bad / CASE_COSTS).write_bytes(b"not parquet")
    with pytest.raises(CompareError, match="case_costs.parquet: not a readable parquet file"):
        load_run(str(bad))


# ---------------------------------------------------------------- --out, cost, params diff (QA M8, M10; UX M7)

def test_top_level_out_is_the_output_folder(runs, tmp_path):
    base, _, better = runs
    out = tmp_path / "cmpout"
    assert cli.main(["--out", str(out), "compare", str(base), str(better)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["compare.html", "compare.json", "compare.md"]


def test_resamples_option_overrides_params_and_the_work_is_stated(runs, tmp_path, capsys, monkeypatch):
    from analysis.tools import compare

    base, _, better = runs
    monkeypatch.setattr(compare, "LARGE_WORK", 1000)
    assert cli.main(["compare", str(base), str(better), "--resamples", "50", "--out", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert "50 resamples per figure" in err and "warning: that is a large bootstrap" in err
    assert "(50 resamples, seed 0)" in (tmp_path / "o" / "compare.md").read_text()
    assert cli.main(["compare", str(base), str(better), "--resamples", "0"]) == 2
    assert "--resamples must be an integer >= 1" in capsys.readouterr().err


def test_bootstrap_memory_is_chunked_without_changing_the_interval():
    rng = np.random.default_rng(2)
    a, b, ones = rng.random(300), rng.random(300), np.ones(300)
    whole = paired_bootstrap(a, ones, b, ones, 500, np.random.default_rng(9), 0.95, chunk_cells=10**9)
    small = paired_bootstrap(a, ones, b, ones, 500, np.random.default_rng(9), 0.95, chunk_cells=1000)
    assert small == pytest.approx(whole)
    assert CHUNK_CELLS <= 1 << 22  # at most 4M indices (~50 MB with the gathered values) in memory at once


def test_params_diff_and_relative_change(runs, tmp_path):
    import yaml

    base, _, better = runs
    (base / "params.yaml").write_text(yaml.safe_dump({"kernel": {"latency_form": "interp"}, "seed": 1}))
    (better / "params.yaml").write_text(yaml.safe_dump({"kernel": {"latency_form": "quadratic"}, "seed": 1,
                                                        "extra": [1, 2]}))
    comparison = compare_runs(load_run(str(base)), load_run(str(better)), SETTINGS)
    assert params_diff(comparison.a.params, comparison.b.params) == [
        ("extra", "(absent)", "[1, 2]"), ("kernel.latency_form", '"interp"', '"quadratic"')]
    markdown = to_markdown(comparison)
    assert '| `kernel.latency_form` | "interp" | "quadratic" |' in markdown
    row = _rows(comparison)[("cov_line_all_pct", "pooled")]
    assert row.change == pytest.approx((row.b - row.a) / row.a)
    assert f"| cov_line_all_pct | pooled | 120 | {row.a:.4g} | {row.b:.4g} | {row.diff:.4g} | {row.change * 100:+.1f}% |" in markdown
    page = to_html(comparison, tmp_path)
    assert "<style>" in page and "Provenance" in page and "kernel.latency_form" in page
    assert "folder " + str(base) in page and "data/bounds/case_costs.parquet" in page


def test_revisions_read_the_committed_per_case_tables(tmp_path, runs):
    """A clone with no dvc cache and no data/ (a fresh clone) compares two commits through their
    reports/percase/ copies (`git show`), as `copydecode compare HEAD~1 HEAD` does there."""
    import shutil
    import subprocess

    from analysis.results.percase import BY_NAME

    base, _, better = runs
    repo = tmp_path / "repo"
    repo.mkdir()
    git = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    for label, run, form in (("first", base, "interp"), ("second", better, "quadratic")):
        for name in ("case_costs", "perturb"):
            target = repo / BY_NAME[name].committed
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(run / BY_NAME[name].source, target)
        (repo / "params.yaml").write_text(f"kernel:\n  latency_form: {form}\n")
        git("add", "-A")
        git("commit", "-qm", label)
    comparison = compare_runs(load_run("HEAD~1", repo), load_run("HEAD", repo), SETTINGS)
    assert _rows(comparison)[("cov_line_all_pct", "pooled")].significant
    assert comparison.b.sources["case_costs"] == "reports/percase/case_costs.parquet (committed)"
    assert params_diff(comparison.a.params, comparison.b.params) == [("kernel.latency_form", '"interp"', '"quadratic"')]


def test_a_folder_without_data_reads_its_committed_copies(tmp_path, runs):
    from analysis.results.percase import BY_NAME

    base, _, _ = runs
    clone = tmp_path / "clone"
    for name in ("case_costs", "perturb"):
        target = clone / BY_NAME[name].committed
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((base / BY_NAME[name].source).read_bytes())
    run = load_run(str(clone))
    assert run.sources == {"case_costs": "reports/percase/case_costs.parquet",
                           "perturb": "reports/percase/perturb.parquet"}
    assert not any(r.significant for r in compare_runs(load_run(str(base)), run, SETTINGS).rows)


def test_names_units_and_pools_are_the_metrics_ones(tmp_path, runs):
    """C4 of the UX review: compare's `pooled` was every corpus while `dvc metrics show`'s is the paper's three, and
    it printed shares where the metrics print percent. Now a run with a paper corpus pools it under the metrics' row
    name and every corpus under its `_all` row, in the metrics' units."""
    rng = np.random.default_rng(3)
    ids = [f"c/{i}" for i in range(60)]
    def paper_run(name: str, shift: int) -> Path:
        costs = _costs(ids, rng.integers(40, 70, len(ids)) + shift).with_columns(
            corpus=pl.when(pl.col("case_id").str.extract(r"(\d+)$").cast(pl.Int64) % 3 == 0)
            .then(pl.lit("HEvalFix-Py")).otherwise(pl.col("corpus")))
        return _run(tmp_path / name, costs, _perturb(ids, rng.random(len(ids)) < 0.5))
    rows = _rows(compare_runs(load_run(str(paper_run("a", 0))), load_run(str(paper_run("b", 10))), SETTINGS))
    paper, every = rows[("cov_line_pct", "pooled")], rows[("cov_line_all_pct", "pooled")]
    assert paper.n == 20 and every.n == 60 and rows[("cov_line_pct", "HEvalFix-Py")].n == 20
    assert 40 < paper.a < 70 and 40 < every.a < 70  # percent: 40-70 copied tokens of 100
    assert ("bound_fit_ideal_x", "pooled") in rows and ("bound_fit_ideal_all_x", "pooled") in rows


def test_the_head_to_head_is_paired_per_case(tmp_path):
    """C6/M5 of the UX review: compare answers "did my change make Copy-as-Decode catch up with the best rival?" on
    the per-case rivals table: the pair is run A's fastest Copy-as-Decode and rival over every case."""
    from analysis.layout import RIVALS_PERCASE

    ids = [f"c/{i}" for i in range(40)]
    def priced(copy_seconds: float) -> pl.DataFrame:
        rows = []
        for i in ids:
            for method, seconds in (("copy-line-decoded", copy_seconds), ("copy-line-ideal", 0.1),
                                    ("pld-earliest-k5", 2.0), ("suffix-k64", 3.0), ("ar", 10.0)):
                rows.append({"kernel_source": "fit", "case_id": i, "corpus": _corpus(i), "framing": "body",
                             "method": method, "seconds": seconds, "ar_seconds": 10.0, "speedup": 10.0 / seconds})
        return pl.DataFrame(rows)
    for name, seconds in (("a", 4.0), ("b", 1.0)):
        (tmp_path / name / RIVALS_PERCASE).parent.mkdir(parents=True)
        priced(seconds).write_parquet(tmp_path / name / RIVALS_PERCASE)
    rows = _rows(compare_runs(load_run(str(tmp_path / "a")), load_run(str(tmp_path / "b")), SETTINGS))
    row = rows[("rivals_fit_best_ratio_all_x", "pooled")]  # C1 and C2 are not the paper's: every corpus
    assert (row.n, row.a, row.b) == (40, pytest.approx(0.5), pytest.approx(2.0)) and row.significant
