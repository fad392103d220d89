"""One module per `dvc.yaml` stage of the analysis. Each has `settings(params, ...) -> frozen dataclass`,
the only reader of its params group (validated through `analysis.pipeline.params` before anything is read or
written), and `run(settings) -> metrics`, the only place that writes files (to the paths of
`analysis.layout`). `analysis.cli` builds the settings and calls `run`. No stage imports another: what they
share lives outside this package (`analysis.parallel.progress`: timings, progress bars; `analysis.parallel.tables`:
reading the case and program tables back)."""
