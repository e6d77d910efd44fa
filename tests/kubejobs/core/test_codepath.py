"""code_root: where `import <module name>` finds a task's module in a fresh interpreter."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from flytekitplugins.kubejobs import codepath
from flytekitplugins.kubejobs.codepath import code_root


def test_a_package_module_imports_from_the_directory_above_its_top_package() -> None:
    assert code_root(code_root) == str(Path(codepath.__file__).parents[2])  # flytekitplugins.kubejobs.codepath


def test_a_plain_module_imports_from_its_own_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plain_task_module.py").write_text("def fn():\n    return 1\n")
    spec = importlib.util.spec_from_file_location("plain_task_module", tmp_path / "plain_task_module.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "plain_task_module", module)
    spec.loader.exec_module(module)
    assert code_root(module.fn) == str(tmp_path)


def test_no_root_for_builtins_or_main() -> None:
    assert code_root(len) is None  # no file
    assert code_root(type("InMain", (), {"__module__": "__main__"})) is None  # the script's directory is known
