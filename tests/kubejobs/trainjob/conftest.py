"""The Trainer v2 CRDs, read from the trainer Go module at the versions the backend supports
(``go mod download -json github.com/kubeflow/trainer/v2@<version>``: the module cache, never a copy here)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

TRAINER_VERSIONS = ("v2.2.1", "v2.3.0")


def _module_dir(version: str) -> Path:
    if shutil.which("go") is None:
        pytest.fail("the TrainJob tests read the Trainer CRDs from its Go module: install Go")
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"github.com/kubeflow/trainer/v2@{version}"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    info = json.loads(out.stdout or "{}")
    if out.returncode != 0 or "Dir" not in info:
        pytest.fail(f"go mod download of the trainer module {version} failed: {info.get('Error') or out.stderr}")
    return Path(info["Dir"])


@pytest.fixture(scope="session", params=TRAINER_VERSIONS)
def trainer(request: pytest.FixtureRequest) -> Any:
    """(version, CRD directory, an independent jsonschema validator of the TrainJob schema)."""
    import jsonschema
    import yaml

    crds = _module_dir(request.param) / "manifests" / "base" / "crds"
    crd = yaml.safe_load((crds / "trainer.kubeflow.org_trainjobs.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return request.param, str(crds), jsonschema.Draft4Validator(schema)
