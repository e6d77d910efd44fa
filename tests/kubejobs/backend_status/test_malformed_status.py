"""Malformed objects: a clear phase or a ValueError naming the field, never another exception."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest
from flytekitplugins.kubejobs.backend.status import Phase, PhaseInfo, task_phase
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("obj", "names"),
    [
        (["PyTorchJob"], "mapping"),
        ({}, "kind"),
        ({"kind": "Pod"}, "kind"),
        ({"kind": ["PyTorchJob"]}, "kind"),
        ({"kind": "PyTorchJob", "status": []}, "PyTorchJob.status"),
        ({"kind": "PyTorchJob", "metadata": "job"}, "PyTorchJob.metadata"),
        ({"kind": "TFJob", "metadata": {"name": 7}}, "TFJob.metadata.name"),
        ({"kind": "TFJob", "metadata": {"creationTimestamp": "yesterday"}}, "TFJob.metadata.creationTimestamp"),
        ({"kind": "MPIJob", "status": {"conditions": {"type": "Running"}}}, "MPIJob.status.conditions"),
        ({"kind": "MPIJob", "status": {"conditions": ["Running"]}}, r"MPIJob.status.conditions\[0\]"),
        (
            {"kind": "MPIJob", "status": {"conditions": [{"type": "Running", "status": True}]}},
            r"MPIJob.status.conditions\[0\].status",
        ),
        (
            {"kind": "MPIJob", "status": {"conditions": [{"type": "Running", "lastTransitionTime": 5}]}},
            r"MPIJob.status.conditions\[0\].lastTransitionTime",
        ),
        ({"kind": "PyTorchJob", "status": {"startTime": 1700000000}}, "PyTorchJob.status.startTime"),
        ({"kind": "PyTorchJob", "spec": {"runPolicy": {"suspend": "true"}}}, "PyTorchJob.spec.runPolicy.suspend"),
        (
            {"kind": "PyTorchJob", "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": "2"}}}},
            "PyTorchJob.spec.pytorchReplicaSpecs.Worker.replicas",
        ),
        ({"kind": "TFJob", "spec": {"tfReplicaSpecs": {"PS": 2}}}, "TFJob.spec.tfReplicaSpecs.PS"),
        ({"kind": "RayJob", "status": {"jobDeploymentStatus": 3}}, "RayJob.status.jobDeploymentStatus"),
        ({"kind": "RayJob", "status": {"endTime": "0001-01-01T00:00:00+05:00"}}, "RayJob.status.endTime"),
    ],
)
def test_malformed_object_is_a_value_error_naming_the_field(obj: Any, names: str) -> None:
    with pytest.raises(ValueError, match=names.replace(".", r"\.")):
        task_phase(obj, now=NOW)


def test_bare_objects_get_a_phase() -> None:
    # No metadata, spec or status at all: nothing is known yet, and no creation time means no stall check.
    assert task_phase({"kind": "PyTorchJob"}, now=NOW).phase is Phase.QUEUED
    assert task_phase({"kind": "RayJob"}, now=NOW).reason == "Scheduling"
    nulls = {"kind": "TFJob", "metadata": None, "spec": None, "status": None}
    assert task_phase(nulls, now=NOW).phase is Phase.QUEUED


def test_input_object_is_not_modified(kubeflow_job: Callable[..., dict[str, Any]]) -> None:
    import copy

    job = kubeflow_job("PyTorchJob", conditions=[("Running", "True", -5, "", ""), ("Created", "True", -9, "", "")])
    before = copy.deepcopy(job)
    task_phase(job, now=NOW)
    assert job == before


# --- fuzz ------------------------------------------------------------------------------------------------

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.sampled_from(
        ["True", "False", "Running", "Failed", "Complete", "RUNNING", "2026-11-30T11:00:00Z", "9999-12-31T23:59:59Z"]
    ),
)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=10,
)
_times = st.one_of(_json, st.datetimes(timezones=st.just(timezone.utc)).map(lambda d: d.isoformat()))
_condition = st.one_of(
    _json,
    st.fixed_dictionaries(
        {},
        optional={
            "type": st.one_of(
                st.sampled_from(["Created", "Running", "Restarting", "Succeeded", "Suspended", "Failed"]), _json
            ),
            "status": st.one_of(st.sampled_from(["True", "False", "Unknown"]), _json),
            "lastTransitionTime": _times,
            "reason": _json,
            "message": _json,
        },
    ),
)
_status = st.fixed_dictionaries(
    {},
    optional={
        "conditions": st.one_of(_json, st.lists(_condition, max_size=4)),
        "startTime": _times,
        "completionTime": _times,
        "endTime": _times,
        "jobDeploymentStatus": st.one_of(
            st.sampled_from(
                [
                    "",
                    "Initializing",
                    "Running",
                    "Complete",
                    "Failed",
                    "Suspending",
                    "Suspended",
                    "Retrying",
                    "Waiting",
                    "ValidationFailed",
                ]
            ),
            _json,
        ),
        "jobStatus": st.one_of(st.sampled_from(["", "PENDING", "RUNNING", "STOPPED", "SUCCEEDED", "FAILED"]), _json),
        "reason": _json,
        "message": _json,
        "rayClusterName": _json,
        "dashboardURL": _json,
        "jobId": _json,
    },
)
_replica_specs = st.dictionaries(
    st.sampled_from(["Master", "Worker", "PS", "Chief", "Evaluator", "Launcher"]),
    st.one_of(_json, st.fixed_dictionaries({"replicas": st.one_of(st.integers(-5, 2**40), _json)})),
    max_size=4,
)


@st.composite
def _objects(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(["PyTorchJob", "TFJob", "MPIJob", "RayJob"]))
    spec_key = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs", "MPIJob": "mpiReplicaSpecs"}
    spec = draw(
        st.one_of(
            _json,
            st.fixed_dictionaries(
                {},
                optional={
                    spec_key.get(kind, "rayClusterSpec"): st.one_of(_json, _replica_specs),
                    "runPolicy": st.one_of(_json, st.fixed_dictionaries({}, optional={"suspend": _json})),
                },
            ),
        )
    )
    metadata = draw(
        st.one_of(
            _json,
            st.fixed_dictionaries({}, optional={"name": _json, "namespace": _json, "creationTimestamp": _times}),
        )
    )
    return {"kind": kind, "metadata": metadata, "spec": spec, "status": draw(st.one_of(_json, _status))}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=_objects(), now=st.datetimes(timezones=st.just(timezone.utc)))
def test_fuzzed_objects_give_a_phase_or_a_value_error(obj: Any, now: datetime) -> None:
    try:
        info = task_phase(obj, now=now)
    except ValueError as e:
        assert str(e)  # a message, naming what was wrong
        return
    assert isinstance(info, PhaseInfo)
    assert isinstance(info.phase, Phase)
    info.to_task_logs()
