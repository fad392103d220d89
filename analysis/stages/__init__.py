"""One module per `dvc.yaml` stage of the analysis. Each has `settings(params, ...) -> frozen dataclass`,
the only reader of its params group (validated through `analysis.params` before anything is read or
written), and `run(settings) -> metrics`, the only place that writes files (to the paths of
`analysis.layout`). `analysis.cli` builds the settings and calls `run`. `common` (timings, progress)
and `tables` (reading programs back) are shared helpers, not stages."""
