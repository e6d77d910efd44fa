"""The README's examples run as written: its python blocks, in order, as one module (the Ray task runs on
a real local Ray)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
from flytekitplugins.raycluster.local import shutdown_local_ray

README = Path(__file__).resolve().parents[2] / "plugins" / "flytekitplugins-raycluster" / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


@pytest.mark.slow
def test_readme_examples_run(tmp_path: Path) -> None:
    blocks = python_blocks(README.read_text())
    assert len(blocks) >= 3
    path = tmp_path / "readme_example.py"
    path.write_text("\n\n".join(blocks))
    spec = importlib.util.spec_from_file_location("readme_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["readme_example"] = module  # flytekit names tasks after their module
    try:
        spec.loader.exec_module(module)  # runs the asserts in the README
        assert module.tuning(trials=2) == 1.0
    finally:
        sys.modules.pop("readme_example", None)
        shutdown_local_ray()
