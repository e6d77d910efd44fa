"""The connector's offline pod-security check agrees with the real API server's Pod Security admission:
for every pod of the standards' table, a dry-run create in a namespace enforcing `baseline` and one
enforcing `restricted` is admitted exactly when our checker finds no violation at that level."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest
from flytekitplugins.kubejobs.backend.podsecurity import pod_security_violations

pytestmark = pytest.mark.slow

_spec = importlib.util.spec_from_file_location(
    "pod_security_cases", Path(__file__).resolve().parents[1] / "kubejobs" / "security" / "pod_security_cases.py"
)
assert _spec and _spec.loader
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)


def test_our_verdicts_are_the_admission_controllers(k8s: Any) -> None:
    from kubernetes import client

    core = client.CoreV1Api(k8s)
    suffix = os.urandom(3).hex()
    namespaces = {}
    for level in ("baseline", "restricted"):
        name = f"e2e-pss-{level}-{suffix}"
        labels = {"pod-security.kubernetes.io/enforce": level, "pod-security.kubernetes.io/enforce-version": "latest"}
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels)))
        namespaces[level] = name
    disagreements = []
    try:
        for case_id, template, _, _ in cases.CASES:
            for level, namespace in namespaces.items():
                pod = copy.deepcopy(template)
                pod.update(apiVersion="v1", kind="Pod")
                pod["metadata"] = {**pod.get("metadata", {}), "name": f"pss-{case_id}"}
                try:
                    core.create_namespaced_pod(namespace, pod, dry_run="All")
                    admitted = True
                except client.ApiException as e:
                    message = json.loads(e.body or "{}").get("message", "")
                    assert e.status == 403 and "violates PodSecurity" in message, (case_id, level, e.status, message)
                    admitted = False
                ours = not pod_security_violations(template, level)
                if ours != admitted:
                    disagreements.append(f"{case_id} at {level}: admission {admitted}, ours {ours}")
    finally:
        for namespace in namespaces.values():
            core.delete_namespace(namespace)
    assert not disagreements, disagreements
