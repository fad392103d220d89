"""The model-running stages of `dvc.yaml`: kernels profile, kernels fit, e2e. Same contract as
`analysis.stages`: `run(cfg, args) -> metrics`, the only place that reads settings and writes files."""
