"""Fixtures for the kfoperators tests."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import pytest
from flytekit.configuration import ImageConfig, SerializationSettings
from flytekit.tools.translator import get_serializable


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
