"""Kubernetes' syntax rules for user-given pod settings (label keys and values, env var names,
tolerations, volumes, mounts, images): what the API server accepts passes, what it refuses is a ValueError
naming the field and the value. Expected verdicts follow the Kubernetes API reference's rules."""

from __future__ import annotations

import re
from typing import Any

import pytest
from flytekitplugins.kubejobs.wire.k8ssyntax import (
    check_env_names,
    check_image,
    check_labels,
    check_tolerations,
    check_volume_mounts,
    check_volumes,
)

GOOD_LABELS = [
    {"gpu": "a100"},
    {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"},
    {"node.kubernetes.io/instance-type": "p4d.24xlarge"},
    {"pool": ""},
    {"a" * 63: "b" * 63},
    {"Team_A.x-1": "V1.2_3"},
]
BAD_LABELS = [
    ({"gpu type": "a100"}, "'gpu type'"),
    ({"gpu": "a 100"}, "'a 100'"),
    ({"-gpu": "a"}, "'-gpu'"),
    ({"gpu": "a100-"}, "'a100-'"),
    ({"a" * 64: "x"}, "a" * 64),
    ({"gpu": "b" * 64}, "b" * 64),
    ({"Example.COM/gpu": "a"}, "Example.COM/gpu"),  # the prefix is a DNS subdomain: lowercase
    ({"/gpu": "a"}, "'/gpu'"),
    ({"a/b/c": "x"}, "'a/b/c'"),
    ({"gpu": "ä100"}, "ä100"),
    ({"gpu\n": "a"}, "gpu\\n"),
]


@pytest.mark.parametrize("labels", GOOD_LABELS)
def test_label_syntax_kubernetes_accepts(labels: dict[str, str]) -> None:
    assert check_labels("Worker.node_selector", labels) == labels


@pytest.mark.parametrize(("labels", "shown"), BAD_LABELS)
def test_label_syntax_kubernetes_refuses(labels: dict[str, str], shown: str) -> None:
    with pytest.raises(ValueError, match=r"^Worker\.node_selector") as caught:
        check_labels("Worker.node_selector", labels)
    assert shown in str(caught.value)


@pytest.mark.parametrize("name", ["HF_HOME", "my.var", "x-y", "A B", "1ST", "_"])
def test_env_names_kubernetes_accepts(name: str) -> None:
    check_env_names("Worker.env", [{"name": name, "value": "1"}])


@pytest.mark.parametrize("name", ["A=B", "", "NAÏVE", "LINE\nBREAK", "TAB\t", "\x00"])
def test_env_names_kubernetes_refuses(name: str) -> None:
    with pytest.raises(ValueError, match=r"Worker.env\[0\] name .* is not an environment variable name"):
        check_env_names("Worker.env", [{"name": name, "value": "1"}])


GOOD_TOLERATIONS: list[dict[str, Any]] = [
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute", "tolerationSeconds": 60},
    {"key": "dedicated", "value": "ml"},  # operator defaults to Equal
    {"operator": "Exists"},  # tolerates everything
]
BAD_TOLERATIONS: list[tuple[dict[str, Any], str]] = [
    ({"key": "gpu", "operator": "In"}, r"\.operator must be Exists or Equal, got 'In'"),
    ({"key": "gpu", "operator": "exists"}, r"got 'exists'"),
    ({"key": "gpu", "operator": "Exists", "value": "x"}, r"\.value must be empty with operator Exists"),
    ({"operator": "Equal", "value": "x"}, r"an empty key tolerates every taint and needs operator Exists"),
    ({"key": "gpu", "effect": "NoRun"}, r"\.effect must be one of NoSchedule, PreferNoSchedule, NoExecute"),
    ({"key": "gpu", "effect": "NoSchedule", "tolerationSeconds": 5}, r"tolerationSeconds is only allowed with"),
    ({"key": "bad key", "operator": "Exists"}, r"\.key 'bad key' is not a Kubernetes label key"),
]


@pytest.mark.parametrize("toleration", GOOD_TOLERATIONS)
def test_tolerations_kubernetes_accepts(toleration: dict[str, Any]) -> None:
    check_tolerations("Worker.tolerations", [toleration])


@pytest.mark.parametrize(("toleration", "message"), BAD_TOLERATIONS)
def test_tolerations_kubernetes_refuses(toleration: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=r"^Worker\.tolerations\[0\]") as caught:
        check_tolerations("Worker.tolerations", [toleration])
    assert re.search(message, str(caught.value)), caught.value


def test_volumes_need_a_dns_label_name_and_one_source() -> None:
    check_volumes("Worker.volumes", [{"name": "data-1", "persistentVolumeClaim": {"claimName": "c"}}])
    bad = [
        ({"name": "Data", "emptyDir": {}}, "'Data' is not a volume name"),
        ({"name": "my_vol", "emptyDir": {}}, "'my_vol' is not a volume name"),
        ({"name": "v" * 64, "emptyDir": {}}, "is not a volume name"),
        ({"emptyDir": {}}, "None is not a volume name"),
        ({"name": "data"}, "must have exactly one volume source, got none"),
        ({"name": "data", "emptyDir": {}, "hostPath": {"path": "/"}}, "got ['emptyDir', 'hostPath']"),
    ]
    for volume, message in bad:
        with pytest.raises(ValueError, match=r"Worker.volumes\[0\]") as caught:
            check_volumes("Worker.volumes", [volume])
        assert message in str(caught.value)


def test_volume_mounts_need_a_name_and_a_path() -> None:
    check_volume_mounts("Worker.volume_mounts", [{"name": "data", "mountPath": "/data"}])
    for mount in ({"mountPath": "/data"}, {"name": "data"}, {"name": "data", "mountPath": "/a:b"}):
        with pytest.raises(ValueError, match=r"Worker.volume_mounts\[0\]"):
            check_volume_mounts("Worker.volume_mounts", [mount])


@pytest.mark.parametrize("image", ["ghcr.io/acme/train:0.1", "python:3.11-slim", "repo/img@sha256:" + "a" * 64])
def test_images_kubernetes_accepts(image: str) -> None:
    assert check_image("Worker.image", image) == image


@pytest.mark.parametrize("image", [" ghcr.io/acme/train:0.1", "ghcr.io/acme/train:0.1\n", "img :1", "ïmg:1", ""])
def test_images_with_whitespace_or_non_ascii_are_refused(image: str) -> None:
    with pytest.raises(ValueError, match=r"Worker.image .* is not a container image reference"):
        check_image("Worker.image", image)
