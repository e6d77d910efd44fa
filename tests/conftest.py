"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


def _crd_dir() -> Path:
    # The official CRD schemas are upstream files kept outside the repository (never committed here):
    # ../shared/crds next to the clone, or $KUBEJOBS_CRD_DIR.
    return Path(os.environ.get("KUBEJOBS_CRD_DIR", REPO.parent / "shared" / "crds"))


CRD_DIR = _crd_dir()


@pytest.fixture(scope="session")
def crd_dir() -> Path:
    if not (CRD_DIR / "kubeflow.org_pytorchjobs.json").exists():
        pytest.fail(f"CRD schemas not found in {CRD_DIR}; set KUBEJOBS_CRD_DIR")
    return CRD_DIR


@pytest.fixture(scope="session")
def schemas(crd_dir: Path) -> Any:
    """The official CRD schemas as a SchemaSet, compiled once per test session."""
    from flytekitplugins.kubejobs.schema import SchemaSet

    return SchemaSet.from_dir(crd_dir)


@pytest.fixture(autouse=True)
def _no_kubejobs_settings_from_the_shell() -> Iterator[None]:
    """The suite gives the same result whatever ``KUBEJOBS_*`` variables the shell has set (the CRD
    directory above is read once, at import, before this runs). Its own MonkeyPatch, so a test's
    ``monkeypatch`` is still undone before the local-world fixtures compare the environment."""
    with pytest.MonkeyPatch.context() as patch:
        for name in [n for n in os.environ if n.startswith("KUBEJOBS_")]:
            patch.delenv(name)
        yield
