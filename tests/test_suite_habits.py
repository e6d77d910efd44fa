"""The suite's own promises: a time limit per test, and the same result whatever KUBEJOBS_* the shell sets."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_every_test_has_a_time_limit(pytestconfig: pytest.Config) -> None:
    assert pytestconfig.pluginmanager.hasplugin("timeout"), "pytest-timeout is not installed (requirements.lock)"
    assert 0 < float(pytestconfig.getini("timeout")) <= 600


def test_no_kubejobs_variable_reaches_a_test() -> None:
    assert [name for name in os.environ if name.startswith("KUBEJOBS_")] == []


@pytest.mark.slow
def test_the_shells_kubejobs_variables_change_no_result(crd_dir: Path) -> None:
    # These files failed with KUBEJOBS_LOCAL_WORLD=full (7 tests) and a KUBEJOBS_CRD_DIR set (4) before the
    # autouse fixture of tests/conftest.py cleared the variables.
    env = {
        **os.environ,
        "KUBEJOBS_LOCAL_WORLD": "full",
        "KUBEJOBS_CONNECTOR_CACHE": "maybe",
        "KUBEJOBS_CRD_DIR": str(crd_dir),
    }
    # The CLI tests that rely on the defaults (no --crd-dir of their own): the rest of test_cli.py passes its
    # settings explicitly and only costs time here (two minutes of CI).
    files = ["tests/kfoperators_world/test_world_switch.py", "tests/kubejobs/cli/test_cli.py"]
    defaults = "test_world_switch or without or errors_are_one_line or server_down"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:randomly", *files, "-k", defaults],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:]


def test_the_longest_tests_are_handed_out_first(request: pytest.FixtureRequest) -> None:
    first = [item.get_closest_marker("first") is not None for item in request.session.items]
    assert first == sorted(first, reverse=True), "a test marked `first` is collected after an unmarked one"
