"""The package's README examples run as written. (Docstring examples and light imports of every module are
checked for all packages by tests/test_package_hygiene.py.)"""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "plugins" / "flytekitplugins-kfoperators" / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_the_required_sections() -> None:
    text = README.read_text()
    assert BLOCKS and "## Decisions" in text and "## Differences from the official plugins" in text


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_block_runs(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # flytekit reads a task's source file, so each block runs from a real module file.
    path = tmp_path / f"kfoperators_readme_{index}.py"
    path.write_text(BLOCKS[index])
    monkeypatch.syspath_prepend(str(tmp_path))
    runpy.run_path(str(path), run_name=f"kfoperators_readme_{index}")


def test_the_issue_example_registers_with_the_documented_names() -> None:
    import flytekitplugins.kfoperators as kf

    wanted = {"PyTorch", "Elastic", "Master", "Worker", "TfJob", "PS", "Chief", "Evaluator", "MPIJob", "HorovodJob"}
    wanted |= {"Launcher", "RunPolicy", "CleanPodPolicy", "RestartPolicy", "ComputeTemplate", "SchedulingPolicy"}
    assert wanted <= set(kf.__all__)
    from flytekitplugins.kubejobs import policies

    assert kf.RunPolicy is policies.RunPolicy and kf.RestartPolicy is policies.RestartPolicy
