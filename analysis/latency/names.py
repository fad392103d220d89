"""Kernel-source names: the one spelling of the two sources that are not measured raw timing files.

* `FIT_SOURCE` ("fit"): this run's own profile (kernels.fit.raw entries without another source);
* `PAPER_SOURCE` ("paper"): the paper abstract's kernel curve, not a fit (also the name of its
  latency form, `analysis.latency.model.PAPER_FORM`).

A module of its own so that both the latency model (which keys its models by source) and
analysis.latency.sources (which formats, parses and selects every kernel-source name, measured ones
included) can import the names without importing each other the wrong way round.
"""

FIT_SOURCE = "fit"
PAPER_SOURCE = "paper"
