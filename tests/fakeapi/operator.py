"""The operator the fake API server plays: status written to a job at each step of its schedule.

A job's *outcome* (``"succeed"``, ``"fail"`` or ``"hang"``) picks a list of stages; each call to
``FakeApiServer.step()`` moves every live job one stage on. The statuses have the shapes the real
controllers write (training-operator v1 ``JobStatus`` conditions, KubeRay ``RayJobStatus``), so the
backend's phase mapping sees what it sees on a cluster.

>>> [s["conditions"][-1]["type"] for s in kubeflow_stages("succeed", "2026-01-01T00:00:00Z")]
['Created', 'Running', 'Succeeded']
>>> [s["jobDeploymentStatus"] for s in ray_stages("fail", "2026-01-01T00:00:00Z", "job-1")]
['Initializing', 'Running', 'Failed']
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["OUTCOMES", "Outcome", "kubeflow_stages", "ray_stages", "stages_for"]

Outcome = Literal["succeed", "fail", "hang"]
OUTCOMES: tuple[Outcome, ...] = ("succeed", "fail", "hang")

#: Reason and message a failed Training Operator job carries (as the controller writes them).
KUBEFLOW_FAILURE = ("Failed", "job fake-operator failed because it has reached the specified backoff limit")
RAY_FAILURE = ("AppFailed", "job submission failed: exit code 1")


def _condition(kind: str, now: str, reason: str, message: str, status: str = "True") -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastUpdateTime": now,
        "lastTransitionTime": now,
    }


def kubeflow_stages(outcome: Outcome, now: str) -> list[dict[str, Any]]:
    """Statuses of a Training Operator job: Created, then Running, then Succeeded or Failed.

    As in training-operator, an earlier condition stays in the list with ``status: "False"`` once a
    later one becomes current, and ``startTime``/``completionTime`` appear with Running/the end.
    """
    created = _condition("Created", now, "JobCreated", "job is created.")
    running = _condition("Running", now, "JobRunning", "job is running.")
    stages: list[dict[str, Any]] = [{"conditions": [created]}]
    stages.append({"conditions": [created, running], "startTime": now, "replicaStatuses": {"Worker": {"active": 1}}})
    if outcome == "hang":
        return stages
    done_running = dict(running, status="False")
    if outcome == "succeed":
        end = _condition("Succeeded", now, "JobSucceeded", "job successfully completed.")
        replicas = {"Worker": {"succeeded": 1}}
    else:
        end = _condition("Failed", now, KUBEFLOW_FAILURE[0], KUBEFLOW_FAILURE[1])
        replicas = {"Worker": {"failed": 1}}
    end_status = {"conditions": [created, done_running, end], "startTime": now, "completionTime": now}
    stages.append(dict(end_status, replicaStatuses=replicas))
    return stages


def ray_stages(outcome: Outcome, now: str, name: str) -> list[dict[str, Any]]:
    """Statuses of a KubeRay RayJob: Initializing, Running, then Complete or Failed."""
    cluster = f"{name}-raycluster-fake0"[:63]
    base = {"jobId": f"{name}-id", "rayClusterName": cluster, "startTime": now}
    stages: list[dict[str, Any]] = [dict(base, jobDeploymentStatus="Initializing")]
    stages.append(
        dict(base, jobDeploymentStatus="Running", jobStatus="RUNNING", dashboardURL=f"{cluster}-head-svc:8265")
    )
    if outcome == "hang":
        return stages
    if outcome == "succeed":
        stages.append(dict(base, jobDeploymentStatus="Complete", jobStatus="SUCCEEDED", endTime=now))
    else:
        stages.append(
            dict(
                base,
                jobDeploymentStatus="Failed",
                jobStatus="FAILED",
                endTime=now,
                reason=RAY_FAILURE[0],
                message=RAY_FAILURE[1],
                failed=1,
            )
        )
    return stages


def stages_for(group: str, outcome: Outcome, now: str, name: str) -> list[dict[str, Any]]:
    """The stage list for a job of API group ``group`` (``ray.io`` or ``kubeflow.org``)."""
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
    return ray_stages(outcome, now, name) if group == "ray.io" else kubeflow_stages(outcome, now)
