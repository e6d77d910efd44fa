"""The ``kubejobs`` extension key: per-role pod settings and run-policy fields the IDL cannot carry."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from flytekitplugins.kubejobs.backend import BackendConfig, BuildError

TOL = {"key": "pool", "operator": "Equal", "value": "a100", "effect": "NoSchedule"}
AFFINITY = {
    "podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}
        ]
    }
}


def _ext(**kw: Any) -> dict[str, Any]:
    return {"kubejobs": {"version": 1, **kw}}


def test_role_settings(kit: SimpleNamespace) -> None:
    worker_ext = {
        "nodeSelector": {"gpu": "a100"},
        "tolerations": [TOL],
        "affinity": AFFINITY,
        "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "gpuResourceName": "amd.com/gpu",
        "resources": {"requests": {"example.com/fpga": "1"}, "limits": {"example.com/fpga": "1"}},
    }
    custom = {
        "workerReplicas": {"replicas": 2, "resources": {"limits": [{"name": "GPU", "value": "2"}]}},
        **_ext(replicaSpecs={"Worker": worker_ext}),
    }
    cfg = BackendConfig.from_flyte_config(
        {
            "k8s": {
                "add-tolerations-for-extended-resources": ["example.com/fpga"],
                "resource-tolerations": {"amd.com/gpu": [{"key": "amd"}]},
            }
        }
    )
    obj = kit.build(kit.template("pytorch", custom), config=cfg)
    worker = obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    master = obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    c = worker["containers"][0]
    assert worker["nodeSelector"] == {"gpu": "a100"}
    assert TOL in worker["tolerations"] and {"key": "amd"} in worker["tolerations"]
    assert {"key": "example.com/fpga", "operator": "Exists", "effect": "NoSchedule"} in worker["tolerations"]
    assert worker["affinity"] == AFFINITY
    assert kit.env_of(c)["NCCL_DEBUG"] == "INFO"
    assert worker["volumes"] == worker_ext["volumes"] and c["volumeMounts"] == worker_ext["volumeMounts"]
    # the IDL GPU count means the role's accelerator; the extra resource is added
    assert kit.quantities(c["resources"]["limits"]) == kit.quantities(
        {"cpu": "1", "memory": "1024Mi", "amd.com/gpu": "2", "example.com/fpga": "1"}
    )
    assert "nvidia.com/gpu" not in c["resources"]["limits"]
    assert "nodeSelector" not in master and "tolerations" not in master and master["affinity"] == {}


def test_run_policy_extension(kit: SimpleNamespace) -> None:
    custom = {
        "workerReplicas": {"replicas": 2},
        "runPolicy": {"cleanPodPolicy": "CLEANPOD_POLICY_ALL", "backoffLimit": 5},
        **_ext(
            runPolicy={
                "suspend": True,
                "backoffLimit": 0,
                "schedulingPolicy": {"minAvailable": 3.0, "queue": "q", "priorityClass": "high"},
            }
        ),
    }
    obj = kit.build(kit.template("pytorch", custom))
    assert obj["spec"]["runPolicy"] == {
        "cleanPodPolicy": "All",
        "suspend": True,
        "backoffLimit": 0,
        "schedulingPolicy": {"minAvailable": 3, "queue": "q", "priorityClass": "high"},
    }


def test_extension_in_v0_and_other_kinds(kit: SimpleNamespace) -> None:
    custom = {"numWorkers": 2, **_ext(replicaSpecs={"Launcher": {"nodeSelector": {"cpu": "only"}}})}
    obj = kit.build(kit.template("mpi", custom, 0))
    assert obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["nodeSelector"] == {"cpu": "only"}
    assert "nodeSelector" not in obj["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    custom = {
        "workerReplicas": {"replicas": 1},
        "psReplicas": {"replicas": 1},
        **_ext(replicaSpecs={"PS": {"env": [{"name": "A", "value": "1"}]}}),
    }
    obj = kit.build(kit.template("tensorflow", custom))
    assert kit.env_of(obj["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]["containers"][0])["A"] == "1"


@pytest.mark.parametrize(
    ("ext", "match"),
    [
        ({"version": 2}, r"kubejobs.version 2 is not supported"),
        ({"replicaSpecs": {"Chief": {}}}, r"unknown role 'Chief'"),
        ({"replicaSpecs": {"Worker": {"nodeselector": {}}}}, r"kubejobs.replicaSpecs.Worker has unknown keys"),
        ({"replicaSpecs": {"Worker": {"tolerations": {"key": "x"}}}}, r"Worker.tolerations must be a list"),
        ({"replicaSpecs": {"Worker": {"env": [{"value": "1"}]}}}, r"Worker.env\[0\] needs a non-empty name"),
        ({"replicaSpecs": {"Worker": {"resources": {"requests": {"x.com/y": "lots"}}}}}, r"not a Kubernetes quantity"),
        ({"replicaSpecs": {"Worker": {"nodeSelector": {"a": 1}}}}, r"nodeSelector\['a'\] must be a string"),
        ({"runPolicy": {"suspend": "yes"}}, r"runPolicy.suspend must be true or false"),
        ({"runPolicy": {"backoffLimit": -1}}, r"runPolicy.backoffLimit must be an int >= 0"),
        ({"runPolicy": {"managedBy": "x"}}, r"runPolicy has unknown key 'managedBy'"),
        ("garbage", r"kubejobs must be an object"),
    ],
)
def test_malformed_extension(kit: SimpleNamespace, ext: Any, match: str) -> None:
    custom = {"workerReplicas": {"replicas": 1}, "kubejobs": ext if isinstance(ext, str) else {"version": 1, **ext}}
    with pytest.raises(BuildError, match=match):
        kit.build(kit.template("pytorch", custom))


def test_extended_resources_given_on_one_side_are_mirrored(kit: SimpleNamespace) -> None:
    ext = {"replicaSpecs": {"Worker": {"resources": {"requests": {"example.com/fpga": "2"}}}}}
    obj = kit.build(kit.template("pytorch", {"workerReplicas": {"replicas": 1}, **_ext(**ext)}))
    res = obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]
    assert res["requests"]["example.com/fpga"] == res["limits"]["example.com/fpga"] == "2"
