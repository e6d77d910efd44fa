"""The connector's pod-security check: the Pod Security Standards levels on every pod template of an
object the backend builds. Expected verdicts come from the Kubernetes Pod Security Standards
(pod_security_cases.py); tests/e2e asks the real Pod Security admission the same questions."""

from __future__ import annotations

from typing import Any

import pytest
from flytekitplugins.kubejobs.backend.podsecurity import check_level, pod_security_violations

from .pod_security_cases import CASES, pod


@pytest.mark.parametrize(("template", "baseline", "restricted"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_verdict_at_each_level_is_the_standards(template: dict[str, Any], baseline: bool, restricted: bool) -> None:
    assert pod_security_violations(template, "privileged") == []
    assert (pod_security_violations(template, "baseline") == []) is baseline
    assert (pod_security_violations(template, "restricted") == []) is restricted


def test_violations_name_the_field_inside_the_job_object() -> None:
    # A PyTorchJob as the backend builds it: the worker's pod template asks for the host's network and a
    # hostPath of the node's root.
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": pod()},
                "Worker": {
                    "replicas": 2,
                    "template": pod({"hostNetwork": True, "volumes": [{"name": "root", "hostPath": {"path": "/"}}]}),
                },
            }
        },
    }
    found = [str(v) for v in pod_security_violations(job, "baseline")]
    assert found == [
        "spec.pytorchReplicaSpecs.Worker.template.spec.hostNetwork: host namespaces (hostNetwork=true) is not allowed"
        " at level baseline",
        "spec.pytorchReplicaSpecs.Worker.template.spec.volumes[0].hostPath: a hostPath volume ('root') is not allowed"
        " at level baseline",
    ]


def test_ray_groups_and_lists_of_templates_are_all_checked() -> None:
    job = {
        "spec": {
            "rayClusterSpec": {
                "headGroupSpec": {"template": pod()},
                "workerGroupSpecs": [
                    {"groupName": "a", "template": pod()},
                    {"groupName": "b", "template": pod(container={"securityContext": {"privileged": True}})},
                ],
            },
            "submitterPodTemplate": pod({"hostPID": True}),
        }
    }
    assert [v.path for v in pod_security_violations(job, "baseline")] == [
        "spec.rayClusterSpec.workerGroupSpecs[1].template.spec.containers[0].securityContext.privileged",
        "spec.submitterPodTemplate.spec.hostPID",
    ]


def test_one_violation_per_field_at_restricted() -> None:
    template = pod(container={"securityContext": {"capabilities": {"add": ["SYS_ADMIN"], "drop": ["ALL"]}}})
    violations = pod_security_violations(template, "restricted")
    assert [(v.path, v.rule) for v in violations] == [
        ("spec.containers[0].securityContext.capabilities.add", "adding the capabilities ['SYS_ADMIN']")
    ]


@pytest.mark.parametrize("level", ["Baseline", "", None, "strict"])
def test_an_unknown_level_is_refused(level: object) -> None:
    with pytest.raises(ValueError, match=r"pod_security must be one of privileged, baseline, restricted, got"):
        check_level("pod_security", level)
