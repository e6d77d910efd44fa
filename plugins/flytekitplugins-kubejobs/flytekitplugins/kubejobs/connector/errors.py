"""The connector's errors: one small tree, each type with the gRPC status code it reaches propeller with.

::

    ConnectorError                       INTERNAL (anything unclassified)
    ├── TaskRefused (also ValueError)    INVALID_ARGUMENT  the task itself is wrong: fails the same on every try
    │                                                      (a BuildError, the pod-security level, a namespace
    │                                                      outside the allow-list, a bad output prefix...)
    ├── ForeignObjectError               ALREADY_EXISTS    the object's name is held by an object we did not create
    └── ApiError                         per subclass      a failed Kubernetes API call (``status``: HTTP code)
        ├── ApiUnavailable               UNAVAILABLE       transient: 0 (connection/timeout), 429, 5xx; retried by
        │                                                  the retry policy until ``retry-deadline``, then raised
        ├── NotFound                     NOT_FOUND         404
        ├── Conflict                     ALREADY_EXISTS    409
        ├── Forbidden                    PERMISSION_DENIED 401/403 (RBAC, admission refusing the object)
        ├── Gone                         OUT_OF_RANGE      410: a watch's resourceVersion was compacted
        └── ApiRejected                  INVALID_ARGUMENT  any other 4xx (422 schema validation, 400)

A refusal at create (``refuses_task``) is not sent as an error at all: ``KubeJobConnector.create`` answers it
with a ResourceMeta that GetTask reports as a permanent failure (propeller retries every CreateTask error).
Whoever catches one compares types, never status integers. ``grpc_status`` gives the (code name, HTTP-like
number) pair flytekit's connector service reports; see ``grpc_codes.py`` for how the code reaches the wire.

>>> err = api_error(503, "ServiceUnavailable", "etcd is down")
>>> isinstance(err, ApiUnavailable), err.retryable, err.grpc_code
(True, True, 'UNAVAILABLE')
>>> grpc_status(TaskRefused("PyTorchJob a/b is refused: hostPID"))
('INVALID_ARGUMENT', 400)
>>> grpc_status(KeyError("x"))
('INTERNAL', 500)
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "ApiError",
    "ApiRejected",
    "ApiUnavailable",
    "Conflict",
    "ConnectorError",
    "Forbidden",
    "ForeignObjectError",
    "Gone",
    "NotFound",
    "TaskRefused",
    "api_error",
    "grpc_status",
    "refuses_task",
]

#: HTTP codes of the transient faults: a connection error or timeout (0), throttling, server errors.
RETRYABLE_STATUS = frozenset({0, 429, 500, 502, 503, 504})


class ConnectorError(Exception):
    """Base of every error the connector raises on purpose."""

    grpc_code = "INTERNAL"
    http_status = 500
    #: Whether the same call, repeated later, may succeed.
    retryable = False


class TaskRefused(ConnectorError, ValueError):
    """The task cannot run as sent (a permanent user error); the message names the field and the value."""

    grpc_code = "INVALID_ARGUMENT"
    http_status = 400


class ForeignObjectError(ConnectorError, RuntimeError):
    """The object name is taken by an object this task execution did not create."""

    grpc_code = "ALREADY_EXISTS"
    http_status = 409


class ApiError(ConnectorError):
    """A failed API call: ``status`` is the HTTP code (0 for a connection error or timeout)."""

    def __init__(self, status: int, reason: str, message: str = "", retry_after: Optional[float] = None):
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")
        self.status, self.reason, self.message, self.retry_after = status, reason, message, retry_after


class ApiUnavailable(ApiError):
    """The API server did not answer usefully (down, overloaded, throttling): worth retrying later."""

    grpc_code = "UNAVAILABLE"
    http_status = 503
    retryable = True


class NotFound(ApiError):
    grpc_code = "NOT_FOUND"
    http_status = 404


class Conflict(ApiError):
    grpc_code = "ALREADY_EXISTS"
    http_status = 409


class Forbidden(ApiError):
    grpc_code = "PERMISSION_DENIED"
    http_status = 403


class Gone(ApiError):
    """410: the resourceVersion a watch asked for is compacted away; the caller must re-list."""

    grpc_code = "OUT_OF_RANGE"
    http_status = 410


class ApiRejected(ApiError):
    """The API server refused the request itself (400, 422 schema validation, ...): retrying cannot help."""

    grpc_code = "INVALID_ARGUMENT"
    http_status = 400


_BY_STATUS: dict[int, type[ApiError]] = {404: NotFound, 409: Conflict, 401: Forbidden, 403: Forbidden, 410: Gone}


def api_error(status: int, reason: str, message: str = "", retry_after: Optional[float] = None) -> ApiError:
    """The ApiError subclass for an HTTP status (0: no answer at all)."""
    if status in RETRYABLE_STATUS or status >= 500:
        cls: type[ApiError] = ApiUnavailable
    else:
        cls = _BY_STATUS.get(status, ApiRejected if 400 <= status < 500 else ApiError)
    return cls(status, reason, message, retry_after)


def grpc_status(exc: BaseException) -> tuple[str, int]:
    """The gRPC status code name and HTTP-like number an exception from a connector call maps to.

    Besides the tree above, a ``ValueError``/``TypeError`` (the backend's ``BuildError`` is one; the project's
    rule is that bad input raises exactly these) is a refused task.
    """
    if isinstance(exc, ConnectorError):
        return exc.grpc_code, exc.http_status
    if isinstance(exc, (ValueError, TypeError)):
        return TaskRefused.grpc_code, TaskRefused.http_status
    return ConnectorError.grpc_code, ConnectorError.http_status


def refuses_task(exc: BaseException) -> bool:
    """Whether a failed create means the task can never run as sent: a permanent user failure, the same on
    every attempt (``TaskRefused`` and any ``ValueError``/``TypeError`` such as ``BuildError``, the API server
    refusing the object itself). Not refusals: transient faults, 403 (the connector's own RBAC, fixed by an
    operator), 404 (a CRD not installed), bugs, and ``ForeignObjectError`` (the name is this attempt's: the
    next attempt of the task runs under another name and may well succeed).

    >>> refuses_task(TaskRefused("hostPID")), refuses_task(api_error(422, "Invalid")), refuses_task(api_error(403, "x"))
    (True, True, False)
    """
    if isinstance(exc, (TaskRefused, ApiRejected)):
        return True
    return isinstance(exc, (ValueError, TypeError)) and not isinstance(exc, ConnectorError)
