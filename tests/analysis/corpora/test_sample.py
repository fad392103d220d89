"""The one case sampler (analysis.corpora.sample) picks the cases the four samplers it replaced picked (review
round 6, item 6): on the committed cases and programs tables (as committed at HEAD), with the params'
settings, it draws exactly the cases of the committed e2e runs (the default and the e2e-wide preset), of
the committed constrained-generation check and of the committed pilot's HEvalFix-Py sample; and, seed by
seed, the same ids as verbatim copies of the old samplers, the serving workload's draw with replacement
included."""

from __future__ import annotations

import io
import random

import numpy as np
import polars as pl
import pytest
import yaml
from committed import committed_file
from fixtures import ROOT

from analysis.corpora.sample import sample_ids, strata
from analysis.errors import ParamsError
from analysis.pooling import framing_filter
from analysis.serving.workload import draw_cases
from kernels_profile.e2e.checks import constrained_rows
from kernels_profile.e2e.job import sample_cases
from kernels_profile.pilot import settings as pilot_settings
from kernels_profile.pilot.jobs import humaneval_sample
from kernels_profile.stages import e2e as e2e_stage

PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())


def _committed_table(path: str, read) -> pl.DataFrame:
    try:
        data = committed_file(path, ROOT)
    except ParamsError as exc:
        pytest.fail(f"the committed {path} cannot be read from git: {exc}")
    return read(io.BytesIO(data))


@pytest.fixture(scope="module")
def cases() -> pl.DataFrame:
    return _committed_table("reports/percase/cases.parquet", pl.read_parquet)


@pytest.fixture(scope="module")
def programs(cases) -> pl.DataFrame:
    """The e2e stage's table: programs joined with their case texts (cases_with_instructions)."""
    programs = _committed_table("reports/percase/programs.parquet", pl.read_parquet)
    return programs.join(cases.select("case_id", "framing", "source", "target", "instruction"),
                         on=["case_id", "framing"], how="left")


# ---------------------------------------------------------------- the old samplers, verbatim

def old_e2e_sample(table, sample, framing, seed, stratify="target_length"):
    picked = []
    for corpus, count in sample:
        rows = table.filter((pl.col("corpus") == corpus) & framing_filter(framing))
        ids = sorted(set(rows["case_id"].to_list()))
        rng = random.Random(f"{seed}/{corpus}")
        if count is None or count >= len(ids):
            chosen = ids
        elif stratify == "none":
            chosen = rng.sample(ids, count)
        else:
            lengths = rows.group_by("case_id").agg(pl.col("target").first().str.len_chars().alias("n"))
            ordered = lengths.sort("n", "case_id")["case_id"].to_list()
            chosen = [rng.choice(stratum) for stratum in strata(ordered, count)]
        picked.append(rows.filter(pl.col("case_id").is_in(chosen)))
    return pl.concat(picked).sort("corpus", "case_id", "level")


def old_constrained(ids, n, seed):
    return random.Random(f"{seed}/constrained").sample(ids, min(n, len(ids)))


def old_pilot(ids, n, seed):
    return sorted(random.Random(seed).sample(ids, n), key=ids.index)


def old_serving(cases, n, seed, stream):
    rng = np.random.default_rng(np.random.SeedSequence([seed, *stream.encode()]))
    return [cases[i] for i in rng.integers(0, len(cases), size=n)]


# ---------------------------------------------------------------- against the committed runs

@pytest.mark.parametrize("preset, table", [(None, "reports/tables/e2e_cases.csv"),
                                           ("e2e-wide", "reports/e2e/frozen/e2e-wide/e2e_cases.csv")])
def test_the_e2e_sample_is_the_committed_runs_cases(programs, preset, table):
    s = e2e_stage.settings(PARAMS, preset=preset)
    measured = _committed_table(table, pl.read_csv)
    for model in s.models:
        drawn = set(sample_cases(programs, model.sample, s.framing, s.seed, s.stratify)["case_id"])
        assert drawn == set(measured.filter(pl.col("model") == model.name)["case_id"]), (preset, model.name)


def test_the_constrained_check_draws_the_committed_runs_cases(programs):
    s = e2e_stage.settings(PARAMS)
    committed = _committed_table("reports/tables/e2e_constrained.csv", pl.read_csv)
    assert set(constrained_rows(programs, s)["case_id"]) == set(committed["case_id"])


def test_the_pilot_draws_the_committed_runs_hevalfix_cases(cases):
    s = pilot_settings.settings(PARAMS)
    records = _committed_table("reports/percase/pilot.parquet", pl.read_parquet)
    committed = set(records.filter(pl.col("split") == "HEvalFix-Py")["case_id"])
    drawn = [c.case_id for c in humaneval_sample(cases, s.humaneval_cases, s.humaneval_seed, s.humaneval_framing)]
    assert len(drawn) == s.humaneval_cases and set(drawn) == committed


# ---------------------------------------------------------------- against the old samplers, seed by seed

def test_the_e2e_sample_matches_the_old_sampler_on_every_seed_and_both_strata(programs):
    sample = (("HEvalFix-Py", 3), ("HEvalFix-JS", 2), ("ProbeEdit-S", 4), ("CommitEdits-click", None))
    for seed in range(8):
        for stratify in ("target_length", "none"):
            new = sample_cases(programs, sample, "body", seed, stratify)
            assert new.equals(old_e2e_sample(programs, sample, "body", seed, stratify)), (seed, stratify)


def test_the_constrained_pilot_and_serving_draws_match_the_old_samplers(cases):
    hevalfix = sorted(set(cases.filter(pl.col("corpus") == "HEvalFix-Py")["case_id"]),
                      key=lambda c: int(c.rsplit("/", 1)[-1]))
    alphabetical = sorted(hevalfix)
    for seed in range(8):
        for n in (1, 5, 33, len(hevalfix)):
            assert set(sample_ids(alphabetical, n, seed, "constrained")) == set(old_constrained(alphabetical, n, seed))
            assert sample_ids(hevalfix, n, seed) == old_pilot(hevalfix, n, seed)
        for stream in ("closed/4", "open/0.5"):
            assert draw_cases(hevalfix, 200, seed, stream) == old_serving(hevalfix, 200, seed, stream)
    assert set(sample_ids(alphabetical, 10 ** 6, 0, "constrained")) == set(alphabetical)  # more than there are: all


def test_a_sample_is_in_the_order_given_and_a_stratified_one_spans_the_lengths():
    ids = [f"c{i}" for i in range(12)]
    lengths = {i: n for i, n in zip(ids, [50, 3, 91, 12, 77, 8, 64, 30, 99, 1, 45, 20])}
    for seed in range(5):
        plain = sample_ids(ids, 4, seed, "x")
        assert plain == [i for i in ids if i in plain] and len(set(plain)) == 4
        spread = sorted(lengths[i] for i in sample_ids(ids, 3, seed, "x", lengths=lengths))
        assert spread[0] <= 12 < spread[1] <= 50 < spread[2]  # one from each third of the lengths
    assert {tuple(sample_ids(ids, 4, seed, "x")) for seed in range(5)} != {tuple(sample_ids(ids, 4, 0, "x"))}
    assert sample_ids(ids, None, 0) == ids
    with pytest.raises(ValueError, match="at least one id"):
        sample_ids([], 3, 0, "x", replace=True)
