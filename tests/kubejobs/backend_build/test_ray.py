"""RayJob building (flyte-backend-behaviour.md §3, §10 quirks 11-18)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from flytekitplugins.kubejobs.backend import BackendConfig, BuildError, build_object
from flytekitplugins.kubejobs.backend.plugins_config import RayConfig

HEAD_DEFAULT = {
    "dashboard-host": "0.0.0.0",
    "disable-usage-stats": "true",
    "include-dashboard": "true",
    "node-ip-address": "$MY_POD_IP",
}


def ray_custom(**extra: Any) -> dict[str, Any]:
    cluster = {
        "headGroupSpec": {"rayStartParams": {"num-cpus": "1"}},
        "workerGroupSpec": [{"groupName": "w", "replicas": 2, "rayStartParams": {"num-cpus": "2"}}],
    }
    cluster.update(extra.pop("cluster", {}))
    return {"rayCluster": cluster, **extra}


def _head(obj: dict[str, Any]) -> Any:
    return obj["spec"]["rayClusterSpec"]["headGroupSpec"]


def _group(obj: dict[str, Any], i: int = 0) -> Any:
    return obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][i]


def test_start_params_defaults_and_injection(kit: SimpleNamespace) -> None:
    obj = kit.build(kit.template("ray", ray_custom(), 0))
    assert _head(obj)["rayStartParams"] == {**HEAD_DEFAULT, "num-cpus": "1"}
    assert _group(obj)["rayStartParams"] == {
        "num-cpus": "2",
        "disable-usage-stats": "true",
        "node-ip-address": "$MY_POD_IP",
    }
    obj = kit.build(kit.template("ray", {"rayCluster": {"workerGroupSpec": [{"groupName": "w", "replicas": 1}]}}, 0))
    assert _head(obj)["rayStartParams"] == HEAD_DEFAULT  # num-cpus never injected
    assert _group(obj)["rayStartParams"] == {"disable-usage-stats": "true", "node-ip-address": "$MY_POD_IP"}


def test_start_params_from_config_are_copied(kit: SimpleNamespace) -> None:
    cfg = BackendConfig.from_flyte_config(
        {
            "ray": {
                "includeDashboard": False,
                "dashboardHost": "1.2.3.4",
                "enableUsageStats": True,
                "defaults": {"headNode": {"startParameters": {"a": "b"}, "ipAddress": ""}},
            }
        }
    )
    before = dict(cfg.ray.head_start_parameters)
    obj = kit.build(kit.template("ray", {"rayCluster": {"headGroupSpec": {}}}, 0), config=cfg)
    assert _head(obj)["rayStartParams"] == {
        "a": "b",
        "include-dashboard": "false",
        "node-ip-address": "",
        "dashboard-host": "1.2.3.4",
    }
    _head(obj)["rayStartParams"]["x"] = "y"
    assert cfg.ray.head_start_parameters == before  # no aliasing of the shared config


def test_head_and_worker_templates(kit: SimpleNamespace) -> None:
    obj = kit.build(
        kit.template("ray", ray_custom(), 0, args=["pyflyte-execute", "--inputs", "{{.input}}"]),
        template_vars={"input": "s3://b/inputs.pb"},
    )
    head = kit.container(_head(obj)["template"]["spec"], "ray-head")
    worker = kit.container(_group(obj)["template"]["spec"], "ray-worker")
    ports = [
        {"name": "redis", "containerPort": 6379},
        {"name": "head", "containerPort": 10001},
        {"name": "dashboard", "containerPort": 8265},
    ]
    assert head["ports"] == ports and worker["ports"] == ports
    assert "args" not in head and "args" not in worker
    assert [e["name"] for e in head["env"][-3:]] == ["MY_POD_IP", "RAY_COLOR_PREFIX", "RAY_DATA_DISABLE_PROGRESS_BARS"]
    assert [e["name"] for e in worker["env"][-10:]] == [
        "RAY_DISABLE_DOCKER_CPU_WARNING",
        "TYPE",
        "CPU_REQUEST",
        "CPU_LIMITS",
        "MEMORY_REQUESTS",
        "MEMORY_LIMITS",
        "MY_POD_NAME",
        "MY_POD_IP",
        "RAY_COLOR_PREFIX",
        "RAY_DATA_DISABLE_PROGRESS_BARS",
    ]
    assert worker["lifecycle"] == {"preStop": {"exec": {"command": ["/bin/sh", "-c", "ray stop"]}}}
    assert "lifecycle" not in head
    assert _head(obj)["serviceType"] == "NodePort" and _head(obj)["enableIngress"] is False
    assert obj["spec"]["entrypoint"] == "pyflyte-execute --inputs s3://b/inputs.pb"
    assert obj["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] is False


def test_deviation_worker_memory_env_points_at_memory(kit: SimpleNamespace) -> None:
    worker = kit.container(_group(kit.build(kit.template("ray", ray_custom(), 0)))["template"]["spec"], "ray-worker")
    env = kit.env_of(worker)
    assert env["MEMORY_REQUESTS"]["resourceFieldRef"]["resource"] == "requests.memory"
    assert env["MEMORY_LIMITS"]["resourceFieldRef"]["resource"] == "limits.memory"
    assert env["CPU_REQUEST"]["resourceFieldRef"] == {"containerName": "ray-worker", "resource": "requests.cpu"}


@pytest.mark.parametrize(
    ("group", "expected"),
    [
        ({"replicas": 2}, (2, 0, 2)),
        ({"replicas": 3, "minReplicas": 5, "maxReplicas": 1}, (3, 3, 3)),
        ({"replicas": 2, "minReplicas": 1, "maxReplicas": 4}, (2, 1, 4)),
        ({"maxReplicas": 5}, (0, 0, 5)),
    ],
)
def test_worker_replica_bounds(kit: SimpleNamespace, group: dict[str, Any], expected: tuple[Any, ...]) -> None:
    custom = {"rayCluster": {"workerGroupSpec": [{"groupName": "w", **group}]}}
    g = _group(kit.build(kit.template("ray", custom, 0)))
    assert (g["replicas"], g["minReplicas"], g["maxReplicas"]) == expected


@pytest.mark.parametrize(
    ("job", "config", "expected"),
    [
        ({}, {}, (True, 3600)),
        ({"shutdownAfterJobFinishes": True}, {}, (True, None)),  # task's TTL 0: delete at once
        ({"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 60}, {}, (True, 60)),
        ({}, {"shutdownAfterJobFinishes": False}, (False, None)),
        ({}, {"ttlSecondsAfterFinished": 100}, (True, 100)),
    ],
)
def test_shutdown_and_ttl(
    kit: SimpleNamespace, job: dict[str, Any], config: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    obj = kit.build(kit.template("ray", ray_custom(**job), 0), config=BackendConfig.from_flyte_config({"ray": config}))
    assert (obj["spec"]["shutdownAfterJobFinishes"], obj["spec"].get("ttlSecondsAfterFinished")) == expected


def test_deviation_ttl_without_shutdown_is_honoured(kit: SimpleNamespace) -> None:
    # Flyte ignores a task TTL unless shutdown_after_job_finishes is also true (and then uses 3600 from config).
    obj = kit.build(kit.template("ray", ray_custom(ttlSecondsAfterFinished=600), 0))
    assert obj["spec"]["shutdownAfterJobFinishes"] is True and obj["spec"]["ttlSecondsAfterFinished"] == 600


def test_deviation_no_ttl_without_shutdown(kit: SimpleNamespace) -> None:
    # KubeRay rejects ttlSecondsAfterFinished > 0 with shutdown false; Flyte would write the config's 3600.
    cfg = BackendConfig.from_flyte_config({"ray": {"shutdownAfterJobFinishes": False, "ttlSecondsAfterFinished": 3600}})
    obj = kit.build(kit.template("ray", ray_custom(), 0), config=cfg)
    assert obj["spec"]["shutdownAfterJobFinishes"] is False and "ttlSecondsAfterFinished" not in obj["spec"]


def test_runtime_env(kit: SimpleNamespace) -> None:
    env = {"pip": ["numpy"], "env_vars": {"A": "1"}}
    encoded = base64.b64encode(json.dumps(env).encode()).decode()
    obj = kit.build(kit.template("ray", ray_custom(runtimeEnv=encoded), 0))
    assert yaml.safe_load(obj["spec"]["runtimeEnvYAML"]) == env
    obj = kit.build(kit.template("ray", ray_custom(runtimeEnv=encoded, runtimeEnvYaml="pip: [x]\n"), 0))
    assert obj["spec"]["runtimeEnvYAML"] == "pip: [x]\n"
    assert "runtimeEnvYAML" not in kit.build(kit.template("ray", ray_custom(), 0))["spec"]
    with pytest.raises(BuildError, match="runtimeEnv is not base64-encoded JSON"):
        kit.build(kit.template("ray", ray_custom(runtimeEnv="%%%"), 0))


def test_entrypoint_quotes_empty_args(kit: SimpleNamespace) -> None:
    obj = kit.build(kit.template("ray", ray_custom(), 0, args=["a", "", "b"]))
    assert obj["spec"]["entrypoint"] == "a '' b"


def test_submitter_is_a_copy_of_the_task_pod(kit: SimpleNamespace) -> None:
    obj = kit.build(
        kit.template("ray", ray_custom(), 0, args=["pyflyte-execute", "x"]), kit.metadata(labels={"e": "1"})
    )
    sub = obj["spec"]["submitterPodTemplate"]
    c = sub["spec"]["containers"][0]
    assert c["name"] == obj["metadata"]["name"] and c["args"] == ["pyflyte-execute", "x"] and c["image"] == "img:1"
    assert sub["metadata"]["labels"] == {"e": "1"}


@pytest.mark.parametrize(
    ("task_sa", "config_sa", "expected"),
    [("task-sa", "", "task-sa"), ("task-sa", "ray-sa", "ray-sa"), ("", "ray-sa", "ray-sa"), ("", "", None)],
)
def test_service_account(kit: SimpleNamespace, task_sa: str, config_sa: str, expected: str | None) -> None:
    cfg = BackendConfig(ray=RayConfig(service_account=config_sa))
    obj = kit.build(kit.template("ray", ray_custom(), 0), kit.metadata(sa=task_sa), config=cfg)
    for spec in (
        _head(obj)["template"]["spec"],
        _group(obj)["template"]["spec"],
        obj["spec"]["submitterPodTemplate"]["spec"],
    ):
        assert spec.get("serviceAccountName") == expected


def test_group_k8s_pod_overlay(kit: SimpleNamespace) -> None:
    worker_pod = {
        "containers": [
            {
                "name": "ray-worker",
                "image": "gpu:1",
                "resources": {"limits": {"nvidia.com/gpu": 1, "cpu": "8"}},
                "env": [{"name": "X", "value": "1"}],
            },
            {"name": "primary", "image": "dropped"},
        ],
        "nodeSelector": {"gpu": "a100"},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    custom = {
        "rayCluster": {
            "headGroupSpec": {},
            "workerGroupSpec": [
                {
                    "groupName": "gpu",
                    "replicas": 1,
                    "k8sPod": {"podSpec": worker_pod, "metadata": {"labels": {"g": "1"}}},
                }
            ],
        }
    }
    cfg = BackendConfig.from_flyte_config({"k8s": {"add-tolerations-for-extended-resources": ["nvidia.com/gpu"]}})
    obj = kit.build(kit.template("ray", custom, 0, requests={"cpu": "1"}), config=cfg)
    group = _group(obj)["template"]
    spec = group["spec"]
    assert [c["name"] for c in spec["containers"]] == ["ray-worker"]  # unknown names are dropped
    worker = spec["containers"][0]
    assert worker["image"] == "gpu:1"
    assert kit.quantities(worker["resources"]["limits"]) == kit.quantities(
        {"cpu": "8", "memory": "1024Mi", "nvidia.com/gpu": "1"}
    )
    assert kit.env_of(worker)["X"] == "1" and kit.env_of(worker)["TYPE"] == "worker"
    assert spec["nodeSelector"] == {"gpu": "a100"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    assert group["metadata"]["labels"] == {"g": "1"}
    head = _head(obj)["template"]["spec"]
    assert "nodeSelector" not in head and "tolerations" not in head


def test_autoscaler_options(kit: SimpleNamespace) -> None:
    opts = {
        "upscalingMode": "UPSCALING_MODE_CONSERVATIVE",
        "idleTimeoutSeconds": 30,
        "image": "as:1",
        "env": [{"key": "A", "value": "1"}],
        "resources": {"requests": [{"name": "CPU", "value": "500m"}]},
    }
    obj = kit.build(kit.template("ray", ray_custom(cluster={"enableAutoscaling": True, "autoscalerOptions": opts}), 0))
    spec = obj["spec"]["rayClusterSpec"]
    assert spec["enableInTreeAutoscaling"] is True
    assert spec["autoscalerOptions"] == {
        "upscalingMode": "Conservative",
        "idleTimeoutSeconds": 30,
        "image": "as:1",
        "env": [{"name": "A", "value": "1"}],
        "resources": {"requests": {"cpu": "500m"}},
    }
    obj = kit.build(kit.template("ray", ray_custom(cluster={"autoscalerOptions": {}}), 0))
    assert obj["spec"]["rayClusterSpec"]["autoscalerOptions"] == {"resources": {}}


def test_deviation_unparsable_autoscaler_resources_are_an_error(kit: SimpleNamespace) -> None:
    opts = {"resources": {"requests": [{"name": "CPU", "value": "lots"}]}}
    with pytest.raises(BuildError, match=r"autoscalerOptions\.resources\.requests\.cpu"):
        kit.build(kit.template("ray", ray_custom(cluster={"autoscalerOptions": opts}), 0))


def test_logs_sidecar(kit: SimpleNamespace) -> None:
    sidecar = {
        "name": "fluentbit",
        "image": "fluent/fluent-bit:2",
        "volumeMounts": [{"name": "old", "mountPath": "/tmp/ray"}],
    }
    cfg = BackendConfig.from_flyte_config({"ray": {"logsSidecar": sidecar}})
    obj = kit.build(kit.template("ray", ray_custom(), 0), config=cfg)
    head = _head(obj)["template"]["spec"]
    assert [c["name"] for c in head["containers"]] == ["ray-head", "fluentbit"]
    assert {"name": "system-ray-state", "emptyDir": {}} in head["volumes"]
    assert head["containers"][0]["volumeMounts"] == [{"name": "system-ray-state", "mountPath": "/tmp/ray"}]
    assert head["containers"][1]["volumeMounts"] == [
        {"name": "system-ray-state", "mountPath": "/tmp/ray", "readOnly": True}
    ]
    assert [c["name"] for c in _group(obj)["template"]["spec"]["containers"]] == ["ray-worker"]
    assert cfg.ray.logs_sidecar == sidecar  # config unchanged


def test_name_within_ray_limit_and_deterministic(kit: SimpleNamespace) -> None:
    m = kit.metadata(name="a" * 40, node="n-very-long-node-id")
    obj = kit.build(kit.template("ray", ray_custom(), 0), m)
    assert len(obj["metadata"]["name"]) <= 47
    assert obj == kit.build(kit.template("ray", ray_custom(), 0), m)


def test_ray_version_is_ignored(kit: SimpleNamespace) -> None:
    a = build_object(kit.template("ray", ray_custom(), 0), kit.metadata(), validate=False)
    b = build_object(kit.template("ray", ray_custom(), 3), kit.metadata(), validate=False)
    assert a == b


@pytest.mark.parametrize(
    ("custom", "match"),
    [
        ({}, "has no rayCluster"),
        ({"rayCluster": {"workerGroupSpec": [{"replicas": 1}]}}, r"groupName must not be empty"),
        ({"rayCluster": {"workerGroupSpec": [{"groupName": "a"}, {"groupName": "a"}]}}, "used by another worker group"),
        ({"rayCluster": {"workerGroupSpec": [{"groupName": "a", "replicas": -1}]}}, "replicas must not be negative"),
        ({"rayCluster": {}, "ttlSecondsAfterFinished": -5}, "ttlSecondsAfterFinished must not be negative"),
        ({"rayCluster": {"workerGroupSpec": {"groupName": "a"}}}, r"workerGroupSpec must be a list"),
    ],
)
def test_deviation_malformed_ray_customs(kit: SimpleNamespace, custom: dict[str, Any], match: str) -> None:
    # Flyte panics on a missing rayCluster and passes the others to KubeRay, which rejects them.
    with pytest.raises(BuildError, match=match):
        kit.build(kit.template("ray", custom, 0))


SHELL_ATTACKS = [
    "$(touch {canary})",
    "`touch {canary}`",
    "x; touch {canary}",
    "x && touch {canary} || true",
    "x | tee {canary}",
    "x > {canary}",
    'it\'s "quoted" \\ $HOME ${{HOME}} *',
    "line\ntouch {canary}",
    "",
    "--flag=a b",
]


@pytest.mark.parametrize("attack", SHELL_ATTACKS)
def test_input_values_reach_the_entrypoint_as_one_argument_whatever_shell_syntax_they_hold(
    kit: SimpleNamespace, tmp_path: Path, attack: Any
) -> None:
    # KubeRay's head runs the entrypoint through a shell; run it through a real one, with a program that
    # prints the arguments it received in place of pyflyte-execute.
    import subprocess
    import sys

    canary = tmp_path / "pwned"
    value = attack.format(canary=canary)
    obj = kit.build(
        kit.template(
            "ray", ray_custom(), 0, args=["pyflyte-execute", "--n", "{{.Inputs.n}}", "--out", "{{.outputPrefix}}"]
        ),
        template_vars={"Inputs.n": value, "outputPrefix": "s3://b/out"},
    )
    entrypoint = obj["spec"]["entrypoint"]
    assert entrypoint.startswith("pyflyte-execute ")
    echo_args = f"{sys.executable} -c 'import json, sys; print(json.dumps(sys.argv[1:]))'"
    run = subprocess.run(
        ["sh", "-c", entrypoint.replace("pyflyte-execute", echo_args, 1)], capture_output=True, text=True, timeout=30
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == ["--n", value, "--out", "s3://b/out"]
    assert not canary.exists()
