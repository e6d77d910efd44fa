"""The docstring examples of the connector and fake-server modules run as written."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "flytekitplugins.kubejobs.connector",
    "flytekitplugins.kubejobs.connector.cache",
    "flytekitplugins.kubejobs.connector.client",
    "flytekitplugins.kubejobs.connector.settings",
    "flytekitplugins.kubejobs.connector.connector",
    "flytekitplugins.kubejobs.connector.ownership",
    "flytekitplugins.kubejobs.connector.errors",
    "flytekitplugins.kubejobs.connector.placeholders",
    "flytekitplugins.kubejobs.connector.retry",
    "fakeapi.operator",
    "fakeapi.server",
    "fakeapi.store",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), raise_on_error=False)
    assert result.failed == 0
    assert result.attempted > 0
