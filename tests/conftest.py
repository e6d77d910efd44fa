"""Fixtures shared by every test folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]

# The e2e control plane (tests/e2e) is started by the first test that needs it, in a directory shared by the
# xdist workers, and stopped here when the whole session ends (these hooks run in the controlling process,
# which loads only this conftest; the supervisor also stops by itself when that process is gone).
E2E_DIR = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        config.stash[E2E_DIR] = Path(tempfile.mkdtemp(prefix="kubejobs-e2e-"))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:  # xdist: what each worker is told
    node.workerinput["kubejobs_e2e_dir"] = str(node.config.stash[E2E_DIR])
    node.workerinput["kubejobs_e2e_watch_pid"] = os.getpid()


@pytest.fixture(scope="session")
def e2e_dir(request: pytest.FixtureRequest) -> tuple[Path, int]:
    """The control plane's directory for this session, and the process its supervisor outlives not."""
    workerinput = getattr(request.config, "workerinput", None)
    if workerinput is not None:
        return Path(workerinput["kubejobs_e2e_dir"]), int(workerinput["kubejobs_e2e_watch_pid"])
    return request.config.stash[E2E_DIR], os.getpid()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest tests (marked ``first``) run first: xdist hands tests out in this order, and a three-minute
    test handed out last would end the run alone on one worker."""
    items.sort(key=lambda item: item.get_closest_marker("first") is None)  # stable: the rest keep their order


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if hasattr(config, "workerinput") or E2E_DIR not in config.stash:
        return
    directory = config.stash[E2E_DIR]
    for plane in (directory / "mpi-operator", directory):  # the mpi-operator profile's, then the main one
        if (plane / "supervisor.pid").exists():
            subprocess.run(
                [sys.executable, "-m", "e2e.controlplane", "down", "--dir", str(plane)], cwd=REPO / "tests", check=True
            )
    if exitstatus == 0:
        shutil.rmtree(directory, ignore_errors=True)
    elif (directory / "logs").exists():
        print(f"\ne2e control plane logs kept in {directory / 'logs'}")


@pytest.fixture(scope="session")
def module_crds() -> dict[str, list[Path]]:
    """Per operator, the CRD YAML files that ship in its Go module at the version in cluster/versions.env.

    Found by cluster/build.py in Go's module cache (downloaded on first use); never copied into the repo.
    """
    done = subprocess.run(
        [sys.executable, str(REPO / "cluster" / "build.py"), "--crds"], capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        pytest.fail(f"cluster/build.py --crds failed (the CRDs come from the operators' Go modules):\n{done.stderr}")
    crds: dict[str, list[str]] = json.loads(done.stdout)["crds"]
    return {operator: [Path(f) for f in files] for operator, files in crds.items()}


@pytest.fixture(scope="session")
def crd_dir(module_crds: dict[str, list[Path]], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of the operators' whole CRD YAMLs (links into the module cache), as `--crd-dir` takes."""
    directory = tmp_path_factory.mktemp("crds")
    for operator, files in module_crds.items():
        for file in files:
            # training-operator and mpi-operator both ship kubeflow.org_mpijobs.yaml (v1 and v2beta1)
            (directory / f"{operator}_{file.name}").symlink_to(file)
    return directory


@pytest.fixture(scope="session")
def schemas(crd_dir: Path) -> Any:
    """The official CRD schemas as a SchemaSet, compiled once per test session."""
    from flytekitplugins.kubejobs.schema import SchemaSet

    return SchemaSet.from_dir(crd_dir)


@pytest.fixture(autouse=True)
def _no_kubejobs_settings_from_the_shell() -> Iterator[None]:
    """The suite gives the same result whatever ``KUBEJOBS_*`` variables the shell has set (the CRD
    directory above is read once, at import, before this runs). Its own MonkeyPatch, so a test's
    ``monkeypatch`` is still undone before the local-world fixtures compare the environment."""
    with pytest.MonkeyPatch.context() as patch:
        for name in [n for n in os.environ if n.startswith("KUBEJOBS_")]:
            patch.delenv(name)
        yield


@pytest.fixture
def fresh_extension_warnings() -> Iterator[None]:
    """Forget which job kinds already warned about the extension key (it warns once per process)."""
    from flytekitplugins.kubejobs import extension

    saved = set(extension._warned)
    extension._warned.clear()
    yield
    extension._warned.clear()
    extension._warned.update(saved)
