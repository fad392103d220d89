"""Each method's own prompt in the serving simulation (audit M2): Copy-as-Decode's numbered source is longer than
the plain one every method was charged; the difference is counted as the e2e prompt numbers the source."""

import polars as pl
import pytest
from fixtures import forwards_frame, serving_cases

from analysis.serving.prompts import COUNTED_HERE, FROM_TABLE, charges_own_prompt, numbering_tokens, own_prompts


def count(text: str) -> int:
    return len(text.split())   # a toy tokenizer: one token per whitespace-separated word


def test_numbered_prompt_methods_pay_the_numbering_and_the_others_do_not():
    forwards = forwards_frame(4)
    sources = serving_cases(forwards)
    prompts = own_prompts(forwards, sources, count)
    assert prompts.how == COUNTED_HERE
    joined = prompts.forwards.join(forwards.select("case_id", "method", before="prompt_tokens"), on=["case_id", "method"])
    added = joined.with_columns(added=pl.col("prompt_tokens") - pl.col("before"))
    copy = added.filter(pl.col("method").str.starts_with("copy"))
    assert (copy["added"] == 12).all()   # twelve lines, each gains a `k:` word
    assert (added.filter(~pl.col("method").str.starts_with("copy"))["added"] == 0).all()
    assert prompts.added_tokens_mean == 12 and charges_own_prompt(prompts.forwards)


def test_a_forwards_table_that_charges_each_method_its_prompt_is_read_as_written():
    forwards = forwards_frame(3).with_columns(
        prompt_tokens=pl.when(pl.col("method").str.starts_with("copy")).then(pl.col("prompt_tokens") + 7)
        .otherwise(pl.col("prompt_tokens")))
    prompts = own_prompts(forwards, serving_cases(forwards), count)
    assert prompts.how == FROM_TABLE and prompts.forwards.equals(forwards)


def test_the_numbering_is_the_one_the_model_running_stages_prompt_with():
    """The count uses the numbering every model-running stage puts in its prompt (kernels_profile.runtime.hf)."""
    from kernels_profile.runtime.hf import PROGRAM_TEMPLATE, messages

    source = "def f(x):\n    return x + 1\n\nprint(f(2))\n"
    numbered = messages(PROGRAM_TEMPLATE, source, None)[1]["content"]
    frame = pl.DataFrame({"case_id": ["c"], "source": [source]})
    chars = numbering_tokens(frame, len)["c"]   # one token per character: the added characters
    assert len(numbered) - len("Input:\n") - len(source) == chars == len("1: 2: 3: 4: ")


def test_a_case_without_a_source_is_named():
    forwards = forwards_frame(2)
    with pytest.raises(Exception, match="no source in the corpora table"):
        own_prompts(forwards, serving_cases(forwards).head(1), count)
