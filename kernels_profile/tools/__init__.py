"""Commands that run a model and are not pipeline stages (no dvc.yaml stage): `bench busy`, `bench mask` and
`pilot-sweep`. Each owns its command line (`HELP`, `READS_WRITES`, `add_arguments`), as the stages do."""
