"""The e2e sample and its jobs. `sample_cases`: the seeded per-corpus sample of the cases (through the
suite's one sampler, analysis.corpora.sample). One case as a job, built once (`build_job`): its plan, both
prompts, the gold output and the programs' executor segments in the model's tokens, the checkpoint key's
parts, and the per-case curve's contexts and prefill sizes. The stage builds it, the measurement runs it,
the checkpoint is keyed by it; nothing downstream rebuilds a part of it."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import polars as pl

from analysis.corpora.sample import sample_ids
from analysis.errors import ParamsError
from analysis.grammar.program import parse
from analysis.layout import LEVELS
from analysis.pooling import framing_filter
from analysis.rivals.methods import PROGRAM_PROMPT, REWRITE_PROMPT
from kernels_profile.e2e.executor import Segment, program_segments
from kernels_profile.e2e.predict import prefill_sizes
from kernels_profile.e2e.settings import SAMPLE_STRATA, E2EModel, E2ESettings, MethodPlan
from kernels_profile.runtime.hf import PLAIN_REWRITE_TEMPLATE, PROGRAM_TEMPLATE, ModelTokenizer, prompt_ids

CHECKPOINT_VERSION = "e2e-7"  # 7: drafts never cropped to the gold, a copy tag's last token in its prefill; 6: one method vocabulary


def sample_cases(table: pl.DataFrame, sample: tuple[tuple[str, int | None], ...], framing: str, seed: int,
                 stratify: str = "target_length") -> pl.DataFrame:
    """The rows of a seeded sample per corpus (a count of None takes every case of that corpus), drawn from
    the corpus's case ids in order, seeded by `seed/corpus`. `target_length`: one case from each of `count`
    near-equal strata of the cases ordered by output length (characters, then id), so a sample spans short
    to long edits; `none`: a simple random sample."""
    if stratify not in SAMPLE_STRATA:
        raise ParamsError(f"e2e.stratify must be one of {SAMPLE_STRATA}, got {stratify!r}")
    picked = []
    for corpus, count in sample:
        rows = table.filter((pl.col("corpus") == corpus) & framing_filter(framing))
        ids = sorted(set(rows["case_id"].to_list()))
        if not ids:
            raise ParamsError(f"e2e sample names corpus {corpus!r} with no cases at framing {framing!r}")
        lengths = None
        if stratify == "target_length":
            lengths = dict(rows.group_by("case_id").agg(pl.col("target").first().str.len_chars()).iter_rows())
        chosen = sample_ids(ids, count, seed, corpus, lengths=lengths)
        picked.append(rows.filter(pl.col("case_id").is_in(chosen)))
    return pl.concat(picked).sort("corpus", "case_id", "level")


@dataclass(frozen=True)
class CaseJob:
    model: E2EModel
    case_id: str
    corpus: str
    source: str
    target: str
    programs: tuple[str, str]                  # line, token (the oracle programs' text)
    instruction: str | None
    prompts: dict[str, tuple[int, ...]]        # REWRITE_PROMPT / PROGRAM_PROMPT -> ids
    gold: tuple[int, ...]                      # the target in the model's tokens
    segments: dict[str, list[Segment]]         # level -> the program's executor segments
    plan: MethodPlan
    repeats: int
    order_seed: str
    lossless_levels: tuple[str, ...]
    curve_contexts: tuple[int, int]            # the shortest prompt, the longest context any method reaches
    curve_sizes: tuple[int, ...]               # prefill sizes up to the largest forward's

    def key_parts(self, s: E2ESettings, fingerprint: dict) -> dict:
        """Everything that determines this case's checkpoint: a change to any of it re-measures the case."""
        return {"model": asdict(self.model), "tokenizer": s.tokenizer, "case": self.case_id, "source": self.source,
                "target": self.target, "programs": list(self.programs), "prompts": {k: list(v) for k, v in self.prompts.items()},
                "repeats": self.repeats, "plan": self.plan.key(), "order_seed": self.order_seed,
                "lossless": [list(self.lossless_levels), s.checks.losslessness_tolerance], "threads": s.environment.threads,
                "curve": {"contexts": list(self.curve_contexts), "sizes": list(self.curve_sizes),
                          "ar_grid": list(s.curve.ar_grid), "ar_steps": s.curve.ar_steps, "fit": s.curve.fit},
                # the stored predictions are priced with these (bounds.step_cost, bounds.steady_max_n, bounds.prefill_past_n)
                "price": {"step_cost": s.price.step_cost, "steady_max_n": s.price.steady_max_n,
                          "prefill_past_n": s.price.prefill_past_n},
                "fingerprint": fingerprint}

    def file_stem(self) -> str:
        """The checkpoint's name before its key: `/` as `_` (one path component), the case id cut to
        CASE_STEM_BYTES (a multi-file case id `<sha>:<long path>` passed 255 bytes); the key
        after it, a hash holding the case id, keeps two cut ids apart."""
        case = self.case_id.replace("/", "_").replace("\x00", "_").encode("utf-8")[:CASE_STEM_BYTES]
        return f"{self.model.name}-{case.decode('utf-8', 'ignore')}"


CASE_STEM_BYTES = 100  # of a case id in a checkpoint's file name


def order_seed(seed: int, model: str, case_id: str) -> str:
    return f"{seed}/{model}/{case_id}"


def build_job(choice: E2EModel, s: E2ESettings, line: dict, token: dict, tok: ModelTokenizer, encode,
              qwen) -> CaseJob:
    """The job of one case from its line- and token-level program rows (`encode`: the model's plain
    tokenizer, str -> ids; `qwen`: the suite tokenizer whose token bounds the token programs address)."""
    source, instruction = line["source"], line.get("instruction")
    prompts = {REWRITE_PROMPT: tuple(prompt_ids(tok, PLAIN_REWRITE_TEMPLATE, source, instruction)),
               PROGRAM_PROMPT: tuple(prompt_ids(tok, PROGRAM_TEMPLATE, source, instruction))}
    bounds = qwen.encode(source).char_bounds
    segments = {"line": program_segments(parse(line["program"]), source, None, encode),
                "token": program_segments(parse(token["program"]), token["source"], bounds, encode)}
    gold = tuple(encode(line["target"]))
    plan = s.plan(choice.name, line["corpus"])
    decoded = max(sum(seg.directive_tokens + len(seg.ids) for seg in segments[level]) for level in LEVELS)
    longest = max(len(prompts[REWRITE_PROMPT]) + len(gold), len(prompts[PROGRAM_PROMPT]) + decoded)
    # a copy's prefill also carries its tag's last token when directives are decoded
    widest = max([1, *(len(seg.ids) + 1 for level in LEVELS for seg in segments[level] if seg.kind == "copy"),
                  *(m.k + 1 for m in plan.methods if m.speculative)])
    return CaseJob(
        model=choice, case_id=line["case_id"], corpus=line["corpus"], source=source, target=line["target"],
        programs=(line["program"], token["program"]), instruction=instruction, prompts=prompts, gold=gold,
        segments=segments, plan=plan, repeats=s.repeats, order_seed=order_seed(s.seed, choice.name, line["case_id"]),
        lossless_levels=s.checks.lossless_levels,
        curve_contexts=(min(len(p) for p in prompts.values()), longest),
        curve_sizes=prefill_sizes(s.curve.prefill_grid, widest))


def build_jobs(choice: E2EModel, s: E2ESettings, table: pl.DataFrame, tok: ModelTokenizer, encode,
               qwen) -> list[CaseJob]:
    """The jobs of the model's sample (`sample_cases` of the joined programs table), by case id."""
    rows = sample_cases(table, choice.sample, s.framing, s.seed, s.stratify)
    jobs = []
    for case_id in sorted(set(rows["case_id"].to_list())):
        case = rows.filter(pl.col("case_id") == case_id)
        line, token = (case.filter(pl.col("level") == lv).row(0, named=True) for lv in ("line", "token"))
        jobs.append(build_job(choice, s, line, token, tok, encode, qwen))
    return jobs
