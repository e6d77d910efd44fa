"""Compute-template precedence, IDL output and the extension key."""

from __future__ import annotations

import warnings

import pytest
from flyteidl.plugins.common_pb2 import CommonReplicaSpec
from flytekit import Resources
from flytekitplugins.kubejobs import ComputeTemplate, ReplicaRole, RunPolicy, SchedulingPolicy
from flytekitplugins.kubejobs.compute import Requirements, resolve_requirements
from flytekitplugins.kubejobs.extension import build_extension, warn_extension_once
from flytekitplugins.kubejobs.idl import fill_replica_spec, run_policy_to_idl
from flytekitplugins.kubejobs.wire.extension import EXTENSION_KEY
from google.protobuf.json_format import MessageToDict

A100 = ComputeTemplate(
    name="a100",
    cpu=8,
    memory="64Gi",
    gpu=1,
    node_selector={"gpu": "a100"},
    tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
)
MI300 = ComputeTemplate(name="mi300", cpu=4, gpu=2, gpu_resource_name="amd.com/gpu", extended_resources={"x.io/ib": 1})


class Worker(ReplicaRole):
    operator_role = "Worker"


def test_precedence_pod_template_then_compute_template_then_explicit() -> None:
    base = Requirements({"cpu": "1", "memory": "1Gi", "ephemeral-storage": "10Gi"}, {"cpu": "1"})
    merged = resolve_requirements("Worker", A100, Resources(cpu="6"), Resources(mem="80Gi"), base)
    assert merged.requests == {"cpu": "6", "memory": "64Gi", "ephemeral-storage": "10Gi", "nvidia.com/gpu": "1"}
    assert merged.limits == {"cpu": "8", "memory": "80Gi", "nvidia.com/gpu": "1"}


def test_explicit_gpu_uses_the_templates_accelerator_name() -> None:
    merged = resolve_requirements("Worker", MI300, Resources(gpu="4"), Resources(gpu="4"))
    assert merged.requests["amd.com/gpu"] == "4"
    assert "nvidia.com/gpu" not in merged.requests


def test_a_template_request_above_an_explicit_limit_is_refused_not_clamped() -> None:
    with pytest.raises(ValueError, match=r"Worker: the cpu request '8' is above its limit '2'"):
        Worker(compute_template=A100, limits=Resources(cpu="2"))


def test_common_replica_spec_carries_cpu_memory_gpu_from_the_template() -> None:
    message = CommonReplicaSpec()
    fill_replica_spec(message, Worker(replicas=3, compute_template=MI300, restart_policy="always"))
    spec = MessageToDict(message)
    assert spec["replicas"] == 3
    assert spec["restartPolicy"] == "RESTART_POLICY_ALWAYS"
    assert spec["resources"]["requests"] == [{"name": "CPU", "value": "4"}, {"name": "GPU", "value": "2"}]


def test_extension_carries_what_the_idl_cannot() -> None:
    worker = Worker(replicas=2, compute_template=MI300, node_selector={"pool": "spot"}, env={"A": "1"})
    policy = RunPolicy(backoff_limit=0, suspend=True, scheduling_policy=SchedulingPolicy(min_available=3, queue="q"))
    ext = build_extension({"Worker": worker}, policy)
    assert ext == {
        "version": 1,
        "replicaSpecs": {
            "Worker": {
                "nodeSelector": {"pool": "spot"},
                "env": [{"name": "A", "value": "1"}],
                "gpuResourceName": "amd.com/gpu",
                "resources": {"requests": {"x.io/ib": "1"}, "limits": {"x.io/ib": "1"}},
            }
        },
        "runPolicy": {"suspend": True, "backoffLimit": 0, "schedulingPolicy": {"minAvailable": 3, "queue": "q"}},
    }


def test_no_extension_when_the_idl_carries_everything() -> None:
    assert (
        build_extension({"Worker": Worker(replicas=2, requests=Resources(cpu="1"))}, RunPolicy(backoff_limit=2)) is None
    )


def test_run_policy_zero_backoff_is_dropped_by_proto3_but_kept_in_the_extension() -> None:
    policy = RunPolicy(backoff_limit=0, clean_pod_policy="running")
    assert MessageToDict(run_policy_to_idl(policy)) == {"cleanPodPolicy": "CLEANPOD_POLICY_RUNNING"}
    assert build_extension({}, policy) == {"version": 1, "runPolicy": {"backoffLimit": 0}}


def test_extension_warning_is_given_once_per_kind_and_names_the_key() -> None:
    ext = build_extension({"Worker": Worker(node_selector={"a": "b"})}, None)
    assert ext is not None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_extension_once("test-kind", ext)
        warn_extension_once("test-kind", ext)
    assert len(caught) == 1
    assert EXTENSION_KEY in str(caught[0].message) and "nodeSelector" in str(caught[0].message)


def test_an_nvidia_gpu_next_to_another_accelerator_is_kept_in_the_extension() -> None:
    # The IDL's GPU count means the template's accelerator (amd.com/gpu); an nvidia.com/gpu asked for as an
    # extended resource must still reach the backend, not vanish between the two.
    mixed = ComputeTemplate(
        name="mixed", gpu=2, gpu_resource_name="amd.com/gpu", extended_resources={"nvidia.com/gpu": 1}
    )
    ext = build_extension({"Worker": Worker(replicas=1, compute_template=mixed)}, None)
    assert ext is not None
    spec = ext["replicaSpecs"]["Worker"]
    assert spec["gpuResourceName"] == "amd.com/gpu"
    assert spec["resources"] == {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
