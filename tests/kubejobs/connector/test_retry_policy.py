"""The one retry policy and the error tree, as pure functions of (attempt, error, elapsed time).

Time is a parameter here (``elapsed``), so the deadline arithmetic is checked without waiting; the same
policy against a real API server behind the fault proxy is in ``tests/e2e/test_api_faults.py``.
"""

from __future__ import annotations

import pytest
from flytekitplugins.kubejobs.connector.errors import (
    ApiRejected,
    ApiUnavailable,
    Conflict,
    Forbidden,
    Gone,
    NotFound,
    TaskRefused,
    api_error,
    grpc_status,
)
from flytekitplugins.kubejobs.connector.retry import RetryPolicy
from flytekitplugins.kubejobs.connector.settings import ConnectorSettings

UNAVAILABLE = ApiUnavailable(503, "ServiceUnavailable")


def test_backoff_is_capped_exponential_with_jitter_and_honours_retry_after() -> None:
    policy = RetryPolicy(base_delay=0.1, max_delay=2.0, deadline=60.0)
    assert [policy.backoff(a, jitter=1.0) for a in range(8)] == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0, 2.0]
    for attempt in range(6):
        assert 0.5 * min(2.0, 0.1 * 2**attempt) <= policy.backoff(attempt) <= 2.0
    assert policy.backoff(0, retry_after=1.5) >= 1.5  # Retry-After is a floor...
    assert policy.backoff(0, retry_after=60.0) == 2.0  # ...within the cap
    assert policy.backoff(10_000, jitter=1.0) == 2.0  # no overflow for a cache failing for days


def test_the_deadline_not_the_attempt_count_decides_when_to_give_up() -> None:
    policy = RetryPolicy.from_settings(ConnectorSettings())  # the defaults: 0.2 s doubling to 10 s, 60 s
    elapsed, attempt = 0.0, 0
    while (delay := policy.next_delay(attempt, UNAVAILABLE, elapsed)) is not None:
        elapsed += delay  # attempts that fail at once (connection refused): only the waits count
        attempt += 1
    assert elapsed == pytest.approx(60.0)  # the last wait is cut so that one last attempt runs at the deadline
    assert attempt > 8  # the old fixed 8 attempts ran out after ~30 s of a 60 s deadline


def test_attempts_are_a_secondary_cap_only_when_set() -> None:
    capped = RetryPolicy(base_delay=0.2, max_delay=10.0, deadline=60.0, max_attempts=3)
    assert capped.next_delay(1, UNAVAILABLE, elapsed=1.0) is not None
    assert capped.next_delay(2, UNAVAILABLE, elapsed=1.0) is None
    assert ConnectorSettings().retry_attempts is None
    assert ConnectorSettings.from_mapping({"connector": {"retry-attempts": 4}}).retry_attempts == 4
    with pytest.raises(ValueError, match="retry_attempts must be a positive int, got 0"):
        ConnectorSettings(retry_attempts=0)


@pytest.mark.parametrize(
    "err", [NotFound(404, "NotFound"), Conflict(409, "AlreadyExists"), Forbidden(403, "Forbidden"), TaskRefused("x")]
)
def test_only_transient_faults_are_retried(err: Exception) -> None:
    policy = RetryPolicy(base_delay=0.2, max_delay=10.0, deadline=60.0)
    assert policy.next_delay(0, err, elapsed=0.0) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "cls", "code"),
    [
        (0, ApiUnavailable, "UNAVAILABLE"),
        (429, ApiUnavailable, "UNAVAILABLE"),
        (500, ApiUnavailable, "UNAVAILABLE"),
        (503, ApiUnavailable, "UNAVAILABLE"),
        (404, NotFound, "NOT_FOUND"),
        (409, Conflict, "ALREADY_EXISTS"),
        (403, Forbidden, "PERMISSION_DENIED"),
        (410, Gone, "OUT_OF_RANGE"),
        (422, ApiRejected, "INVALID_ARGUMENT"),
        (400, ApiRejected, "INVALID_ARGUMENT"),
    ],
)
def test_each_http_status_has_one_error_type_and_grpc_code(status: int, cls: type, code: str) -> None:
    err = api_error(status, "Reason", "message")
    assert type(err) is cls and err.status == status and grpc_status(err)[0] == code
    assert err.retryable == (code == "UNAVAILABLE")


def test_a_refused_task_is_a_value_error_as_the_project_promises() -> None:
    from flytekitplugins.kubejobs.backend.errors import BuildError

    assert issubclass(TaskRefused, ValueError)
    assert grpc_status(BuildError("custom.workers: -1"))[0] == "INVALID_ARGUMENT"
    assert grpc_status(RuntimeError("bug"))[0] == "INTERNAL"
