"""The one retry policy of the connector: every Kubernetes call and the watch cache's reconnects use it.

Deadline-driven: a call is retried while it fails with a transient error (``ApiUnavailable``: no answer,
429, 5xx) and ``retry_deadline`` seconds have not gone by since its first attempt; the last wait is cut
short so that one final attempt runs at the deadline. Waits grow exponentially from ``base_delay``,
capped at ``max_delay``, with jitter in [0.5, 1] times the wait; a ``Retry-After`` is honoured (capped at
``max_delay`` too). ``max_attempts`` (None: no limit) is a secondary cap for callers that want fewer tries.

>>> policy = RetryPolicy(base_delay=0.2, max_delay=10.0, deadline=60.0)
>>> policy.backoff(3, jitter=1.0), policy.backoff(9, jitter=1.0), policy.backoff(0, retry_after=2.5, jitter=0.5)
(1.6, 10.0, 2.5)
>>> from .errors import ApiUnavailable
>>> policy.next_delay(0, ApiUnavailable(503, "ServiceUnavailable"), elapsed=59.9) is not None
True
>>> policy.next_delay(0, ApiUnavailable(503, "ServiceUnavailable"), elapsed=60.0) is None
True
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from .errors import ConnectorError
    from .settings import ConnectorSettings

__all__ = ["RetryPolicy"]


@dataclass(frozen=True)
class RetryPolicy:
    base_delay: float
    max_delay: float
    deadline: float
    max_attempts: Optional[int] = None

    @classmethod
    def from_settings(cls, settings: ConnectorSettings) -> RetryPolicy:
        s = settings
        return cls(s.retry_base_delay, s.retry_max_delay, s.retry_deadline, s.retry_attempts)

    def backoff(self, attempt: int, retry_after: Optional[float] = None, jitter: Optional[float] = None) -> float:
        """Seconds to wait after failed attempt ``attempt`` (0-based), ignoring the deadline."""
        factor = random.uniform(0.5, 1.0) if jitter is None else jitter
        delay = min(self.max_delay, self.base_delay * 2.0 ** min(attempt, 62)) * factor
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_delay))
        return float(round(delay, 6))

    def next_delay(self, attempt: int, err: ConnectorError, elapsed: float) -> Optional[float]:
        """Seconds to wait before retrying a call whose attempt ``attempt`` failed with ``err``, ``elapsed``
        seconds after its first attempt started; None when the call must give up and raise ``err``."""
        if not err.retryable or elapsed >= self.deadline:
            return None
        if self.max_attempts is not None and attempt + 1 >= self.max_attempts:
            return None
        return min(self.backoff(attempt, getattr(err, "retry_after", None)), self.deadline - elapsed)
