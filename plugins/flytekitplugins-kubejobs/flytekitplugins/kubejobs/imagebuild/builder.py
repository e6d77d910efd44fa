"""The ImageSpec builder ``kaniko``: flytekit's side (reads the ImageSpec and its files; no kubernetes import here)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Optional

from flytekit.image_spec.image_spec import ImageSpec, ImageSpecBuilder

from .dockerfile import CONTEXT_FILES_DIR, CONTEXT_REQUIREMENTS, recipe_from_image_spec, render_dockerfile
from .manifests import build_job, build_name, context_archive, context_configmap
from .settings import BuildSettings

#: The ``ImageSpec.builder`` value of this builder.
BUILDER_TYPE = "kaniko"

__all__ = ["BUILDER_TYPE", "KanikoImageBuilder", "context_files", "register", "render"]


def context_files(spec: ImageSpec) -> dict[str, bytes]:
    """The files the image gets in ``/root`` (``source_root`` by its copy mode, then ``copy``), by context path."""
    from flytekit.constants import CopyFileDetection

    files: dict[str, bytes] = {}
    if spec.source_copy_mode is not None and spec.source_copy_mode != CopyFileDetection.NO_COPY:
        if not spec.source_root:
            raise ValueError(f"ImageSpec.source_root must be set with source_copy_mode {spec.source_copy_mode}")
        from flytekit.tools.ignore import DockerIgnore, GitIgnore, IgnoreGroup, StandardIgnore
        from flytekit.tools.script_mode import ls_files

        ignore = IgnoreGroup(spec.source_root, [GitIgnore, DockerIgnore, StandardIgnore])
        listed, _ = ls_files(str(spec.source_root), spec.source_copy_mode, deref_symlinks=False, ignore_group=ignore)
        for path in listed:
            relative = Path(os.path.relpath(path, start=str(spec.source_root))).as_posix()
            files[f"{CONTEXT_FILES_DIR}/{relative}"] = Path(path).read_bytes()
    for src in spec.copy or ():
        source = Path(src)
        if source.is_absolute() or ".." in source.parts:
            raise ValueError(f"ImageSpec.copy {src!r} must be a relative path inside the current directory")
        paths = sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() else [source]
        for path in paths:
            files[f"{CONTEXT_FILES_DIR}/{path.as_posix()}"] = path.read_bytes()
    return files


def render(spec: ImageSpec, settings: BuildSettings, suffix: str = "render") -> dict[str, Any]:
    """Everything a build needs, offline: ``dockerfile``, ``files`` (the context), ``configmap``, ``job``, ``image``.

    ``suffix`` ends the Job's name (a build uses a random one, so a rebuild never collides with a kept Job).
    """
    import copy
    from importlib.metadata import version

    if isinstance(spec.base_image, ImageSpec):
        # As ImageBuildEngine.build does before calling a builder (which builds the base first).
        spec = copy.deepcopy(spec)
        spec.base_image = spec.base_image.image_name()
    files = context_files(spec)
    recipe = recipe_from_image_spec(spec, has_files=bool(files), flytekit_version=version("flytekit"))
    dockerfile = render_dockerfile(recipe)
    context = {"Dockerfile": dockerfile.encode(), **files}
    if spec.requirements:
        context[CONTEXT_REQUIREMENTS] = Path(spec.requirements).read_bytes()
    image = spec.image_name()
    name = build_name(image, suffix)
    archive = context_archive(context)
    return {
        "image": image,
        "dockerfile": dockerfile,
        "files": sorted(context),
        "configmap": context_configmap(name, settings, archive),
        "job": build_job(name, settings, image, spec.platform or "linux/amd64"),
    }


def _secho(message: str) -> None:
    import click

    click.secho(message, fg="blue")  # as flytekit's own "Image ... not found. building..." lines


class KanikoImageBuilder(ImageSpecBuilder):  # type: ignore[misc]
    """Builds an ImageSpec in the cluster with a kaniko Job (``ImageSpec(..., builder="kaniko")``).

    Settings come from ``BuildSettings.from_env(os.environ)`` at each build unless given; ``report`` prints
    progress (flytekit's blue lines by default); ``client`` is a kubernetes ``ApiClient`` (default: from the
    settings' kubeconfig).
    """

    def __init__(
        self,
        settings: Optional[BuildSettings] = None,
        report: Optional[Callable[[str], None]] = None,
        client: Optional[Any] = None,
    ) -> None:
        self.settings = settings
        self.report = report or _secho
        self.client = client

    def _settings(self) -> BuildSettings:
        return self.settings if self.settings is not None else BuildSettings.from_env(os.environ)

    def should_build(self, image_spec: ImageSpec) -> bool:
        """Build unless the registry is known to hold the image; unknown (no docker, no access) builds too.

        flytekit's default assumes an image it cannot check exists; a cluster user often has no docker, so
        that would never build. kaniko pushes the same tag again, which is harmless.
        """
        if getattr(image_spec, "_is_force_push", False):
            return True
        return image_spec.exist() is not True

    def build_image(self, image_spec: ImageSpec) -> Optional[str]:
        """Render, ship the context, run the Job, return the pushed image (``image_spec.image_name()``)."""
        from .run import run_build

        settings = self._settings()
        if not image_spec.registry:
            raise ValueError(f"ImageSpec.registry is required by the kaniko builder (ImageSpec {image_spec.name!r})")
        built = render(image_spec, settings, suffix=os.urandom(3).hex())
        return run_build(settings, built["configmap"], built["job"], built["image"], self.report, self.client)


def register(settings: Optional[Mapping[str, Any]] = None) -> None:
    """Register ``KanikoImageBuilder`` with flytekit's ImageBuildEngine as ``kaniko``.

    Priority 0: an ImageSpec without ``builder=`` keeps flytekit's default builder."""
    from flytekit.image_spec.image_spec import ImageBuildEngine

    built = BuildSettings.from_mapping(settings) if settings is not None else None
    ImageBuildEngine.register(BUILDER_TYPE, KanikoImageBuilder(built), priority=0)
