"""The public surface of each package, written out: a name added to or removed from an ``__all__`` fails here
until this list (and the docs) say so. Every name imports and is documented: a class or function by its own
docstring, a constant by a ``#:`` comment at its definition or by its name in the distribution's README.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SURFACE: dict[str, set[str]] = {
    "flytekitplugins.kubejobs": {
        "CleanPodPolicy",
        "ComputeTemplate",
        "EXTENSION_KEY",
        "KueueQueue",
        "ReplicaRole",
        "RestartPolicy",
        "RunPolicy",
        "SchedulingPolicy",
    },
    "flytekitplugins.kubejobs.backend": {
        "BackendConfig",
        "BuildError",
        "Phase",
        "PhaseInfo",
        "build_object",
        "object_name_for",
        "task_phase",
    },
    "flytekitplugins.kubejobs.connector": {
        "CONNECTOR_NAME",
        "EXECUTION_ANNOTATION",
        "EXECUTION_LABEL",
        "SUPPORTED",
        "ForeignObjectError",
        "KubeJobConnector",
        "KubeJobMetadata",
        "register_connectors",
    },
    "flytekitplugins.kubejobs.imagebuild": {
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
    },
    "flytekitplugins.kubejobs.schema": {
        "ObjectInvalid",
        "Problem",
        "SchemaSet",
        "SUPPORTED_KINDS",
        "format_path",
        "object_problems",
        "validate_object",
    },
    "flytekitplugins.kubejobs.wire": {
        "EXTENSION_KEY",
        "EXTENSION_VERSION",
        "KINDS",
        "JobKind",
        "StatusStyle",
        "check_quantity",
        "kind_of",
        "parse_quantity",
    },
    "flytekitplugins.kfoperators": {
        "PyTorch",
        "Elastic",
        "Master",
        "Worker",
        "TfJob",
        "PS",
        "Chief",
        "Evaluator",
        "MPIJob",
        "HorovodJob",
        "MPIOperatorOptions",
        "Launcher",
        "KueueQueue",
        "RunPolicy",
        "CleanPodPolicy",
        "RestartPolicy",
        "SchedulingPolicy",
        "ComputeTemplate",
        "PyTorchFunctionTask",
        "ElasticFunctionTask",
        "TensorflowFunctionTask",
        "MPIFunctionTask",
        "HorovodFunctionTask",
    },
    "flytekitplugins.raycluster": {
        "AutoscalerOptionsConfig",
        "ComputeTemplate",
        "DeletionRule",
        "DeletionStrategy",
        "HeadNodeConfig",
        "RayFunctionTask",
        "RayJobConfig",
        "SubmissionMode",
        "UpscalingMode",
        "WorkerNodeConfig",
    },
}

NAMES = [
    pytest.param(module, name, id=f"{module}.{name}") for module, names in SURFACE.items() for name in sorted(names)
]


def _distribution(module: str) -> Path:
    return REPO / "plugins" / f"flytekitplugins-{module.split('.')[1]}"


def _has_own_docstring(obj: object) -> bool:
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else getattr(obj, "__doc__", None)
    if not isinstance(doc, str) or not doc.strip():
        return False
    # A dataclass without a docstring gets its signature as __doc__ ("Worker(replicas: int = ...)").
    return not (inspect.isclass(obj) and doc.startswith(f"{obj.__name__}("))


def _commented_at_definition(package: str, name: str) -> bool:
    """A ``#:`` comment right above a top-level assignment of ``name`` in the package's own modules."""
    folder = Path(importlib.import_module(package).__file__ or "").parent
    for path in sorted(folder.rglob("*.py")):
        lines = path.read_text().splitlines()
        for node in ast.parse("\n".join(lines)).body:
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign):
                targets = [node.target]
            else:
                continue
            defines = any(isinstance(t, ast.Name) and t.id == name for t in targets)
            if defines and node.lineno >= 2 and lines[node.lineno - 2].lstrip().startswith("#:"):
                return True
    return False


@pytest.mark.parametrize("module", sorted(SURFACE))
def test_the_exported_names_are_the_listed_ones(module: str) -> None:
    exported = importlib.import_module(module).__all__
    assert len(exported) == len(set(exported)), f"{module}.__all__ names something twice"
    added, removed = set(exported) - SURFACE[module], SURFACE[module] - set(exported)
    assert not added and not removed, f"{module}: added {sorted(added)}, removed {sorted(removed)}"


@pytest.mark.parametrize(("module", "name"), NAMES)
def test_every_exported_name_imports_and_is_documented(module: str, name: str) -> None:
    obj = getattr(importlib.import_module(module), name)  # as `from module import name` does
    if inspect.isclass(obj) or inspect.isfunction(obj):
        assert _has_own_docstring(obj), f"{module}.{name} has no docstring"
        return
    readme = (_distribution(module) / "README.md").read_text()
    assert _commented_at_definition(module, name) or f"`{name}`" in readme, (
        f"{module}.{name} is documented neither by a #: comment at its definition nor in the README"
    )
