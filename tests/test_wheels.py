"""What each published wheel holds: its packages' modules, ``py.typed`` and its README, and nothing else.

The three plugin wheels are built once per run (``pip wheel --no-deps``, the venv's setuptools, no network;
xdist workers share the build through a lock in the run's base temp directory) from copies of the package
folders, so no ``build/`` is left in the checkout. The fake API server
(``tests/fakeapi``) and any other test code must never be in one: the connector image installs these wheels.
"""

from __future__ import annotations

import email
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from filelock import FileLock

REPO = Path(__file__).resolve().parents[1]
PLUGINS = REPO / "plugins"

#: Per distribution, the packages its wheel ships (a package added or removed must be added or removed here).
PACKAGES = {
    "flytekitplugins-kubejobs": {
        "flytekitplugins.kubejobs",
        "flytekitplugins.kubejobs.backend",
        "flytekitplugins.kubejobs.cli",
        "flytekitplugins.kubejobs.connector",
        "flytekitplugins.kubejobs.imagebuild",
        "flytekitplugins.kubejobs.schema",
        "flytekitplugins.kubejobs.wire",
    },
    "flytekitplugins-kfoperators": {"flytekitplugins.kfoperators", "flytekitplugins.kfoperators.runtime"},
    "flytekitplugins-raycluster": {"flytekitplugins.raycluster"},
}


@pytest.fixture(scope="session")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each distribution's wheel, built from a clean copy of its folder (by the first worker to ask)."""
    base = tmp_path_factory.getbasetemp()
    # Under xdist each worker's base is a folder of the run's: its parent is shared by this run's workers.
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "kubejobs-wheels"
    with FileLock(str(root) + ".lock"):
        if not (root / "done").exists():
            shutil.rmtree(root, ignore_errors=True)
            _build(root)
            (root / "done").touch()
    return {dist: next((root / dist).glob("*.whl")) for dist in PACKAGES}


def _build(root: Path) -> None:
    for dist in PACKAGES:
        source = root / "src" / dist
        shutil.copytree(
            PLUGINS / dist, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "*.pyc")
        )
        target = root / dist
        command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        done = subprocess.run(
            [*command, "-w", str(target), str(source)],
            capture_output=True,
            text=True,
            timeout=300,
            # setuptools prints a banner about editable installs in its build process.
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
        assert done.returncode == 0, done.stdout + done.stderr


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return sorted(archive.namelist())


def _source_files(dist: str) -> set[str]:
    """The modules and ``py.typed`` files under the distribution's package folders, as wheel paths."""
    base = PLUGINS / dist
    files = set()
    for package in PACKAGES[dist]:
        folder = base / package.replace(".", "/")
        files |= {p.relative_to(base).as_posix() for p in folder.glob("*.py")}
        files |= {p.relative_to(base).as_posix() for p in folder.glob("py.typed")}
    return files


@pytest.mark.parametrize("dist", sorted(PACKAGES))
def test_a_wheel_holds_its_packages_modules_and_nothing_else(wheels: dict[str, Path], dist: str) -> None:
    names = _names(wheels[dist])
    payload = {n for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert payload == _source_files(dist)
    packages = {n.rsplit("/", 1)[0].replace("/", ".") for n in payload if n.endswith("/__init__.py")}
    assert packages == PACKAGES[dist]
    # A namespace package (as flytekit's plugins): no flytekitplugins/__init__.py to clash between wheels.
    assert "flytekitplugins/__init__.py" not in names
    assert not [n for n in names if "testing" in n.split("/") or "fakeapi" in n or n.startswith("tests/")]


@pytest.mark.parametrize("dist", sorted(PACKAGES))
def test_a_wheel_is_typed_and_carries_its_readme(wheels: dict[str, Path], dist: str) -> None:
    names = _names(wheels[dist])
    short = dist.removeprefix("flytekitplugins-")
    assert f"flytekitplugins/{short}/py.typed" in names  # PEP 561: users' mypy reads our annotations
    (metadata_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    with zipfile.ZipFile(wheels[dist]) as archive:
        metadata = email.message_from_string(archive.read(metadata_name).decode("utf-8"))
    assert metadata["Name"] == dist
    assert metadata["Description-Content-Type"] == "text/markdown"
    description = metadata.get_payload()
    assert isinstance(description, str)
    assert description.strip() == (PLUGINS / dist / "README.md").read_text(encoding="utf-8").strip()


def test_the_kubejobs_wheel_declares_its_command_and_connector_entry_point(wheels: dict[str, Path]) -> None:
    wheel = wheels["flytekitplugins-kubejobs"]
    (entry_points,) = [n for n in _names(wheel) if n.endswith(".dist-info/entry_points.txt")]
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(entry_points).decode()
    assert "kubejobs = flytekitplugins.kubejobs.cli:main" in text
    assert "kubejobs-connector = flytekitplugins.kubejobs.connector" in text
    assert "kubejobs-kaniko = flytekitplugins.kubejobs.imagebuild" in text
