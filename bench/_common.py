"""Shared helpers for the benchmarks: a result row and a median timer."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

__all__ = ["Row", "median_time"]


@dataclass
class Row:
    """One benchmark line. ``ours``/``baseline`` are in ``unit``; ``target`` is a bound on ours/baseline
    (``"<= 1.2x"``) or on ours alone (``"< 5 ms"``), checked by ``ok``."""

    name: str
    ours: float
    baseline: Optional[float]
    unit: str
    target: str = ""
    ok: Optional[bool] = None

    @property
    def ratio(self) -> Optional[float]:
        if self.baseline in (None, 0):
            return None
        return self.ours / self.baseline  # type: ignore[operator]

    def cells(self) -> tuple[str, ...]:
        base = "" if self.baseline is None else f"{self.baseline:.4g} {self.unit}"
        ratio = "" if self.ratio is None else f"{self.ratio:.2f}x"
        ok = "" if self.ok is None else ("yes" if self.ok else "NO")
        return (self.name, f"{self.ours:.4g} {self.unit}", base, ratio, self.target, ok)


def median_time(fn: Callable[[], object], repeat: int = 5) -> float:
    """Median wall time of ``fn()`` in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
