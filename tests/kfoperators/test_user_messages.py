"""What a user sees from ``python``, ``pyflyte run`` and ``pyflyte package`` when a config is wrong or
deprecated: one short error naming the field, at the user's own file and line; deprecation warnings shown
by default; our warnings attributed to the user's file, never to flytekit's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line (?P<line>\d+)', re.MULTILINE)


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250", "FLYTE_SDK_RICH_TRACEBACKS": "0", "PYTHONWARNINGS": ""}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _workflow(tmp_path: Path, name: str, decorator: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(
        textwrap.dedent(
            f"""\
            from flytekit import Resources, task
            from flytekitplugins.kfoperators import PyTorch, Worker


            {decorator}
            def train() -> None:
                pass
            """
        )
    )
    return path


def _is_library(file: str) -> bool:
    return file.startswith("<") or "site-packages" in file or "/flytekitplugins/" in file or "/lib/python" in file


def test_a_bad_role_quantity_is_one_short_error_at_the_users_line(tmp_path: Path) -> None:
    decorator = '@task(task_config=PyTorch(worker=Worker(replicas=1, requests=Resources(mem="2Gb"))))'
    path = _workflow(tmp_path, "wf_quantity", decorator)
    result = _run(tmp_path, sys.executable, str(path))
    assert result.returncode == 1
    err = result.stderr
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith("ValueError: Worker.requests.mem is not a Kubernetes quantity: '2Gb' (a number with ASCII digits")
    ), err
    assert err.count("Traceback (most recent call last)") == 1, err  # no chained parser errors
    assert "kubernetes" not in err.replace("Kubernetes quantity", "") and "decimal" not in err, err
    assert len(err.splitlines()) <= 20, err
    user_frames = [(m["file"], int(m["line"])) for m in FRAME.finditer(err) if not _is_library(m["file"])]
    assert user_frames[-1] == (str(path), 5), err


def test_pyflyte_run_shows_the_bad_quantity_at_the_users_line(tmp_path: Path) -> None:
    decorator = '@task(task_config=PyTorch(worker=Worker(replicas=1, limits=Resources(cpu="NaN"))))'
    path = _workflow(tmp_path, "wf_run_quantity", decorator)
    result = _run(tmp_path, str(BIN / "pyflyte"), "run", path.name, "train")
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "Worker.limits.cpu is not a Kubernetes quantity: 'NaN'" in out, out
    assert f"{path}:5" in out or f'"{path}", line 5' in out, out
    assert "Running Execution" not in out


def test_task_level_resources_of_our_task_types_fail_at_decoration(tmp_path: Path) -> None:
    decorator = '@task(requests=Resources(mem="2Gb"), task_config=PyTorch(worker=Worker(replicas=1)))'
    path = _workflow(tmp_path, "wf_task_resources", decorator)
    for command in (["run", path.name, "train"], ["--pkgs", path.stem, "package", "--image", "img:1", "-f"]):
        result = _run(tmp_path, str(BIN / "pyflyte"), *command)
        out = result.stdout + result.stderr
        assert result.returncode != 0, (command, out)
        assert "task 'wf_task_resources.train': requests.mem is not a Kubernetes quantity: '2Gb'" in out, out
    assert not (tmp_path / "flyte-package.tgz").exists()


@pytest.mark.parametrize(
    ("decorator", "shown"),
    [
        (
            "@task(task_config=PyTorch(num_workers=2))",
            "PyTorch.num_workers is deprecated: use PyTorch(worker=Worker(replicas=2))",
        ),
        (
            "@task(task_config=PyTorch(worker=Worker(replicas=1), increase_shared_mem=True))",
            "PyTorch.increase_shared_mem is deprecated",
        ),
    ],
)
def test_pyflyte_run_shows_a_deprecated_field_and_its_replacement(tmp_path: Path, decorator: str, shown: str) -> None:
    path = _workflow(tmp_path, "wf_deprecated", decorator)
    result = _run(tmp_path, str(BIN / "pyflyte"), "run", path.name, "train")
    assert result.returncode == 0, result.stderr
    # shown by default (a DeprecationWarning outside __main__ is not), at the user's line
    assert f"{path}:5: KubejobsDeprecationWarning: {shown}" in result.stderr, result.stderr


def test_the_extension_key_warning_names_the_users_file_not_flytekits(tmp_path: Path) -> None:
    path = _workflow(tmp_path, "wf_extension", '@task(task_config=PyTorch(worker=Worker(replicas=1, env={"A": "1"})))')
    result = _run(tmp_path, str(BIN / "pyflyte"), "--pkgs", path.stem, "package", "--image", "img:1", "-f")
    assert result.returncode == 0, result.stderr
    warning = [line for line in result.stderr.splitlines() if "ExtensionKeyWarning" in line]
    assert len(warning) == 1 and warning[0].startswith(f"{path}:5: ExtensionKeyWarning: pytorch: env travel"), (
        result.stderr
    )
    assert "translator.py" not in result.stderr
