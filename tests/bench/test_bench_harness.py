"""`make bench` reports a flaky baseline instead of aborting the table, and a ratio with its spread."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _common() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_common", BENCH / "_common.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_a_baseline_that_sometimes_aborts_is_retried_and_counted() -> None:
    common = _common()
    # What plain torchrun did at teardown on this machine: abort now and then (SIGABRT, exit -6).
    outcomes = iter([1.0, common.RunFailed("exit -6: terminate called"), 2.0, 1.0])
    ours = iter([1.1, 2.4, 1.0])

    def baseline() -> float:
        item = next(outcomes)
        if isinstance(item, Exception):
            raise item
        return float(item)

    samples, failures = common.interleaved({"base": baseline, "ours": lambda: next(ours)}, repeat=3)
    assert samples["base"] == [1.0, 2.0, 1.0]  # the failed run was retried within its round
    assert failures["base"] == ["exit -6: terminate called"]
    row = common.ratio_row("x", samples["ours"], samples["base"], "s", 1.1, failures["base"])
    assert row.spread == (1.0, 1.1, 1.2)  # per-round ratios 1.1, 1.2, 1.0
    assert row.ok is True and "1 failed run(s), retried: exit -6" in row.note
    assert row.cells()[3:6] == ("1.10x", "1.00-1.20x", "<= 1.1x")


def test_a_baseline_that_never_succeeds_is_reported_not_fatal() -> None:
    common = _common()

    def broken() -> float:
        raise common.RunFailed("exit -6: terminate called without an active exception")

    samples, failures = common.interleaved({"base": broken, "ours": lambda: 1.0}, repeat=2, attempts=2)
    assert samples["base"] == [None, None] and len(failures["base"]) == 4
    row = common.ratio_row("x", samples["ours"], samples["base"], "s", 1.3, failures["base"])
    assert row.baseline is None and row.ok is None and row.ratio is None
    assert row.note.startswith("2 round(s) without a result") and "terminate called" in row.note


def test_the_table_prints_every_row_even_when_a_benchmark_module_fails(tmp_path: Path) -> None:
    # run.py is the entry point of `make bench`: one failing module gives an error row, the rest still print.
    import subprocess

    bench = tmp_path / "bench"
    bench.mkdir()
    for name in ("_common.py", "run.py"):
        (bench / name).write_text((BENCH / name).read_text())
    (bench / "bench_a_ok.py").write_text(
        "from _common import Row\ndef rows():\n    return [Row('fine row', 1.0, 2.0, 's', '<= 1x', True)]\n"
    )
    (bench / "bench_b_broken.py").write_text("def rows():\n    raise RuntimeError('baseline exploded')\n")
    out = subprocess.run([sys.executable, str(bench / "run.py")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert "fine row" in out.stdout and "bench_b_broken" in out.stdout and "0.50x" in out.stdout
    assert "baseline exploded" in out.stderr
