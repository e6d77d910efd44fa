"""Package-wide promises: docstring examples run, imports stay cheap, layers hold, surfaces are declared."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ["flytekitplugins.kubejobs", "flytekitplugins.kfoperators", "flytekitplugins.raycluster"]
HEAVY = ("torch", "ray", "kubernetes", "jsonschema")


def _modules() -> list[str]:
    names = []
    for package in PACKAGES:
        pkg = importlib.import_module(package)
        names.append(package)
        for info in pkgutil.walk_packages(pkg.__path__, prefix=f"{package}."):
            names.append(info.name)
    return names


MODULES = _modules()


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: Any) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} doctest example(s) failed in {name}"


@pytest.mark.parametrize("name", MODULES)
def test_every_module_declares_its_surface(name: Any) -> None:
    module = importlib.import_module(name)
    assert isinstance(getattr(module, "__all__", None), (list, tuple)), f"{name} has no __all__"
    for exported in module.__all__:
        assert hasattr(module, exported), f"{name}.__all__ names {exported!r}, which does not exist"


@pytest.mark.parametrize("package", PACKAGES)
def test_importing_a_plugin_loads_no_heavy_dependency(package: Any) -> None:
    code = f"import sys, {package}; print(','.join(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))"
    loaded = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.strip()
    assert loaded == "", f"importing {package} loaded {loaded}"


def test_import_layers_hold() -> None:
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint_imports, "import-linter is not installed in this environment"
    result = subprocess.run([lint_imports, str(REPO / "setup.cfg")], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_torch_processes_have_numpy() -> None:
    # Without numpy every torch process warns "Failed to initialize NumPy" and Tensor.numpy() fails;
    # the lock and the kfoperators torch extras install it.
    out = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.arange(4).numpy().sum())"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and out.stdout.strip() == "6", out.stderr
    assert "NumPy" not in out.stderr
