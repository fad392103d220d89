"""One module per `dvc.yaml` stage. Each has `run(cfg, args) -> metrics`; it is the only place that
reads settings (through `analysis.config`) and writes files (to the paths of `analysis.layout`)."""
