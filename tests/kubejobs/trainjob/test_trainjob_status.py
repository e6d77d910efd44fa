"""TrainJob status -> Flyte phase: the condition sequences of Trainer v2.3's trainjob_controller.go and its JobSet
plugin (condition types, reasons and messages are the controller's constants), log links from the JobSet pods."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import pytest
from flytekitplugins.kubejobs.backend import Phase, task_phase
from flytekitplugins.kubejobs.backend.trainjob_status import trainjob_phase

NOW = datetime(2026, 1, 1, 1, 0, tzinfo=timezone.utc)
T0 = "2026-01-01T00:00:00Z"


def _job(
    conditions: Sequence[dict[str, str]] = (), jobs: Sequence[dict[str, int]] = (), **status: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "ns", "creationTimestamp": T0},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 2}},
        "status": {"conditions": list(conditions), "jobsStatus": list(jobs), **status},
    }


def _cond(ctype: str, status: str, reason: str, message: str, when: str = "2026-01-01T00:10:00Z") -> dict[str, str]:
    return {"type": ctype, "status": status, "reason": reason, "message": message, "lastTransitionTime": when}


def _rjob(name: str = "node", **counts: int) -> dict[str, Any]:
    return {"name": name, **{k: counts.get(k, 0) for k in ("ready", "succeeded", "failed", "active", "suspended")}}


@pytest.mark.parametrize(
    "obj, phase, reason",
    [
        (_job(), Phase.QUEUED, "JobCreated"),
        (_job(jobs=[_rjob(active=1)]), Phase.RUNNING, "Running"),
        (_job([_cond("Suspended", "True", "Suspended", "TrainJob is suspended")]), Phase.QUEUED, "Suspended"),
        (
            _job([_cond("Suspended", "False", "Resumed", "TrainJob is resumed")], [_rjob(ready=1, active=1)]),
            Phase.RUNNING,
            "Running",
        ),
        (
            _job(
                [_cond("Complete", "True", "AllJobsCompleted", "jobset completed successfully")], [_rjob(succeeded=1)]
            ),
            Phase.SUCCEEDED,
            "AllJobsCompleted",
        ),
        (
            _job([_cond("Failed", "True", "FailedJobs", "jobset failed due to one or more job failures")]),
            Phase.RETRYABLE_FAILURE,
            "FailedJobs",
        ),
        (
            _job([_cond("Failed", "True", "DeadlineExceeded", "TrainJob exceeded its active deadline")]),
            Phase.PERMANENT_FAILURE,
            "DeadlineExceeded",
        ),
        (
            _job([_cond("Failed", "True", "TrainingRuntimeNotSupported", "unsupported runtime: x")]),
            Phase.PERMANENT_FAILURE,
            "TrainingRuntimeNotSupported",
        ),
    ],
)
def test_status_table(obj: Any, phase: Any, reason: str) -> None:
    info = task_phase(obj, now=NOW)  # dispatched from the shared entry point
    assert (info.phase, info.reason) == (phase, reason)
    if phase.is_failure:
        assert obj["status"]["conditions"][0]["message"] in info.message and info.code


def test_suspended_says_it_waits_and_is_not_a_failure() -> None:
    info = trainjob_phase(_job([_cond("Suspended", "True", "Suspended", "TrainJob is suspended")]), now=NOW)
    assert info.phase is Phase.QUEUED and "TrainJob is suspended" in info.message and info.error_kind is None


def test_progress_and_jobs_status_in_the_message() -> None:
    trainer_status = {
        "progressPercentage": 40,
        "estimatedRemainingSeconds": 120,
        "lastUpdatedTime": T0,
        "metrics": [{"name": "loss", "value": "0.25"}],
    }
    info = trainjob_phase(_job(jobs=[_rjob(ready=1, active=2)], trainerStatus=trainer_status), now=NOW)
    assert info.phase is Phase.RUNNING
    assert "40% done" in info.message and "120s left" in info.message and "loss=0.25" in info.message
    assert "node: 1 ready, 2 active" in info.message


def _pod(name: str, rjob: str, job_index: int, pod_index: int, created: str = T0) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "creationTimestamp": created,
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": "tj",
                "jobset.sigs.k8s.io/replicatedjob-name": rjob,
                "jobset.sigs.k8s.io/job-index": str(job_index),
                "batch.kubernetes.io/job-completion-index": str(pod_index),
            },
        }
    }


def test_log_links_use_the_listed_pod_names_newest_per_rank() -> None:
    pods = [
        _pod("tj-node-0-1-abcde", "node", 0, 1),
        _pod("tj-node-0-0-zzzzz", "node", 0, 0),
        _pod("tj-node-0-0-newer", "node", 0, 0, "2026-01-01T00:30:00Z"),  # a restarted Job's pod
        _pod("tj-launcher-0-0-qqqqq", "launcher", 0, 0),
        {"metadata": {"name": "other", "labels": {"jobset.sigs.k8s.io/jobset-name": "else"}}},
    ]
    info = trainjob_phase(_job(jobs=[_rjob("launcher", active=1), _rjob("node", active=2)]), now=NOW, pods=pods)
    assert [link.name for link in info.logs] == [
        "Kubernetes Logs launcher-0",
        "Kubernetes Logs node-0",
        "Kubernetes Logs node-1",
    ]
    assert "tj-node-0-0-newer" in info.logs[1].uri and "tj-node-0-1-abcde" in info.logs[2].uri


def test_no_pods_no_guessed_links() -> None:
    assert trainjob_phase(_job(jobs=[_rjob(active=1)]), now=NOW).logs == ()


def test_malformed_status_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="jobsStatus"):
        trainjob_phase({**_job(), "status": {"jobsStatus": "x"}}, now=NOW)
