"""The model-running stages of `dvc.yaml`: kernels profile, kernels fit, decode, e2e, pilot (and the
`copydecode bench mask` command). Profile, fit, decode and e2e take `settings(params, options) ->
frozen dataclass` and `run(settings) -> metrics`; the pilot still takes `run(cfg, args)`. A stage
module is the only place that reads settings and writes files."""
