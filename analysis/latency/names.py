"""Kernel-source names: the one spelling of the two sources that are not measured raw timing files.

* `FIT_SOURCE` ("fit"): this run's own profile (kernels.fit.raw entries without another source);
* `PAPER_SOURCE` ("paper"): the paper abstract's kernel curve, not a fit (also the name of its
  latency form, `analysis.latency.model.PAPER_FORM`);
* `PAPER_CLAIMS`: the paper's figures file (analysis/data/paper_claims.json);
* `AR_LOOPS`: the AR loops the profiler can time (params kernels.profile.baselines, kernel.baselines), the one list
  (the profiler reads it here, without importing the rest of the latency layer into the profile stage's deps).

A module of its own so that both the latency model (which keys its models by source) and
analysis.latency.sources (which formats, parses and selects every kernel-source name, measured ones
included) can import the names without importing each other the wrong way round.
"""

from pathlib import Path

FIT_SOURCE = "fit"
PAPER_SOURCE = "paper"
# the paper's figures (analysis.claims.engine reads the rest); here so the latency model and the roofline both reach it
PAPER_CLAIMS = Path(__file__).parents[1] / "data" / "paper_claims.json"
AR_LOOPS = ("eager", "static", "static_compiled")
