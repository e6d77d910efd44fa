"""Every ```python block of the top-level README and of the kubejobs README runs as written.

(The kfoperators and raycluster READMEs are run by their own test folders.)
"""

from __future__ import annotations

import re
import runpy
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
READMES = [REPO / "README.md", REPO / "plugins" / "flytekitplugins-kubejobs" / "README.md"]
BLOCKS = [
    pytest.param(block, id=f"{readme.parent.name}-{i}")
    for readme in READMES
    for i, block in enumerate(re.findall(r"```python\n(.*?)```", readme.read_text(), flags=re.S))
]


@pytest.mark.parametrize("block", BLOCKS)
def test_readme_python_block_runs(block: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crd_dir: Path) -> None:
    # The examples read the operators' CRD schemas from where a deployment mounts them: $KUBEJOBS_CRD_DIR.
    monkeypatch.setenv("KUBEJOBS_CRD_DIR", str(crd_dir))
    # flytekit reads a task's source file, so each block runs from a real module file.
    path = tmp_path / "readme_block.py"
    path.write_text(block)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(path), run_name="readme_block")


def test_readme_shows_the_quick_start_commands() -> None:
    text = (REPO / "README.md").read_text()
    assert "make demo" in text and "make test" in text
