"""Training Operator conditions -> Flyte phase (flyte-backend-behaviour.md §2.1-§2.2, §10 item 10).

Condition tuples are ``(type, status, seconds relative to now, reason, message)``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest
from flytekitplugins.kubejobs.backend.plugins_config import BackendConfig
from flytekitplugins.kubejobs.backend.status import ErrorKind, Phase, task_phase

KINDS = ["PyTorchJob", "TFJob", "MPIJob"]
TASK_TYPES = {"PyTorchJob": "pytorch", "TFJob": "tensorflow", "MPIJob": "mpi"}
CREATED = ("Created", "True", -20, "JobCreated", "job created")

# Reference §2.2 table: current condition -> (phase, reason asserted or None).
GO_TABLE = [
    pytest.param(None, Phase.QUEUED, "JobCreated", id="no-conditions"),
    pytest.param([CREATED], Phase.QUEUED, "JobCreated", id="Created"),
    pytest.param([CREATED, ("Running", "True", -10, "JobRunning", "")], Phase.RUNNING, None, id="Running"),
    pytest.param(
        [CREATED, ("Running", "False", -10, "JobRunning", ""), ("Restarting", "True", -5, "JobRestarting", "")],
        Phase.RUNNING,
        None,
        id="Restarting",
    ),
    pytest.param(
        [CREATED, ("Running", "False", -10, "JobRunning", ""), ("Succeeded", "True", -5, "JobSucceeded", "")],
        Phase.SUCCEEDED,
        None,
        id="Succeeded",
    ),
    pytest.param([CREATED, ("Suspended", "True", -10, "JobSuspended", "")], Phase.QUEUED, "Suspended", id="Suspended"),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("conditions", "phase", "reason"), GO_TABLE)
def test_condition_maps_to_go_phase(
    kubeflow_job: Callable[..., dict[str, Any]], now: datetime, kind: Any, conditions: Any, phase: Any, reason: Any
) -> None:
    info = task_phase(kubeflow_job(kind, conditions=conditions), now=now)
    assert info.phase is phase
    if reason is not None:
        assert info.reason == reason
    assert info.code == "" and info.error_kind is None


@pytest.mark.parametrize("kind", KINDS)
def test_failed_condition_is_a_retryable_user_failure_with_go_message(
    kubeflow_job: Callable[..., dict[str, Any]], now: datetime, kind: Any
) -> None:
    conditions = [
        CREATED,
        ("Running", "False", -10, "JobRunning", ""),
        ("Failed", "True", -5, "JobFailed", "job-worker-0 exited with code 1"),
    ]
    info = task_phase(kubeflow_job(kind, conditions=conditions, completion=-5), now=now)
    assert info.phase is Phase.RETRYABLE_FAILURE
    assert info.code == "DownstreamSystemError"
    assert info.error_kind is ErrorKind.USER
    assert info.message == "Job failed:\n\tJobFailed - job-worker-0 exited with code 1"
    assert info.reason == "JobFailed"


def test_start_and_finish_times_come_from_status(
    kubeflow_job: Callable[..., dict[str, Any]], now: datetime, at: Callable[[float], str]
) -> None:
    conditions = [CREATED, ("Succeeded", "True", -5, "JobSucceeded", "")]
    info = task_phase(kubeflow_job("PyTorchJob", conditions=conditions, start=-20, completion=-5), now=now)
    assert info.start_time == datetime(2026, 11, 30, 11, 59, 40, tzinfo=timezone.utc)
    assert info.finish_time == datetime(2026, 11, 30, 11, 59, 55, tzinfo=timezone.utc)
    running = task_phase(kubeflow_job("PyTorchJob", conditions=[CREATED], start=None, created=-1), now=now)
    assert running.start_time is None and running.finish_time is None


# --- which condition is current ----------------------------------------------------------------------


def test_newest_true_condition_wins_regardless_of_list_order(
    kubeflow_job: Callable[..., dict[str, Any]], now: datetime
) -> None:
    conditions = [("Running", "True", -10, "JobRunning", ""), CREATED]
    assert task_phase(kubeflow_job("PyTorchJob", conditions=conditions), now=now).phase is Phase.RUNNING


def test_newer_false_condition_is_skipped(kubeflow_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    conditions = [CREATED, ("Running", "False", -5, "JobRunning", "")]
    info = task_phase(kubeflow_job("PyTorchJob", conditions=conditions), now=now)
    assert (info.phase, info.reason) == (Phase.QUEUED, "JobCreated")


def test_same_second_tie_goes_to_the_later_entry(kubeflow_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    # Deviation: Go's order for equal lastTransitionTime is unspecified; the operator appends conditions.
    conditions = [("Created", "True", -10, "JobCreated", ""), ("Running", "True", -10, "JobRunning", "")]
    assert task_phase(kubeflow_job("TFJob", conditions=conditions), now=now).phase is Phase.RUNNING


def test_condition_without_transition_time_counts_as_oldest(
    kubeflow_job: Callable[..., dict[str, Any]], now: datetime
) -> None:
    job = kubeflow_job("MPIJob", conditions=[CREATED])
    job["status"]["conditions"].append({"type": "Running", "status": "True"})
    info = task_phase(job, now=now)
    assert (info.phase, info.reason) == (Phase.QUEUED, "JobCreated")


def test_empty_condition_list_is_queued_not_an_error(
    kubeflow_job: Callable[..., dict[str, Any]], now: datetime
) -> None:
    # Deviation: Go errors with "found no current condition".
    info = task_phase(kubeflow_job("PyTorchJob", conditions=[]), now=now)
    assert (info.phase, info.reason) == (Phase.QUEUED, "JobCreated")


@pytest.mark.parametrize(("start", "phase"), [(None, Phase.QUEUED), (-20, Phase.RUNNING)])
def test_no_true_condition_is_waiting_not_an_error(
    kubeflow_job: Callable[..., dict[str, Any]], now: datetime, start: int | None, phase: Any
) -> None:
    # Deviation: Go errors with "found no current condition".
    conditions = [("Created", "False", -20, "JobCreated", ""), ("Running", "False", -10, "JobRunning", "")]
    info = task_phase(kubeflow_job("PyTorchJob", conditions=conditions, start=start, created=-5), now=now)
    assert info.phase is phase
    assert info.reason.startswith("found no current condition")


@pytest.mark.parametrize(("start", "phase"), [(None, Phase.QUEUED), (-20, Phase.RUNNING)])
def test_unknown_condition_type_is_not_an_error(
    kubeflow_job: Callable[..., dict[str, Any]], now: datetime, start: int | None, phase: Any
) -> None:
    conditions = [CREATED, ("Preempted", "True", -5, "Preempted", "node drained")]
    info = task_phase(kubeflow_job("PyTorchJob", conditions=conditions, start=start, created=-5), now=now)
    assert info.phase is phase
    assert "Preempted" in info.reason


# --- operator-stall timeout ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_no_start_time_after_timeout_is_a_retryable_system_failure(
    kubeflow_job: Callable[..., dict[str, Any]], now: datetime, kind: Any
) -> None:
    info = task_phase(kubeflow_job(kind, conditions=None, start=None, created=-61), now=now)
    assert info.phase is Phase.RETRYABLE_FAILURE
    assert info.error_kind is ErrorKind.SYSTEM
    assert info.message == (
        f"kubeflow operator hasn't updated the {TASK_TYPES[kind]} custom resource "
        "since creation time 2026-11-30T11:58:59Z"
    )


def test_stall_timeout_is_strict_and_one_minute_by_default(
    kubeflow_job: Callable[..., dict[str, Any]], now: datetime
) -> None:
    info = task_phase(kubeflow_job("PyTorchJob", conditions=None, start=None, created=-60), now=now)
    assert info.phase is Phase.QUEUED


def test_stall_is_checked_before_conditions(kubeflow_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    job = kubeflow_job("PyTorchJob", conditions=[CREATED], start=None, created=-3600)
    assert task_phase(job, now=now).phase is Phase.RETRYABLE_FAILURE


def test_suspended_job_never_stalls(kubeflow_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    conditions = [CREATED, ("Suspended", "True", -10, "JobSuspended", "")]
    job = kubeflow_job("TFJob", conditions=conditions, start=None, created=-3600, suspend=True)
    info = task_phase(job, now=now)
    assert (info.phase, info.reason) == (Phase.QUEUED, "Suspended")


def test_started_job_never_stalls(kubeflow_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    job = kubeflow_job("MPIJob", conditions=[CREATED], start=-3500, created=-3600)
    assert task_phase(job, now=now).phase is Phase.QUEUED


def test_stall_timeout_comes_from_kf_operator_config(
    kubeflow_job: Callable[..., dict[str, Any]], now: datetime
) -> None:
    config = BackendConfig.from_flyte_config({"kf-operator": {"timeout": "5m"}})
    waiting = task_phase(kubeflow_job("PyTorchJob", conditions=None, start=None, created=-300), config, now=now)
    assert waiting.phase is Phase.QUEUED
    stalled = task_phase(kubeflow_job("PyTorchJob", conditions=None, start=None, created=-301), config, now=now)
    assert stalled.phase is Phase.RETRYABLE_FAILURE


def test_naive_now_is_utc(kubeflow_job: Callable[..., dict[str, Any]]) -> None:
    job = kubeflow_job("PyTorchJob", conditions=None, start=None, created=-61)
    assert task_phase(job, now=datetime(2026, 11, 30, 12, 0, 0)).phase is Phase.RETRYABLE_FAILURE


def test_public_api_path(kubeflow_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    from flytekitplugins.kubejobs.backend import BackendConfig as PublicConfig
    from flytekitplugins.kubejobs.backend import task_phase as public_task_phase

    info = public_task_phase(kubeflow_job("PyTorchJob", conditions=[CREATED]), config=PublicConfig(), now=now)
    assert (info.phase, info.reason) == (Phase.QUEUED, "JobCreated")
