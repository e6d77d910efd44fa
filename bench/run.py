"""`make bench`: runs every bench/bench_*.py and prints one table.

Each module defines ``rows() -> list[Row]``. A row compares this project ("ours") with a baseline measured
in the same run (the official plugin, plain torchrun, plain ray, cache off, ...). Ratios, not absolute
times, are what the targets speak of: these machines are noisy.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import Row  # noqa: E402

__all__ = ["main"]


def main(argv: list[str]) -> int:
    only = set(argv)
    table = Table(title="kubejobs benchmarks (ours vs baseline, measured in one run)")
    for col in ("benchmark", "ours", "baseline", "ratio", "min-max", "target", "ok", "note"):
        table.add_column(col, justify="left" if col == "benchmark" else "right")
    failed = False
    for path in sorted(HERE.glob("bench_*.py")):
        if only and path.stem not in only:
            continue
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
            rows: list[Row] = module.rows()
        except Exception:
            traceback.print_exc()
            table.add_row(path.stem, "error", "", "", "", "", "no", "see the traceback above")
            failed = True
            continue
        for row in rows:
            table.add_row(*row.cells())
    Console(width=200).print(table)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
