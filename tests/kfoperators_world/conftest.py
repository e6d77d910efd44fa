"""Fixtures of the local-world tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def full_world(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local runs use the real topology (the documented switch), for this test only."""
    monkeypatch.setenv("KUBEJOBS_LOCAL_WORLD", "full")
    yield


@pytest.fixture(autouse=True)
def environ_untouched() -> Iterator[None]:
    """The parent's environment is never modified by a local world (monkeypatch's changes excepted)."""
    before = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    yield
    # Torn down after monkeypatch (autouse fixtures are set up first), so its changes are undone by now.
    assert {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"} == before
