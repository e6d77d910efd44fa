"""In-cluster image builds: the ImageSpec builder ``kaniko``.

Importing this package registers :class:`KanikoImageBuilder` with flytekit's ``ImageBuildEngine`` (flytekit
imports it at ``import flytekit`` through the ``flytekit.plugins`` entry point ``kubejobs-kaniko``); the
kubernetes client is imported by the first build only. ``dockerfile``, ``manifests`` and ``settings`` are
pure (an import-linter contract keeps flytekit and kubernetes out of them), ``run`` does the I/O.

>>> from flytekit.image_spec.image_spec import ImageBuildEngine
>>> type(ImageBuildEngine._get_builder("kaniko")).__name__
'KanikoImageBuilder'
"""

from .builder import BUILDER_TYPE, KanikoImageBuilder, register, render
from .dockerfile import Recipe, recipe_from_image_spec, render_dockerfile
from .manifests import MAX_CONTEXT_BYTES, ContextTooLarge, build_job, context_archive, context_configmap
from .run import ImageBuildFailed  # (run.py imports the client inside its functions)
from .settings import KANIKO_IMAGE, BuildSettings

__all__ = [
    "BUILDER_TYPE",
    "KANIKO_IMAGE",
    "MAX_CONTEXT_BYTES",
    "BuildSettings",
    "ContextTooLarge",
    "ImageBuildFailed",
    "KanikoImageBuilder",
    "Recipe",
    "build_job",
    "context_archive",
    "context_configmap",
    "recipe_from_image_spec",
    "register",
    "render",
    "render_dockerfile",
]


register()
