"""The errors of a local world: which member failed, with its exit code and the tail of its stderr."""

from __future__ import annotations

from typing import Optional

from flytekit.exceptions.user import FlyteRecoverableException

__all__ = ["LocalWorldError", "RecoverableLocalWorldError"]


class LocalWorldError(RuntimeError):
    """A member of a local world failed; names its role and index, carries its stderr tail and when it raised
    (``timestamp``, seconds since the epoch, as flytekit's exceptions have it)."""

    def __init__(
        self,
        message: str,
        *,
        role: str,
        index: int,
        exit_code: Optional[int],
        stderr_tail: str,
        timestamp: Optional[float] = None,
    ) -> None:
        super().__init__(message)
        self.timestamp = timestamp
        self.role, self.index, self.exit_code, self.stderr_tail = role, index, exit_code, stderr_tail


class RecoverableLocalWorldError(FlyteRecoverableException):  # type: ignore[misc]
    """The failed member raised a ``FlyteRecoverableException``: the task stays retryable."""

    def __init__(
        self,
        message: str,
        *,
        role: str,
        index: int,
        exit_code: Optional[int],
        stderr_tail: str,
        timestamp: Optional[float] = None,
    ) -> None:
        super().__init__(message, timestamp=timestamp)
        self.role, self.index, self.exit_code, self.stderr_tail = role, index, exit_code, stderr_tail
