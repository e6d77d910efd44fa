"""The kaniko builder's registration, offline rendering (context, ConfigMap, Job), settings, CLI and per-role images."""

from __future__ import annotations

import base64
import gzip
import io
import os
import subprocess
import sys
import tarfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from flytekit import ImageSpec
from flytekit.image_spec.image_spec import ImageBuildEngine
from flytekitplugins.kubejobs.cli import main
from flytekitplugins.kubejobs.imagebuild import (
    KANIKO_IMAGE,
    MAX_CONTEXT_BYTES,
    BuildSettings,
    ContextTooLarge,
    KanikoImageBuilder,
    context_archive,
    render,
)

HERE = Path(__file__).resolve().parent
SPECS = HERE / "image_specs.py"


def spec(**fields: Any) -> ImageSpec:
    base = {"name": "train", "registry": "registry.example:5000/ml", "base_image": "python:3.11-slim"}
    return ImageSpec(builder="kaniko", **{**base, **fields})


def archive_files(configmap: dict[str, Any]) -> dict[str, bytes]:
    data = base64.b64decode(configmap["binaryData"]["context.tar.gz"])
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]


# ---- registration -----------------------------------------------------------------------------------------------


def test_builder_kaniko_is_found_through_the_image_build_engine() -> None:
    assert isinstance(ImageBuildEngine._get_builder(spec().builder), KanikoImageBuilder)
    # never the default: an ImageSpec without builder= keeps flytekit's default builder
    assert ImageSpec(base_image="python:3.11-slim").builder == "default"


def test_import_flytekit_registers_it_without_importing_kubernetes() -> None:
    code = (
        "import sys, flytekit\n"
        "from flytekit.image_spec.image_spec import ImageBuildEngine\n"
        "assert 'kaniko' in ImageBuildEngine.get_registry()\n"
        "assert 'kubernetes' not in sys.modules, 'kubernetes imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


# ---- rendering ----------------------------------------------------------------------------------------------------


def test_the_job_runs_kaniko_once_with_the_context_and_the_registry_secret() -> None:
    settings = BuildSettings(namespace="builds", registry_secret="push", service_account="kaniko", timeout=900)
    built = render(spec(), settings, suffix="abc123")
    job, configmap = built["job"], built["configmap"]
    name = job["metadata"]["name"]
    assert name.startswith("kaniko-") and name.endswith("-abc123") and configmap["metadata"]["name"] == name
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["activeDeadlineSeconds"] == 900
    assert job["spec"]["ttlSecondsAfterFinished"] == 3600
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "kaniko" and pod["automountServiceAccountToken"] is False
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    assert container["image"] == KANIKO_IMAGE
    assert container["args"][:3] == [
        "--context=tar:///kaniko/context-archive/context.tar.gz",
        "--dockerfile=Dockerfile",
        f"--destination={built['image']}",
    ]
    assert built["image"] == spec().image_name()
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["docker-config"]["secret"] == {
        "secretName": "push",
        "items": [{"key": ".dockerconfigjson", "path": "config.json"}],
    }
    assert {m["mountPath"] for m in container["volumeMounts"]} == {"/kaniko/context-archive", "/kaniko/.docker"}
    assert archive_files(configmap) == {"Dockerfile": built["dockerfile"].encode()}


def test_an_image_spec_base_is_its_image_name() -> None:
    base = spec(name="base", packages=["numpy==2.1.0"])
    derived = spec(base_image=base, packages=["pandas==2.2.0"])
    built = render(derived, BuildSettings())
    assert built["dockerfile"].startswith(f"FROM {base.image_name()}\n")
    assert derived.base_image is base  # the user's spec is not changed


def test_copy_files_and_requirements_travel_in_the_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('hi')\n")
    (tmp_path / "requirements.txt").write_text("pandas==2.2.0\n")
    monkeypatch.chdir(tmp_path)
    built = render(spec(copy=["src"], requirements="requirements.txt"), BuildSettings())
    files = archive_files(built["configmap"])
    assert files["root/src/train.py"] == b"print('hi')\n"
    assert files["requirements.txt"] == b"pandas==2.2.0\n"
    assert 'COPY ["root/", "/root/"]' in built["dockerfile"].splitlines()
    assert '"-r", "/tmp/requirements.txt"' in built["dockerfile"]


def test_a_context_above_the_configmap_limit_is_refused_with_its_size() -> None:
    big = os.urandom(MAX_CONTEXT_BYTES)  # random bytes do not compress
    with pytest.raises(ContextTooLarge, match=r"the build context is \d+ bytes compressed, above the 1048576"):
        context_archive({"big.bin": big})
    with pytest.raises(ValueError, match="must be relative"):
        context_archive({"../escape": b""})


def test_the_archive_is_reproducible() -> None:
    files = {"Dockerfile": b"FROM x\n", "root/a.py": b"a"}
    assert context_archive(files) == context_archive(dict(reversed(list(files.items()))))


def test_build_image_needs_a_registry() -> None:
    with pytest.raises(ValueError, match=r"ImageSpec.registry is required"):
        KanikoImageBuilder(BuildSettings()).build_image(ImageSpec(base_image="python:3.11-slim", builder="kaniko"))


# ---- settings ---------------------------------------------------------------------------------------------------


def test_settings_from_a_file_then_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "build.yaml"
    path.write_text(
        yaml.safe_dump(
            {"namespace": "builds", "registry-secret": "push", "timeout": 600, "kaniko-args": ["--cache=true"]}
        )
    )
    env = {"KUBEJOBS_IMAGE_BUILD_CONFIG": str(path), "KUBEJOBS_IMAGE_BUILD_TIMEOUT": "300"}
    settings = BuildSettings.from_env(env)
    assert (settings.namespace, settings.registry_secret, settings.timeout) == ("builds", "push", 300)
    assert settings.kaniko_args == ("--cache=true",)
    annotated = BuildSettings.from_env({"KUBEJOBS_IMAGE_BUILD_POD_ANNOTATIONS": "{sidecar.istio.io/inject: 'false'}"})
    assert annotated.pod_annotations == {"sidecar.istio.io/inject": "false"}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"namespace": "Builds"}, "BuildSettings.namespace 'Builds'"),
        ({"registry_secret": "a b"}, "BuildSettings.registry_secret 'a b'"),
        ({"kaniko_image": "executor latest"}, "BuildSettings.kaniko_image"),
        ({"timeout": 0}, "BuildSettings.timeout must be positive"),
        ({"resources": {"requests": {"cpu": "lots"}}}, "BuildSettings.resources.requests.cpu"),
        ({"kaniko_args": ["--destination=evil/x"]}, "the builder sets this flag itself"),
        ({"kaniko_args": ["rm -rf"]}, "must be a --flag"),
        ({"colour": "blue"}, "image build setting 'colour' is unknown"),
    ],
)
def test_bad_settings_are_refused_naming_the_setting(values: dict[str, Any], message: str) -> None:
    with pytest.raises((ValueError, TypeError)) as caught:
        BuildSettings.from_mapping(values)
    assert message in str(caught.value)


# ---- CLI --------------------------------------------------------------------------------------------------------


def test_kubejobs_image_render_prints_the_dockerfile_and_the_manifests() -> None:
    result = CliRunner().invoke(
        main, ["image", "render", str(SPECS), "training"], env={"KUBEJOBS_IMAGE_BUILD_NAMESPACE": "builds"}
    )
    assert result.exit_code == 0, result.stderr
    comments = [line for line in result.stdout.splitlines() if line.startswith("#")]
    assert comments[0].startswith("# image: registry.example:5000/ml/train:")
    assert '#   RUN ["python3", "-m", "pip", "install", "--no-cache-dir", "numpy==2.1.0"]' in comments
    configmap, job = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert (configmap["kind"], job["kind"]) == ("ConfigMap", "Job")
    assert job["metadata"]["namespace"] == "builds"


def test_kubejobs_image_render_refuses_what_is_not_an_image_spec() -> None:
    result = CliRunner().invoke(main, ["image", "render", str(SPECS), "not_a_spec"])
    assert result.exit_code == 1
    assert "not_a_spec is a str, not a flytekit ImageSpec" in result.stderr


# ---- per-role images --------------------------------------------------------------------------------------------


def test_a_role_image_spec_is_built_and_serialized_as_its_image_name() -> None:
    from flytekit import task
    from flytekit.configuration import ImageConfig, SerializationSettings
    from flytekit.tools.translator import get_serializable
    from flytekitplugins.kfoperators import PyTorch, Worker

    # builder "noop": its image is the base image, so nothing is built here.
    role_image = ImageSpec(name="worker", base_image="registry.example/ml/worker:7", builder="noop")

    @task(task_config=PyTorch(worker=Worker(replicas=2, image=role_image)))
    def train() -> None: ...

    settings = SerializationSettings(image_config=ImageConfig.auto_default_image())
    custom = get_serializable(OrderedDict(), settings, train).template.custom
    assert custom["workerReplicas"]["image"] == "registry.example/ml/worker:7"


def test_a_role_image_of_another_type_is_refused() -> None:
    from flytekitplugins.kfoperators import Worker

    with pytest.raises(TypeError, match=r"Worker.image"):
        Worker(image=3)
