"""Every ```python block of the top-level README runs as written."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BLOCKS = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_block_runs(index, tmp_path, monkeypatch):
    # flytekit reads a task's source file, so each block runs from a real module file.
    path = tmp_path / f"readme_block_{index}.py"
    path.write_text(BLOCKS[index])
    monkeypatch.syspath_prepend(str(tmp_path))
    runpy.run_path(str(path), run_name=f"readme_block_{index}")


def test_readme_shows_the_quick_start_commands():
    text = (REPO / "README.md").read_text()
    assert "make demo" in text and "make test" in text
