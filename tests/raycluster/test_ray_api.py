"""Drop-in API: the classes of flytekitplugins-ray (installed) with the same fields, order and defaults;
the docstring examples of every module run."""

from __future__ import annotations

import dataclasses
import doctest
import importlib

import flytekitplugins.ray as official
import flytekitplugins.raycluster as ours
import pytest

CLASSES = ["RayJobConfig", "HeadNodeConfig", "WorkerNodeConfig", "AutoscalerOptionsConfig"]
MODULES = ["", ".task_configs", ".pods", ".runtime_env", ".serialize", ".local", ".task"]


def _signature(cls: type) -> list[tuple[str, object]]:
    out = []
    for f in dataclasses.fields(cls):
        if not f.init or f.kw_only:
            continue
        default = f.default if f.default is not dataclasses.MISSING else "<required>"
        if f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        out.append((f.name, default))
    return out


@pytest.mark.parametrize("name", CLASSES)
def test_same_positional_fields_and_defaults_as_flytekitplugins_ray(name: str) -> None:
    assert _signature(getattr(ours, name)) == _signature(getattr(official, name))


def test_additions_are_keyword_only() -> None:
    for name, additions in (
        ("HeadNodeConfig", ["compute_template"]),
        ("WorkerNodeConfig", ["compute_template", "idle_timeout_seconds"]),
    ):
        extra = [f.name for f in dataclasses.fields(getattr(ours, name)) if f.init and f.kw_only]
        assert extra == additions


def test_upscaling_modes_match() -> None:
    theirs = official.AutoscalerOptionsConfig.UpscalingMode
    for mode in ours.AutoscalerOptionsConfig.UpscalingMode:
        assert getattr(theirs, mode.name) == mode.value


def test_exports() -> None:
    assert set(ours.__all__) >= {*CLASSES, "ComputeTemplate"}
    from flytekitplugins.kubejobs import ComputeTemplate

    assert ours.ComputeTemplate is ComputeTemplate


@pytest.mark.parametrize("suffix", MODULES)
def test_docstring_examples_run(suffix: str) -> None:
    module = importlib.import_module(f"flytekitplugins.raycluster{suffix}")
    assert hasattr(module, "__all__")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    if suffix not in (".local", ".task"):  # the modules with examples
        assert result.attempted > 0


def test_the_task_module_exports_the_official_task_module_configs() -> None:
    import flytekitplugins.raycluster as package
    import flytekitplugins.raycluster.task as ours

    # flytekitplugins-ray's task module defines these configs (its IDL model classes come from .models)
    for name in ("RayJobConfig", "HeadNodeConfig", "WorkerNodeConfig", "AutoscalerOptionsConfig"):
        assert getattr(ours, name) is getattr(package, name)
