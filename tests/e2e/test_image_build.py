"""The ImageSpec builder ``kaniko`` on the real control plane.

The ConfigMap and Job it builds are accepted unchanged by the real API server (dry run, strict field
validation), the ConfigMap limit is the API server's; a build is driven through ``KanikoImageBuilder``
with a ServiceAccount bound only by ``deploy/imagebuild-rbac.yaml``'s Role: the job controller creates the
pod (in a namespace enforcing Pod Security ``baseline``), kwok's node runs no container, so the pod's outcome
is set here: succeeded (kwok's own Job-pod stage) reports the image; failed with a terminated message
(patched in by the test while the pod runs) raises with the log tail, as ``FallbackToLogsOnError`` leaves it
when the logs API has no kubelet to ask.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from flytekit import ImageSpec
from flytekitplugins.kubejobs.imagebuild import (
    MAX_CONTEXT_BYTES,
    BuildSettings,
    ImageBuildFailed,
    KanikoImageBuilder,
    render,
)

from .controlplane import OUTCOME, REPO, write_kubeconfig

pytestmark = pytest.mark.slow

SPEC = ImageSpec(
    name="train",
    registry="registry.example:5000/ml",
    base_image="python:3.11-slim",
    packages=["numpy==2.1.0"],
    apt_packages=["git"],
    env={"MODE": "$(not expanded)"},
    commands=["echo built > /built"],
    builder="kaniko",
)


def _is_subset(sent: Any, got: Any) -> bool:
    if isinstance(sent, dict):
        return isinstance(got, dict) and all(k in got and _is_subset(v, got[k]) for k, v in sent.items())
    if isinstance(sent, list):
        return isinstance(got, list) and len(sent) == len(got) and all(map(_is_subset, sent, got))
    return bool(sent == got or str(sent) == str(got))


def _settings(namespace: str, **overrides: Any) -> BuildSettings:
    return BuildSettings(namespace=namespace, registry_secret="registry-push", service_account=None, **overrides)


def test_the_configmap_and_job_are_accepted_unchanged(k8s: Any, namespace: str) -> None:
    from kubernetes import client

    built = render(SPEC, _settings(namespace))
    core: Any = client.CoreV1Api(k8s)
    batch: Any = client.BatchV1Api(k8s)
    got_cm = core.create_namespaced_config_map(namespace, built["configmap"], dry_run="All", field_validation="Strict")
    got_job = batch.create_namespaced_job(namespace, built["job"], dry_run="All", field_validation="Strict")
    assert _is_subset(built["configmap"], k8s.sanitize_for_serialization(got_cm))
    assert _is_subset(built["job"], k8s.sanitize_for_serialization(got_job))


def test_the_context_limit_is_the_api_servers(k8s: Any, namespace: str) -> None:
    import base64

    from kubernetes import client

    core: Any = client.CoreV1Api(k8s)

    def configmap(size: int) -> dict[str, Any]:
        data = base64.b64encode(b"\0" * size).decode()
        return {"metadata": {"name": "limit"}, "binaryData": {"context.tar.gz": data}}

    core.create_namespaced_config_map(namespace, configmap(MAX_CONTEXT_BYTES), dry_run="All")
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_config_map(namespace, configmap(MAX_CONTEXT_BYTES + 1), dry_run="All")
    assert refused.value.status == 422


@pytest.fixture
def builder_kubeconfig(k8s: Any, cluster: dict[str, Any], namespace: str, tmp_path: Path) -> Path:
    """A kubeconfig of a ServiceAccount that deploy/imagebuild-rbac.yaml's Role (in ``namespace``) binds."""
    from kubernetes import client

    utils: Any = __import__("kubernetes.utils").utils  # untyped

    docs = [d for d in yaml.safe_load_all((REPO / "deploy" / "imagebuild-rbac.yaml").read_text()) if d]
    for doc in docs:
        doc["metadata"]["namespace"] = namespace
        if doc["kind"] == "RoleBinding":
            doc["subjects"] = [{"kind": "ServiceAccount", "name": "builder", "namespace": namespace}]
    core: Any = client.CoreV1Api(k8s)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "builder"}})
    utils.create_from_yaml(k8s, yaml_objects=docs, namespace=namespace)
    issued = core.create_namespaced_service_account_token(
        "builder", namespace, client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[]))
    ).status
    assert issued is not None and issued.token
    return write_kubeconfig(
        tmp_path / "builder.yaml", cluster["server"], Path(cluster["ca"]), "builder", None, issued.token
    )


def test_a_succeeded_build_reports_the_pushed_image(k8s: Any, namespace: str, builder_kubeconfig: Path) -> None:
    from kubernetes import client

    lines: list[str] = []
    builder = KanikoImageBuilder(_settings(namespace, kubeconfig=str(builder_kubeconfig)), report=lines.append)
    image = builder.build_image(SPEC)
    assert image is not None and image == SPEC.image_name() and image.startswith("registry.example:5000/ml/train:")
    assert lines[0].startswith(f"kaniko: building {image} in Job {namespace}/kaniko-")
    assert lines[-1] == f"kaniko: pushed {image}"
    assert any(line.endswith(" Succeeded") for line in lines)
    core: Any = client.CoreV1Api(k8s)
    batch: Any = client.BatchV1Api(k8s)
    (job,) = batch.list_namespaced_job(namespace).items
    selector = "app.kubernetes.io/component=image-build"
    (configmap,) = core.list_namespaced_config_map(namespace, label_selector=selector).items
    # The Job owns the context, so its TTL collects both.
    owners = [(o.kind, o.name, o.uid) for o in configmap.metadata.owner_references]
    assert owners == [("Job", job.metadata.name, job.metadata.uid)]
    (pod,) = core.list_namespaced_pod(namespace, label_selector=f"job-name={job.metadata.name}").items
    container = pod.spec.containers[0]
    assert container.args[2] == f"--destination={image}"
    assert [m.mount_path for m in container.volume_mounts] == ["/kaniko/context-archive", "/kaniko/.docker"]


def test_a_failed_build_raises_with_the_log_tail(k8s: Any, namespace: str, builder_kubeconfig: Path) -> None:
    from kubernetes import client

    core: Any = client.CoreV1Api(k8s)
    log = "\n".join(f"INFO[{i:04d}] step {i}" for i in range(60)) + "\nerror building image: exit status 100"

    def report(line: str) -> None:
        # The pod stays Running (its outcome annotation matches no kwok stage); end it as kaniko's exit would.
        if line.endswith(" Running"):
            pod_name = line.split(" ")[2]
            status = {
                "phase": "Failed",
                "containerStatuses": [
                    {
                        "name": "kaniko",
                        "image": "gcr.io/kaniko-project/executor:v1.23.2",
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {"terminated": {"exitCode": 1, "reason": "Error", "message": log}},
                    }
                ],
            }
            core.patch_namespaced_pod_status(pod_name, namespace, {"status": status})

    settings = _settings(namespace, kubeconfig=str(builder_kubeconfig), pod_annotations={OUTCOME: "manual"})
    with pytest.raises(ImageBuildFailed) as failed:
        KanikoImageBuilder(settings, report=report).build_image(SPEC)
    message = str(failed.value)
    assert f"kaniko: the build of {SPEC.image_name()} failed (pod {namespace}/kaniko-" in message
    assert message.endswith("error building image: exit status 100")
    assert failed.value.log_tail.splitlines()[0] == "INFO[0021] step 21"  # the last 40 lines


def test_a_namespace_that_refuses_the_pod_fails_the_build_at_once(
    k8s: Any, namespace: str, builder_kubeconfig: Path
) -> None:
    """Pod Security ``restricted`` refuses the root container: the job controller's FailedCreate ends the wait."""
    from kubernetes import client

    core: Any = client.CoreV1Api(k8s)
    core.patch_namespace(namespace, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
    builder = KanikoImageBuilder(_settings(namespace, kubeconfig=str(builder_kubeconfig)), report=lambda _: None)
    with pytest.raises(ImageBuildFailed) as failed:
        builder.build_image(SPEC)
    assert f"kaniko: Job {namespace}/kaniko-" in str(failed.value)
    assert "FailedCreate" in str(failed.value) and "violates PodSecurity" in str(failed.value)
