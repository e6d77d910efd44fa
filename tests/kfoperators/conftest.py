"""Fixtures for the kfoperators tests."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flytekit.configuration import ImageConfig, SerializationSettings
from flytekit.tools.translator import get_serializable
from flytekitplugins.kubejobs import extension


@pytest.fixture
def settings() -> SerializationSettings:
    return SerializationSettings(
        project="proj", domain="dev", version="v1", image_config=ImageConfig.auto(img_name="registry.example/flyte:1.0")
    )


@pytest.fixture
def register(settings: SerializationSettings) -> Callable[[Any], Any]:
    """The TaskTemplate (flyteidl message) a task registers as."""

    def _register(task: Any) -> Any:
        return get_serializable(OrderedDict(), settings, task).template.to_flyte_idl()

    return _register


@pytest.fixture
def fresh_extension_warnings() -> Iterator[None]:
    """Forget which job kinds already warned about the extension key (it warns once per process)."""
    saved = set(extension._warned)
    extension._warned.clear()
    yield
    extension._warned.clear()
    extension._warned.update(saved)
