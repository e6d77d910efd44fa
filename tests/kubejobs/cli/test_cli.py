"""The ``kubejobs`` CLI, through click's CliRunner and as the installed console script.

Tasks are in cli_example_tasks.py (this project's plugins) and cli_official_tasks.py (the same configs with
flytekit's official plugins); the expected replica counts and names are the ones written there and in the
hand-written manifests under manifests/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from flytekitplugins.kubejobs.cli import EXAMPLE_EXECUTION, main
from flytekitplugins.kubejobs.schema import SchemaSet, validate_object

HERE = Path(__file__).resolve().parent
TASKS = HERE / "cli_example_tasks.py"
OFFICIAL_TASKS = HERE / "cli_official_tasks.py"
GOOD = HERE / "manifests" / "good.yaml"
BAD = HERE / "manifests" / "bad.yaml"
SCRIPT = Path(sys.executable).parent / "kubejobs"
EXAMPLE_NAME = f"{EXAMPLE_EXECUTION['name']}-{EXAMPLE_EXECUTION['node_id']}-{EXAMPLE_EXECUTION['retry_attempt']}"

# Importing the example module warns: the official plugins (deprecated shared-memory option) and torch (no numpy).
pytestmark = [
    pytest.mark.filterwarnings("ignore::UserWarning:flytekitplugins.*"),
    pytest.mark.filterwarnings("ignore:Failed to initialize NumPy:UserWarning"),
]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def no_traceback(text: str) -> bool:
    return "Traceback" not in text


# ---- validate -------------------------------------------------------------------------------------------------


def test_validate_good_manifest_prints_ok_lines(crd_dir: Path) -> None:
    code, out, err = run("validate", str(GOOD), "--crd-dir", str(crd_dir))
    assert code == 0, err
    assert out.splitlines() == [
        f'ok: {GOOD}[0]: PyTorchJob "train" (kubeflow.org/v1)',
        f'ok: {GOOD}[2]: RayJob "ray-job" (ray.io/v1)',
    ]
    assert "ConfigMap" in err and "skipped" in err


def test_validate_bad_manifest_lists_each_problem_on_one_line(crd_dir: Path) -> None:
    code, out, err = run("validate", str(BAD), "--crd-dir", str(crd_dir))
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert len(lines) == 2 and all(line.startswith(f'invalid: {BAD}: PyTorchJob "train": ') for line in lines)
    assert "spec.pytorchReplicaSpecs.Worker.replica: unknown field" in lines[0]
    assert "spec.pytorchReplicaSpecs.Master.replicas: must be set to 1" in lines[1]


def test_validate_without_schemas_checks_rules_and_says_so() -> None:
    code, _, err = run("validate", str(BAD))
    assert code == 1
    assert "warning: no --crd-dir or --from-cluster" in err
    assert "Master.replicas" in err and "Worker.replica:" not in err  # the typo needs the schema


def test_validate_reads_json_from_stdin(crd_dir: Path) -> None:
    doc = yaml.safe_load(BAD.read_text())
    doc["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 1
    del doc["spec"]["pytorchReplicaSpecs"]["Worker"]["replica"]
    result = CliRunner().invoke(main, ["validate", "-", "--crd-dir", str(crd_dir)], input=json.dumps(doc))
    assert result.exit_code == 0 and result.stdout == 'ok: <stdin>: PyTorchJob "train" (kubeflow.org/v1)\n'


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda p: None, "error: cannot read"),
        (lambda p: p.write_text("kind: [PyTorchJob"), "is not valid YAML"),
        (lambda p: p.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"), "holds no"),
    ],
    ids=["missing file", "bad yaml", "no job"],
)
def test_validate_errors_are_one_line(tmp_path: Path, setup: Any, message: str) -> None:
    path = tmp_path / "manifest.yaml"
    setup(path)
    code, _, err = run("validate", str(path))
    assert code == 1 and message in err and no_traceback(err)
    assert err.strip().splitlines()[-1].startswith("error:")


def test_validate_refuses_both_schema_sources(crd_dir: Path) -> None:
    code, _, err = run("validate", str(GOOD), "--crd-dir", str(crd_dir), "--from-cluster")
    assert code == 1 and "not both" in err


def test_validate_from_cluster_reads_the_crds_of_the_fake_api_server(
    crd_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fakeapi import FakeApiServer

    with FakeApiServer(crd_dir=crd_dir) as server:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(server.kubeconfig()))
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        code, out, err = run("validate", str(GOOD), "--from-cluster")
        assert code == 0, err
        assert out.count("ok: ") == 2
        code, _, err = run("validate", str(BAD), "--from-cluster")
        assert code == 1 and "Worker.replica: unknown field" in err  # the schema came from the server
        assert server.requests  # the real client talked to it over HTTP
        # $KUBEJOBS_CRD_DIR is a default that an explicit --from-cluster overrides (an empty directory here:
        # were it used, the bad manifest would pass schema-less); an explicit --crd-dir with it is refused.
        (tmp_path / "no-crds").mkdir()
        monkeypatch.setenv("KUBEJOBS_CRD_DIR", str(tmp_path / "no-crds"))
        code, _, err = run("validate", str(BAD), "--from-cluster")
        assert code == 1 and "Worker.replica: unknown field" in err
        code, _, err = run("validate", str(GOOD), "--from-cluster", "--crd-dir", str(crd_dir))
        assert code == 1 and "give either --crd-dir or --from-cluster, not both" in err


def test_validate_from_cluster_without_a_kubeconfig_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    code, _, err = run("validate", str(GOOD), "--from-cluster")
    assert code == 1 and "error: --from-cluster: no usable kubeconfig" in err and no_traceback(err)


def test_validate_from_cluster_with_the_server_down_is_one_line(
    crd_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fakeapi import FakeApiServer

    with FakeApiServer() as server:
        config = server.kubeconfig()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))  # points at a port nobody listens on any more
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    code, _, err = run("validate", str(GOOD), "--from-cluster")
    assert code == 1 and no_traceback(err)
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(f"error: --from-cluster: cannot reach {config['clusters'][0]['cluster']['server']}")
    )


# ---- render ---------------------------------------------------------------------------------------------------


def render(*args: str) -> tuple[int, str, str]:
    return run("render", str(TASKS), *args)


def test_render_pytorch_builds_a_valid_object(crd_dir: Path) -> None:
    code, out, err = render("train_pytorch", "--crd-dir", str(crd_dir))
    assert code == 0, err
    obj = yaml.safe_load(out)
    assert (obj["apiVersion"], obj["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
    assert obj["metadata"]["name"] == EXAMPLE_NAME
    assert obj["metadata"]["namespace"] == "flytesnacks-development"
    replicas = obj["spec"]["pytorchReplicaSpecs"]
    assert replicas["Worker"]["replicas"] == 2 and replicas["Master"]["replicas"] == 1  # as configured
    container = replicas["Worker"]["template"]["spec"]["containers"][0]
    assert container["name"] == "pytorch"
    assert container["args"][-4:] == ["task-module", "cli_example_tasks", "task-name", "train_pytorch"]
    assert "{{" not in out  # placeholders filled with the example execution's paths
    validate_object(obj, SchemaSet.from_dir(crd_dir))  # what was printed is what was validated


@pytest.mark.parametrize(
    ("task", "kind", "counts"),
    [
        ("train_tensorflow", "TFJob", {"Chief": 1, "PS": 1, "Worker": 2}),
        ("train_mpi", "MPIJob", {"Launcher": 1, "Worker": 2}),
        ("train_elastic", "PyTorchJob", {"Worker": 3}),
    ],
)
def test_render_other_kinds_as_json(crd_dir: Path, task: str, kind: str, counts: dict[str, Any]) -> None:
    code, out, err = render(task, "--crd-dir", str(crd_dir), "-o", "json", "--namespace", "team-a")
    assert code == 0, err
    obj = json.loads(out)
    assert obj["kind"] == kind and obj["metadata"]["namespace"] == "team-a"
    specs = next(v for k, v in obj["spec"].items() if k.endswith("ReplicaSpecs"))
    assert {role: spec["replicas"] for role, spec in specs.items()} == counts


@pytest.mark.parametrize("task", ["train_pytorch", "train_tensorflow", "train_mpi", "train_ray"])
def test_render_tasks_of_the_official_plugins(crd_dir: Path, task: str) -> None:
    # Drop-in API: the official plugins' task of the same config renders a valid object of the same shape.
    code, out, err = run("render", str(OFFICIAL_TASKS), task, "--crd-dir", str(crd_dir), "-o", "json")
    assert code == 0, err
    official = json.loads(out)
    ours = json.loads(render(task, "--crd-dir", str(crd_dir), "-o", "json")[1])
    assert official["kind"] == ours["kind"]

    def counts(obj: dict[str, Any]) -> Any:
        spec = obj["spec"]
        if obj["kind"] == "RayJob":
            return [(g["groupName"], g["replicas"]) for g in spec["rayClusterSpec"]["workerGroupSpecs"]]
        return {r: s["replicas"] for r, s in next(v for k, v in spec.items() if k.endswith("ReplicaSpecs")).items()}

    assert counts(official) == counts(ours)


def test_render_ray(crd_dir: Path) -> None:
    code, out, err = render("train_ray", "--crd-dir", str(crd_dir))
    assert code == 0, err
    spec = yaml.safe_load(out)["spec"]
    group = spec["rayClusterSpec"]["workerGroupSpecs"][0]
    assert (group["groupName"], group["replicas"], group["minReplicas"], group["maxReplicas"]) == ("workers", 2, 1, 4)
    assert spec["shutdownAfterJobFinishes"] is True and spec["ttlSecondsAfterFinished"] == 120


@pytest.mark.parametrize(
    ("task", "counts", "dropped"),
    [
        ("train_pytorch", {"Master": 1, "Worker": 2}, "workerReplicas.resources"),
        ("train_tensorflow", {"Chief": 1, "PS": 1, "Worker": 2}, "workerReplicas.resources"),
        ("train_mpi", {"Launcher": 1, "Worker": 2}, "workerReplicas.resources"),
    ],
)
def test_render_version_0_keeps_the_counts_an_old_client_sends(
    crd_dir: Path, task: str, counts: dict[str, Any], dropped: str
) -> None:
    code, out, err = render(task, "--version", "0", "--crd-dir", str(crd_dir))
    assert code == 0, err
    specs = next(v for k, v in yaml.safe_load(out)["spec"].items() if k.endswith("ReplicaSpecs"))
    assert {role: spec["replicas"] for role, spec in specs.items()} == counts
    assert "task_type_version 0 cannot carry" in err and dropped in err


def test_render_version_0_keeps_the_elastic_config(crd_dir: Path) -> None:
    code, out, err = render("train_elastic", "--version", "0", "--crd-dir", str(crd_dir))
    assert code == 0, err
    elastic = yaml.safe_load(out)["spec"]["elasticPolicy"]
    assert (elastic["minReplicas"], elastic["maxReplicas"], elastic["nProcPerNode"]) == (1, 3, 2)


def test_render_reports_an_invalid_object_with_its_path(crd_dir: Path) -> None:
    code, out, err = render("bad_sidecar_name", "--crd-dir", str(crd_dir))
    assert code == 1 and out == "" and no_traceback(err)
    invalid = [line for line in err.splitlines() if line.startswith("invalid: ")]
    assert [line.split(": ")[2] for line in invalid] == [
        f"spec.pytorchReplicaSpecs.{role}.template.spec.containers[1].name" for role in ("Master", "Worker")
    ]
    assert all('"Log_Shipper" is not a DNS-1123 label' in line for line in invalid)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing_task"], "has no task named 'missing_task'"),
        (["not_a_task"], "not a flytekit task"),
        (["train_ray", "--version", "1"], "train_ray is a 'ray' task with one encoding: leave --version out"),
        (["train_ray", "--version", "0"], "--version applies to the kubeflow task types (pytorch, tensorflow, mpi)"),
        (
            ["train_elastic_one_node"],
            "train_elastic_one_node is a plain 'python-task': it runs as one pod, not as a job, so there is no job",
        ),
    ],
)
def test_render_errors_are_one_line(args: list[Any], message: str) -> None:
    code, out, err = render(*args)
    assert code == 1 and out == "" and message in err and no_traceback(err)


# ---- the installed console script ------------------------------------------------------------------------------


def script(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBEJOBS_CRD_DIR"}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=300, env=env, check=False)


@pytest.mark.slow
def test_console_script_validates_and_renders(crd_dir: Path, tmp_path: Path) -> None:
    good = script("validate", str(GOOD), "--crd-dir", str(crd_dir))
    assert good.returncode == 0 and good.stdout.count("ok: ") == 2, good.stderr
    bad = script("validate", str(BAD), "--crd-dir", str(crd_dir))
    assert bad.returncode == 1 and no_traceback(bad.stderr)
    assert [line.split(": ")[3] for line in bad.stderr.splitlines()] == [
        "spec.pytorchReplicaSpecs.Worker.replica",
        "spec.pytorchReplicaSpecs.Master.replicas",
    ]
    rendered = script("render", str(TASKS), "train_pytorch", "--crd-dir", str(crd_dir), "-o", "json")
    assert rendered.returncode == 0, rendered.stderr
    manifest = tmp_path / "job.json"
    manifest.write_text(rendered.stdout)
    again = script("validate", str(manifest), "--crd-dir", str(crd_dir))
    assert again.returncode == 0 and again.stdout == f'ok: {manifest}: PyTorchJob "{EXAMPLE_NAME}" (kubeflow.org/v1)\n'
