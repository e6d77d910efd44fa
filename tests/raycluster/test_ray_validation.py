"""Bad input fails at construction with ValueError/TypeError naming the field and showing the value;
the values the issue says to accept are converted, not refused."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import flytekitplugins.ray as official
import pytest
from flytekit import PodTemplate, Resources
from flytekitplugins.raycluster import (
    AutoscalerOptionsConfig,
    ComputeTemplate,
    HeadNodeConfig,
    RayJobConfig,
    UpscalingMode,
    WorkerNodeConfig,
)
from kubernetes.client import ApiClient, V1Container, V1PodSpec, V1ResourceRequirements, V1Toleration


def worker(**kw: Any) -> WorkerNodeConfig:
    args: dict[str, Any] = {"group_name": "w", "replicas": 2}
    args.update(kw)
    return WorkerNodeConfig(**args)


def job(**kw: Any) -> RayJobConfig:
    args: dict[str, Any] = {"worker_node_config": [worker()]}
    args.update(kw)
    return RayJobConfig(**args)


INT32_OVER = 2**31

# (id, construct, exception type, substrings the message must contain: the field, then the value)
BAD: list[tuple[str, Callable[[], object], type[Exception], tuple[str, ...]]] = [
    ("name-upper", lambda: worker(group_name="GPU"), ValueError, ("group_name", "'GPU'")),
    ("name-underscore", lambda: worker(group_name="gpu_a100"), ValueError, ("group_name", "'gpu_a100'")),
    ("name-leading-dash", lambda: worker(group_name="-gpu"), ValueError, ("group_name", "'-gpu'")),
    ("name-trailing-dash", lambda: worker(group_name="gpu-"), ValueError, ("group_name", "'gpu-'")),
    ("name-too-long", lambda: worker(group_name="a" * 64), ValueError, ("group_name", "a" * 64)),
    ("name-empty", lambda: worker(group_name=""), ValueError, ("group_name", "''")),
    ("name-not-str", lambda: worker(group_name=3), TypeError, ("group_name", "3")),
    (
        "name-repeated",
        lambda: RayJobConfig([worker(group_name="gpu"), worker(group_name="gpu")]),
        ValueError,
        ("worker_node_config", "group_name", "'gpu'"),
    ),
    ("replicas-negative", lambda: worker(replicas=-1), ValueError, ("replicas", "-1")),
    ("replicas-float", lambda: worker(replicas=1.5), TypeError, ("replicas", "1.5")),
    ("replicas-str", lambda: worker(replicas="2"), TypeError, ("replicas", "'2'")),
    ("replicas-bool", lambda: worker(replicas=True), TypeError, ("replicas", "True")),
    ("replicas-over-int32", lambda: worker(replicas=INT32_OVER), ValueError, ("replicas", str(INT32_OVER))),
    ("min-negative", lambda: worker(min_replicas=-1), ValueError, ("min_replicas", "-1")),
    ("min-float", lambda: worker(min_replicas=1.0), TypeError, ("min_replicas", "1.0")),
    ("min-over-int32", lambda: worker(min_replicas=INT32_OVER), ValueError, ("min_replicas", str(INT32_OVER))),
    ("min-above-replicas", lambda: worker(replicas=3, min_replicas=5), ValueError, ("min_replicas", "5")),
    ("max-negative", lambda: worker(max_replicas=-4), ValueError, ("max_replicas", "-4")),
    ("max-str", lambda: worker(max_replicas="8"), TypeError, ("max_replicas", "'8'")),
    ("max-over-int32", lambda: worker(max_replicas=INT32_OVER), ValueError, ("max_replicas", str(INT32_OVER))),
    ("max-below-replicas", lambda: worker(replicas=3, max_replicas=1), ValueError, ("max_replicas", "1")),
    ("ttl-negative", lambda: job(ttl_seconds_after_finished=-5), ValueError, ("ttl_seconds_after_finished", "-5")),
    ("ttl-float", lambda: job(ttl_seconds_after_finished=1.5), TypeError, ("ttl_seconds_after_finished", "1.5")),
    (
        "start-param-float",
        lambda: worker(ray_start_params={"num-cpus": 1.5}),
        TypeError,
        ("ray_start_params", "'num-cpus'", "1.5"),
    ),
    (
        "start-param-list",
        lambda: HeadNodeConfig(ray_start_params={"resources": ["a"]}),
        TypeError,
        ("HeadNodeConfig.ray_start_params", "['a']"),
    ),
    ("start-param-none", lambda: worker(ray_start_params={"block": None}), TypeError, ("ray_start_params", "None")),
    ("start-params-not-dict", lambda: HeadNodeConfig(ray_start_params=["x"]), TypeError, ("ray_start_params", "['x']")),
    ("runtime-env-list", lambda: job(runtime_env=["pip"]), TypeError, ("runtime_env", "['pip']")),
    ("runtime-env-str", lambda: job(runtime_env="pip: [x]"), TypeError, ("runtime_env", "'pip: [x]'")),
    ("runtime-env-set", lambda: job(runtime_env={"pip": {"numpy"}}), TypeError, ("runtime_env", "{'numpy'}")),
    ("runtime-env-object", lambda: job(runtime_env={"x": object()}), TypeError, ("runtime_env", "object")),
    ("runtime-env-nan", lambda: job(runtime_env={"x": float("nan")}), TypeError, ("runtime_env", "nan")),
    ("runtime-env-int-key", lambda: job(runtime_env={"env_vars": {1: "a"}}), TypeError, ("runtime_env", "1")),
    (
        "runtime-env-var-int",
        lambda: job(runtime_env={"env_vars": {"N": 1}}),
        TypeError,
        ("runtime_env['env_vars']", "'N'", "1"),
    ),
    ("runtime-env-working-dir", lambda: job(runtime_env={"working_dir": 3}), TypeError, ("working_dir", "3")),
    ("resources-bad-quantity", lambda: worker(requests=Resources(cpu="lots")), ValueError, ("requests.cpu", "'lots'")),
    ("resources-negative", lambda: HeadNodeConfig(limits=Resources(mem="-1Gi")), ValueError, ("limits.mem", "-1Gi")),
    ("resources-range", lambda: worker(requests=Resources(cpu=("1", "2"))), TypeError, ("requests.cpu", "('1', '2')")),
    ("resources-not-resources", lambda: worker(requests={"cpu": "1"}), TypeError, ("requests", "{'cpu': '1'}")),
    (
        "request-above-limit",
        lambda: worker(requests=Resources(cpu="4"), limits=Resources(cpu="2")),
        ValueError,
        ("WorkerNodeConfig('w')", "cpu", "'4'", "'2'"),
    ),
    (
        "upscaling-mode-unknown",
        lambda: AutoscalerOptionsConfig(upscaling_mode="fast"),
        ValueError,
        ("upscaling_mode", "'fast'"),
    ),
    ("upscaling-mode-int", lambda: AutoscalerOptionsConfig(upscaling_mode=7), ValueError, ("upscaling_mode", "7")),
    (
        "idle-timeout-negative",
        lambda: AutoscalerOptionsConfig(idle_timeout_seconds=-1),
        ValueError,
        ("idle_timeout_seconds", "-1"),
    ),
    ("autoscaler-env", lambda: AutoscalerOptionsConfig(env={"A": 1}), TypeError, ("env", "'A'", "1")),
    ("autoscaling-not-bool", lambda: job(enable_autoscaling="yes"), TypeError, ("enable_autoscaling", "'yes'")),
    ("shutdown-not-bool", lambda: job(shutdown_after_job_finishes=1), TypeError, ("shutdown_after_job_finishes", "1")),
    ("workers-not-list", lambda: RayJobConfig(worker()), TypeError, ("worker_node_config", "WorkerNodeConfig")),
    (
        "workers-official-class",
        lambda: RayJobConfig([official.WorkerNodeConfig("w", 1)]),
        TypeError,
        ("worker_node_config[0]", "flytekitplugins.raycluster.WorkerNodeConfig"),
    ),
    ("head-wrong-type", lambda: job(head_node_config={"ray_start_params": {}}), TypeError, ("head_node_config",)),
    (
        "compute-template-wrong-type",
        lambda: worker(compute_template={"name": "a100"}),
        TypeError,
        ("compute_template", "'a100'"),
    ),
    (
        "compute-template-name-not-dns-1123",
        lambda: worker(compute_template="A100_x8"),
        ValueError,
        ("WorkerNodeConfig('w').compute_template", "'A100_x8'"),
    ),
    ("pod-template-wrong-type", lambda: worker(pod_template={"spec": {}}), TypeError, ("pod_template", "'spec'")),
    ("address-not-str", lambda: job(address=6379), TypeError, ("address", "6379")),
]


@pytest.mark.parametrize(("construct", "error", "needles"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_is_refused_at_construction(
    construct: Callable[[], object], error: type[Exception], needles: tuple[str, ...]
) -> None:
    with pytest.raises(error) as info:
        construct()
    assert type(info.value) is error  # not a subclass such as pydantic's ValidationError
    for needle in needles:
        assert needle in str(info.value)


def test_start_params_ints_and_bools_become_strings() -> None:
    params = worker(ray_start_params={"num-cpus": 4, "block": True, "include-dashboard": False}).ray_start_params
    assert params == {"num-cpus": "4", "block": "true", "include-dashboard": "false"}


@pytest.mark.parametrize("given", ["Conservative", "conservative", " CONSERVATIVE ", "UPSCALING_MODE_CONSERVATIVE", 3])
def test_upscaling_mode_by_name_in_any_case(given: object) -> None:
    mode = AutoscalerOptionsConfig(upscaling_mode=given).upscaling_mode
    assert mode is UpscalingMode.CONSERVATIVE
    # the official plugin's value is the flyteidl enum number
    assert mode == official.AutoscalerOptionsConfig.UpscalingMode.CONSERVATIVE
    assert AutoscalerOptionsConfig.UpscalingMode is UpscalingMode


def test_numeric_resources_become_quantity_strings() -> None:
    group = worker(requests=Resources(cpu=0.5, mem=1024, gpu=1))
    assert group.requests == Resources(cpu="0.5", mem="1024", gpu="1")
    container = group.k8s_pod["podSpec"]["containers"][0] if group.k8s_pod else {}
    assert container["resources"]["limits"] == {"cpu": "0.5", "memory": "1024", "nvidia.com/gpu": "1"}


def test_omitted_min_and_max_pin_the_group_to_replicas() -> None:
    group = worker(replicas=3)
    assert (group.min_replicas, group.max_replicas) == (None, None)
    assert (group.effective_min_replicas, group.effective_max_replicas) == (3, 3)


def test_runtime_env_is_copied_and_made_json() -> None:
    given = {"pip": ("numpy",), "env_vars": {"A": "1"}}
    cfg = job(runtime_env=given)
    assert cfg.runtime_env == {"pip": ["numpy"], "env_vars": {"A": "1"}}
    cfg.runtime_env["env_vars"]["B"] = "2"
    assert given == {"pip": ("numpy",), "env_vars": {"A": "1"}}


def test_user_pod_template_is_never_mutated() -> None:
    template = PodTemplate(
        primary_container_name="primary",
        labels={"a": "b"},
        pod_spec=V1PodSpec(
            containers=[V1Container(name="primary", resources=V1ResourceRequirements(limits={"cpu": "1"}))],
            node_selector={"pool": "x"},
            tolerations=[V1Toleration(key="k", operator="Exists")],
        ),
    )
    before = copy.deepcopy(ApiClient().sanitize_for_serialization(template.pod_spec))
    gpu = ComputeTemplate(
        name="g", gpu=1, node_selector={"gpu": "yes"}, tolerations=[{"key": "g", "operator": "Exists"}]
    )
    group = worker(pod_template=template, compute_template=gpu, requests=Resources(mem="1Gi"))
    assert group.k8s_pod is not None
    assert group.k8s_pod["podSpec"]["containers"][0]["name"] == "ray-worker"
    assert ApiClient().sanitize_for_serialization(template.pod_spec) == before
    assert template.primary_container_name == "primary" and template.labels == {"a": "b"}
    assert group.pod_template is template
