"""The model-running stages of `dvc.yaml`: kernels profile, kernels fit, decode, e2e, pilot (and the
`copydecode bench mask` command). Each takes `settings(params, options) -> frozen dataclass` and
`run(settings) -> metrics`. A stage module is the only place that reads settings and writes files."""
