"""The errors of a local world: which member failed, with its exit code and the tail of its stderr."""

from __future__ import annotations

from typing import Optional

from flytekit.exceptions.user import FlyteRecoverableException

__all__ = ["LocalWorldError", "RecoverableLocalWorldError"]


class _MemberFailure(Exception):
    """What both errors carry: the failed member's role and index, exit code, stderr tail and when it raised
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
        self._init_exception(message, timestamp)
        self.role, self.index, self.exit_code, self.stderr_tail = role, index, exit_code, stderr_tail

    def _init_exception(self, message: str, timestamp: Optional[float]) -> None:
        raise NotImplementedError


class LocalWorldError(_MemberFailure, RuntimeError):
    """A member of a local world failed; names its role and index and carries its stderr tail."""

    def _init_exception(self, message: str, timestamp: Optional[float]) -> None:
        RuntimeError.__init__(self, message)
        self.timestamp = timestamp


class RecoverableLocalWorldError(_MemberFailure, FlyteRecoverableException):  # type: ignore[misc]
    """The failed member raised a ``FlyteRecoverableException``: the task stays retryable."""

    def _init_exception(self, message: str, timestamp: Optional[float]) -> None:
        FlyteRecoverableException.__init__(self, message, timestamp=timestamp)
