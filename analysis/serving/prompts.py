"""Each method's own prompt in the serving simulation: Copy-as-Decode reads the numbered source, the others the
plain one.

The forwards table (analysis.serving.forwards) gives each (case, method) its `prompt_tokens`. Where the rivals
stage writes the same prompt for every method of a case (the plain source plus the template overhead), a
Copy-as-Decode request would be served a prompt shorter than the one it needs: its copies address numbered
lines (`k: line`, analysis.text.lines.numbered, the prompt every model-running stage builds). `own_prompts`
then adds, to every method whose vocabulary prompt is the numbered one (analysis.rivals.methods.PROGRAM_PROMPT),
the tokens the numbering adds to that case's source; where the table already charges each method its own
prompt (a program-prompt row's prompt differs from a plain-prompt row's of the same case), it is read as
written. The instruction paragraph's length is inside the template overhead (params
spans.prompt_overhead_tokens) for every method alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analysis.errors import ParamsError
from analysis.rivals.methods import PROGRAM_PROMPT, parse_method
from analysis.text.lines import numbered

FROM_TABLE = "the forwards table's per-method prompt"
COUNTED_HERE = "counted here: the numbered source's tokens for Copy-as-Decode, the plain source's for the others"


@dataclass(frozen=True)
class Prompts:
    """The forwards with each method's own prompt, and where its length came from (FROM_TABLE or COUNTED_HERE)."""

    forwards: pl.DataFrame
    how: str
    added_tokens_mean: float   # mean tokens added to a numbered-prompt row (0 when read from the table)


def numbered_methods(methods: list[str]) -> set[str]:
    return {m for m in methods if parse_method(m).prompt == PROGRAM_PROMPT}


def charges_own_prompt(forwards: pl.DataFrame) -> bool:
    """Whether a numbered-prompt row's prompt_tokens differs from a plain-prompt row's of the same case."""
    program = numbered_methods(forwards["method"].unique().to_list())
    if not program or len(program) == forwards["method"].n_unique():
        return False
    per_case = (forwards.with_columns(numbered=pl.col("method").is_in(list(program)))
                .group_by("case_id", "framing", "numbered").agg(pl.col("prompt_tokens").max()))
    wide = per_case.pivot(on="numbered", index=["case_id", "framing"], values="prompt_tokens")
    if "true" not in wide.columns or "false" not in wide.columns:
        return False
    return bool((wide["true"] != wide["false"]).fill_null(False).any())


def numbering_tokens(sources: pl.DataFrame, count) -> dict[str, int]:
    """case_id -> the tokens numbering its source adds (`count(text)`: the suite's tokenizer's token count)."""
    out = {}
    for r in sources.iter_rows(named=True):
        extra = count(numbered(r["source"])) - count(r["source"])
        if extra < 0:
            raise ParamsError(f"serving prompts: case {r['case_id']!r}: the numbered source has fewer tokens than the "
                              "plain one")
        out[r["case_id"]] = extra
    return out


def own_prompts(forwards: pl.DataFrame, sources: pl.DataFrame, count) -> Prompts:
    """The forwards with each numbered-prompt method's prompt lengthened by its case's numbering (`sources`:
    case_id and source of every case in the forwards), unless the table already charges it."""
    if charges_own_prompt(forwards):
        return Prompts(forwards, FROM_TABLE, 0.0)
    program = numbered_methods(forwards["method"].unique().to_list())
    cases = sources.filter(pl.col("case_id").is_in(forwards["case_id"].unique().to_list())).unique("case_id")
    missing = sorted(set(forwards["case_id"].to_list()) - set(cases["case_id"].to_list()))
    if missing:
        raise ParamsError(f"serving prompts: {len(missing)} cases of the forwards table have no source in the corpora "
                          f"table (e.g. {missing[:3]}); rerun `copydecode corpora`")
    extra = pl.DataFrame(list(numbering_tokens(cases, count).items()), schema={"case_id": pl.String, "numbering": pl.Int64},
                         orient="row")
    joined = forwards.join(extra, on="case_id", how="left").with_columns(
        prompt_tokens=pl.when(pl.col("method").is_in(list(program)))
        .then(pl.col("prompt_tokens") + pl.col("numbering")).otherwise(pl.col("prompt_tokens")))
    added = joined.filter(pl.col("method").is_in(list(program)))["numbering"]
    return Prompts(joined.drop("numbering"), COUNTED_HERE, float(added.mean()) if added.len() else 0.0)
