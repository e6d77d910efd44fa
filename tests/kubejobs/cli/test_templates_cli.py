"""``kubejobs render --templates`` resolves compute template names offline, and ``kubejobs templates create``
checks a template before it touches any cluster (the cluster side runs in tests/e2e/test_compute_templates.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from flytekitplugins.kubejobs.cli import main
from flytekitplugins.kubejobs.wire.compute import TemplateSpec

HERE = Path(__file__).resolve().parent
TASKS = HERE / "cli_example_tasks.py"

pytestmark = [
    pytest.mark.filterwarnings("ignore::UserWarning:flytekitplugins.*"),
    pytest.mark.filterwarnings("ignore:Failed to initialize NumPy:UserWarning"),
]

TEMPLATES = """\
- name: a100x8
  cpu: 8
  memory: 64Gi
  gpu: 8
  nodeSelector: {pool: a100}
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
- name: cpu-large
  cpu: 16
  memory: 32Gi
"""


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_render_resolves_template_names_from_a_file(tmp_path: Path, crd_dir: Path) -> None:
    path = tmp_path / "templates.yaml"
    path.write_text(TEMPLATES)
    code, out, err = run(
        "render", str(TASKS), "train_named_template", "--templates", str(path), "--crd-dir", str(crd_dir)
    )
    assert code == 0, err
    worker = yaml.safe_load(out)["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    assert worker["containers"][0]["resources"] == {
        "requests": {"cpu": "4", "memory": "64Gi", "nvidia.com/gpu": "8"},  # the role's own cpu request wins
        "limits": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "8"},
    }
    assert worker["nodeSelector"] == {"pool": "a100"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in worker["tolerations"]


def test_render_reads_the_configmaps_kubectl_prints(tmp_path: Path) -> None:
    # `kubectl get configmap -l kubejobs.flyte.org/config-type=compute-template -o yaml` prints a List
    items = [
        TemplateSpec("a100x8", cpu="8", gpu=1).to_configmap("flyte"),
        TemplateSpec("cpu-large", cpu="2").to_configmap("flyte"),
    ]
    path = tmp_path / "cms.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    code, out, err = run("render", str(TASKS), "ray_named_template", "--templates", str(path), "-o", "json")
    assert code == 0, err
    cluster = json.loads(out)["spec"]["rayClusterSpec"]
    assert cluster["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "2"
    worker = cluster["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    # the template over the task's pod (platform default memory: the template sets none)
    assert worker["resources"]["limits"] == {"cpu": "8", "memory": "1024Mi", "nvidia.com/gpu": "1"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "compute template 'a100x8' cannot be resolved: no compute templates were given"),
        (
            ["--templates", "{file}"],
            "Worker: compute template 'a100x8' does not exist in {file}; existing templates: 'other'",
        ),
    ],
)
def test_render_says_which_template_is_missing(tmp_path: Path, args: list[str], message: str) -> None:
    path = tmp_path / "templates.yaml"
    path.write_text("name: other\ncpu: 1\n")
    code, _, err = run("render", str(TASKS), "train_named_template", *[a.format(file=path) for a in args])
    assert code == 1
    assert message.format(file=path) in " ".join(err.split()) and "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["a100x8", "--cpu", "lots"], "compute template 'a100x8' (the command line).cpu is not a Kubernetes quantity"),
        (["A100", "--cpu", "1"], "compute template name must be a DNS-1123 label"),
        (["a", "--node-selector", "pool"], "--node-selector takes NAME=VALUE, got 'pool'"),
        (["a", "--toleration", "gpu:Sometimes"], "tolerations[0].effect must be one of"),
        ([], "give a template NAME (with flags) or --file"),
        (["a", "--file", "x.yaml"], "give either --file or NAME with flags, not both"),
    ],
)
def test_create_refuses_a_bad_template_before_reaching_any_cluster(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, args: list[str], message: str
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))  # any cluster access would fail differently
    code, _, err = run("templates", "create", *args)
    assert code == 1
    assert message in " ".join(err.split()), err


def test_create_from_a_file_stops_at_the_first_invalid_template(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    path = tmp_path / "templates.yaml"
    path.write_text(TEMPLATES + "- name: bad\n  memory: lots\n")
    code, _, err = run("templates", "create", "-f", str(path))
    assert code == 1
    assert f"{path}[2]: compute template 'bad'" in err and "memory is not a Kubernetes quantity" in err
