"""KubeRay 1.7 RayJob status -> Flyte phase (flyte-backend-behaviour.md §3.8; ray-sdk-and-kuberay.md §4, §5.2)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest
from flytekitplugins.kubejobs.backend.status import ErrorKind, Phase, task_phase

# Reference §3.8: deployment status -> (phase, reason), as the Go plugin maps them.
GO_TABLE = [
    pytest.param(None, "", Phase.QUEUED, "Scheduling", id="missing"),
    pytest.param("", "", Phase.QUEUED, "Scheduling", id="New"),
    pytest.param("Initializing", "", Phase.INITIALIZING, "cluster is creating", id="Initializing"),
    pytest.param("Running", "RUNNING", Phase.RUNNING, None, id="Running"),
    pytest.param("Running", "PENDING", Phase.RUNNING, None, id="Running-job-pending"),
    pytest.param("Complete", "SUCCEEDED", Phase.SUCCEEDED, None, id="Complete"),
    pytest.param("Complete", "", Phase.SUCCEEDED, None, id="Complete-no-jobStatus"),
    pytest.param("Suspended", "", Phase.QUEUED, "Suspended", id="Suspended"),
    pytest.param("Suspending", "", Phase.QUEUED, "Suspending", id="Suspending"),
]


@pytest.mark.parametrize(("deployment", "job_status", "phase", "reason"), GO_TABLE)
def test_deployment_status_maps_to_go_phase(
    ray_job: Callable[..., dict[str, Any]], now: datetime, deployment: Any, job_status: Any, phase: Any, reason: Any
) -> None:
    info = task_phase(ray_job(deployment, job_status), now=now)
    assert info.phase is phase
    if reason is not None:
        assert info.reason == reason
    assert info.error_kind is None


FAILED_REASONS = [
    # (status.reason, phase, error kind)
    pytest.param("AppFailed", Phase.RETRYABLE_FAILURE, ErrorKind.USER, id="AppFailed"),
    pytest.param(
        "JobDeploymentStatusTransitionGracePeriodExceeded",
        Phase.RETRYABLE_FAILURE,
        ErrorKind.SYSTEM,
        id="GracePeriodExceeded",
    ),
    pytest.param("JobStatusCheckTimeoutExceeded", Phase.RETRYABLE_FAILURE, ErrorKind.SYSTEM, id="StatusCheckTimeout"),
    pytest.param("PreRunningDeadlineExceeded", Phase.RETRYABLE_FAILURE, ErrorKind.SYSTEM, id="PreRunningDeadline"),
    pytest.param("DeadlineExceeded", Phase.PERMANENT_FAILURE, ErrorKind.USER, id="DeadlineExceeded"),
    pytest.param("SubmissionFailed", Phase.PERMANENT_FAILURE, ErrorKind.USER, id="SubmissionFailed"),
    pytest.param("ValidationFailed", Phase.PERMANENT_FAILURE, ErrorKind.USER, id="ValidationFailed"),
]


@pytest.mark.parametrize(("reason", "phase", "kind"), FAILED_REASONS)
def test_failed_deployment_by_reason(
    ray_job: Callable[..., dict[str, Any]], now: datetime, reason: Any, phase: Any, kind: Any
) -> None:
    job = ray_job("Failed", "FAILED", reason=reason, message="it broke", end=-1)
    info = task_phase(job, now=now)
    assert (info.phase, info.error_kind, info.reason) == (phase, kind, reason)
    assert info.code == "TaskFailedWithError"
    assert info.message == f"Failed to run Ray job rj with error: [{reason}] it broke"


def test_failed_without_reason_is_a_retryable_system_failure_as_in_go(
    ray_job: Callable[..., dict[str, Any]], now: datetime
) -> None:
    info = task_phase(ray_job("Failed", "", message="boom"), now=now)
    assert (info.phase, info.error_kind) == (Phase.RETRYABLE_FAILURE, ErrorKind.SYSTEM)
    assert info.message == "Failed to run Ray job rj with error: [] boom"


def test_complete_with_failed_job_status_is_a_failure(ray_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    # Deviation: older KubeRay marks failed jobs Complete; Go would report Success.
    info = task_phase(ray_job("Complete", "FAILED", message="exit 1"), now=now)
    assert (info.phase, info.error_kind) == (Phase.RETRYABLE_FAILURE, ErrorKind.USER)
    assert info.message == "Failed to run Ray job rj with error: [AppFailed] exit 1"


def test_complete_with_stopped_job_is_a_permanent_failure(
    ray_job: Callable[..., dict[str, Any]], now: datetime
) -> None:
    # Deviation: a job stopped with `ray job stop` wrote no outputs; Go would report Success.
    info = task_phase(ray_job("Complete", "STOPPED"), now=now)
    assert info.phase is Phase.PERMANENT_FAILURE
    assert info.message == "Ray job rj was stopped before it finished"


@pytest.mark.parametrize(
    ("deployment", "start", "phase"),
    [
        pytest.param("ValidationFailed", None, Phase.PERMANENT_FAILURE, id="ValidationFailed"),
        pytest.param("Retrying", -20, Phase.RUNNING, id="Retrying"),
        pytest.param("Waiting", None, Phase.QUEUED, id="Waiting"),
        pytest.param("Teleporting", -20, Phase.RUNNING, id="unknown-started"),
        pytest.param("Teleporting", None, Phase.QUEUED, id="unknown-not-started"),
    ],
)
def test_states_go_turns_into_errors_get_a_phase(
    ray_job: Callable[..., dict[str, Any]], now: datetime, deployment: str, start: int | None, phase: Any
) -> None:
    info = task_phase(ray_job(deployment, "", message="spec.entrypoint is empty", start=start), now=now)
    assert info.phase is phase
    if deployment == "Teleporting":
        assert info.reason == "unknown job deployment status: Teleporting"
    if deployment == "ValidationFailed":
        assert "spec.entrypoint is empty" in info.message


def test_waiting_says_what_it_waits_for(ray_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    # KubeRay writes no message with Waiting (InteractiveMode): the user is told what would start the job.
    info = task_phase(ray_job("Waiting", "", start=-5), now=now)
    assert (info.phase, info.reason) == (Phase.QUEUED, "Waiting")
    assert info.message.startswith("InteractiveMode: ") and "spec.jobId" in info.message


def test_ray_has_no_operator_stall_timeout(ray_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    info = task_phase(ray_job(None, None, start=None, created=-86400, cluster=None, job_id=None), now=now)
    assert (info.phase, info.reason) == (Phase.QUEUED, "Scheduling")


def test_ray_times_are_start_and_end_time(ray_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    info = task_phase(ray_job("Complete", "SUCCEEDED", start=-20, end=-2), now=now)
    assert info.start_time == datetime(2026, 11, 30, 11, 59, 40, tzinfo=timezone.utc)
    assert info.finish_time == datetime(2026, 11, 30, 11, 59, 58, tzinfo=timezone.utc)


@pytest.mark.parametrize("deployment", [None, "", "Initializing"])
def test_a_rayjob_created_suspended_is_queued_before_kuberay_marks_it_suspended(
    ray_job: Callable[..., dict[str, Any]], now: datetime, deployment: Any
) -> None:
    # KubeRay 1.6 may write Initializing once before it acts on spec.suspend (seen under Kueue, no quota)
    obj = ray_job(deployment, "")
    obj["spec"]["suspend"] = True
    info = task_phase(obj, now=now)
    assert (info.phase, info.reason) == (Phase.QUEUED, "Suspended")
    obj["spec"]["suspend"] = False  # a running job that is starting is INITIALIZING as before
    assert task_phase(obj, now=now).phase is (Phase.INITIALIZING if deployment == "Initializing" else Phase.QUEUED)


def test_a_non_bool_spec_suspend_is_named(ray_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    obj = ray_job("Initializing", "")
    obj["spec"]["suspend"] = "yes"
    with pytest.raises(ValueError, match=r"RayJob\.spec\.suspend must be a bool, got 'yes'"):
        task_phase(obj, now=now)
