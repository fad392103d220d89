"""Issue 15's benchmark: the same kernel profile on a quiet machine and under a busy loop pinned to
one core, compared as per-pair median ratios (T_ar / T_prefill within one AR/prefill pair).

    taskset -c 0 python3 -c 'while True: pass' &   # in a copy of the repository with its own data/
    copydecode kernels profile
    python -m kernels_profile.busybench QUIET_RAW BUSY_RAW [OUT.md]

Writes a markdown table (default reports/kernels/benchmark_busy.md) with both runs' environments.
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

from analysis.io import markdown_table, write_text
from analysis.latency import speedup_table
from analysis.layout import REPORTS

KEYS = ["context", "n", "baseline"]
DEFAULT_OUT = REPORTS / "kernels/benchmark_busy.md"


def compare(quiet: pl.DataFrame, busy: pl.DataFrame, ns=(8, 128, 512)) -> pl.DataFrame:
    """Per (context, N, AR loop): each run's per-pair median ratio and busy/quiet - 1."""
    q = speedup_table(quiet).select(*KEYS, pl.col("speedup").alias("quiet"), pl.col("speedup_q25").alias("quiet_q25"),
                                    pl.col("speedup_q75").alias("quiet_q75"))
    b = speedup_table(busy).select(*KEYS, pl.col("speedup").alias("busy"), pl.col("speedup_q25").alias("busy_q25"),
                                   pl.col("speedup_q75").alias("busy_q75"))
    return (q.join(b, on=KEYS).filter(pl.col("n").is_in(list(ns)))
            .with_columns(change=pl.col("busy") / pl.col("quiet") - 1).sort(KEYS))


def environment_line(name: str, raw_path: Path) -> str:
    from kernels_profile.profiler import read_environment

    env = read_environment(raw_path) or {}
    return (f"- {name}: `{raw_path}`, noisy {env.get('noisy')}, max pair drift {env.get('max_pair_drift')}, "
            f"load1 {env.get('load1')}")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    quiet_path, busy_path = Path(args[0]), Path(args[1])
    out = Path(args[2]) if len(args) == 3 else DEFAULT_OUT
    table = compare(pl.read_parquet(quiet_path), pl.read_parquet(busy_path))
    text = ("# Kernel ratios: quiet machine vs a busy loop pinned to one core\n\n"
            "Per-pair median T_ar/T_prefill (IQR over repeat pairs); `change` = busy / quiet - 1.\n\n"
            + environment_line("quiet", quiet_path) + "\n" + environment_line("busy", busy_path) + "\n\n"
            + markdown_table(table, digits=3))
    write_text(text, out)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
