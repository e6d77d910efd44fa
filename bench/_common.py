"""Shared helpers for the benchmarks: a result row, a median timer, and interleaved rounds whose ratios are
reported with their spread."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

__all__ = ["Row", "RunFailed", "median_time", "interleaved", "ratio_row", "timed_run"]


@dataclass
class Row:
    """One benchmark line. ``ours``/``baseline`` are in ``unit``; ``target`` is a bound on ours/baseline
    (``"<= 1.2x"``) or on ours alone (``"< 5 ms"``), checked by ``ok``. ``spread`` is (min, median, max) of
    the per-round ratios when the row was measured in interleaved rounds; the ratio shown is then their
    median. ``note`` says what went wrong in a run that did not abort the table (a flaky baseline)."""

    name: str
    ours: float
    baseline: Optional[float]
    unit: str
    target: str = ""
    ok: Optional[bool] = None
    spread: Optional[tuple[float, float, float]] = None
    note: str = ""

    @property
    def ratio(self) -> Optional[float]:
        if self.spread is not None:
            return self.spread[1]
        if self.baseline in (None, 0):
            return None
        return self.ours / self.baseline

    def cells(self) -> tuple[str, ...]:
        base = "" if self.baseline is None else f"{self.baseline:.4g} {self.unit}"
        ratio = "" if self.ratio is None else f"{self.ratio:.2f}x"
        spread = "" if self.spread is None else f"{self.spread[0]:.2f}-{self.spread[2]:.2f}x"
        ok = "" if self.ok is None else ("yes" if self.ok else "NO")
        return (self.name, f"{self.ours:.4g} {self.unit}", base, ratio, spread, self.target, ok, self.note)


def median_time(fn: Callable[[], object], repeat: int = 5) -> float:
    """Median wall time of ``fn()`` in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class RunFailed(Exception):
    """One measured run failed (a non-zero exit); the message is what the run printed last."""


def timed_run(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> float:
    """Wall time of one command, or :class:`RunFailed` with its exit code and the tail of its stderr."""
    start = time.perf_counter()
    run = subprocess.run(
        list(argv), cwd=cwd, env=dict(env), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    elapsed = time.perf_counter() - start
    if run.returncode != 0:
        last = run.stderr.strip().splitlines()[-1:] or [""]
        raise RunFailed(f"exit {run.returncode}: {last[0][:120]}")
    return elapsed


def interleaved(
    runs: Mapping[str, Callable[[], float]], repeat: int, *, attempts: int = 3
) -> tuple[dict[str, list[Optional[float]]], dict[str, list[str]]]:
    """``repeat`` rounds, each running every variant once in turn, so the machine's noise hits all of them
    alike. A run that raises :class:`RunFailed` is retried up to ``attempts`` times; if every attempt
    fails, that round's sample is None. Returns the samples and the failures, per variant."""
    samples: dict[str, list[Optional[float]]] = {name: [] for name in runs}
    failures: dict[str, list[str]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            sample: Optional[float] = None
            for _attempt in range(attempts):
                try:
                    sample = run()
                    break
                except RunFailed as e:
                    failures[name].append(str(e))
                    print(f"bench: {name} run failed, retrying ({e})", file=sys.stderr)
            samples[name].append(sample)
    return samples, failures


def ratio_row(
    name: str,
    ours: Sequence[Optional[float]],
    baseline: Sequence[Optional[float]],
    unit: str,
    target: Optional[float] = None,
    failures: Sequence[str] = (),
) -> Row:
    """A row from paired per-round samples: ours and the baseline at their medians, the ratio as the median
    of the per-round ratios with its min and max, the target checked on that median. Rounds in which either
    side failed every attempt are left out and said in the note; with none left the row reports the
    failure instead of a ratio."""
    pairs = [(o, b) for o, b in zip(ours, baseline, strict=True) if o is not None and b is not None]
    note = f"{len(failures)} failed run(s), retried: {failures[-1]}" if failures else ""
    dropped = len(ours) - len(pairs)
    if dropped:
        note = f"{dropped} round(s) without a result; {note}"
    target_text = "" if target is None else f"<= {target}x"
    if not pairs:
        valid = [o for o in ours if o is not None]
        return Row(name, statistics.median(valid) if valid else float("nan"), None, unit, target_text, None, None, note)
    ratios = sorted(o / b for o, b in pairs)
    spread = (ratios[0], statistics.median(ratios), ratios[-1])
    ok = None if target is None else spread[1] <= target
    return Row(
        name,
        statistics.median(o for o, _ in pairs),
        statistics.median(b for _, b in pairs),
        unit,
        target_text,
        ok,
        spread,
        note,
    )
