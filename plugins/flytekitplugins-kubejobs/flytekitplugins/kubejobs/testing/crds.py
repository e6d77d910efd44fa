"""CustomResourceDefinition objects built around the official CRD schemas (served by the fake API server).

The schema files (``<group>_<plural>[_<version>].json``, each the ``openAPIV3Schema`` of one version) are
read from a directory given at run time; they are never copied into this repository.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .store import Resource

__all__ = ["KINDS", "crd_objects"]

#: Resources the fake server serves (the four job kinds the project builds, plus RayCluster for CRD listing).
KINDS: tuple[Resource, ...] = (
    Resource("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob"),
    Resource("kubeflow.org", "v1", "tfjobs", "TFJob"),
    Resource("kubeflow.org", "v1", "mpijobs", "MPIJob"),
    Resource("ray.io", "v1", "rayjobs", "RayJob"),
    Resource("ray.io", "v1", "rayclusters", "RayCluster"),
)


def crd_objects(crd_dir: Path) -> dict[str, dict[str, Any]]:
    """``{"<plural>.<group>": CRD object}`` for each kind whose schema file exists in ``crd_dir``."""
    out: dict[str, dict[str, Any]] = {}
    for res in KINDS:
        path = Path(crd_dir) / f"{res.group}_{res.plural}.json"
        if not path.exists():
            continue
        schema = json.loads(path.read_text())
        name = f"{res.plural}.{res.group}"
        out[name] = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": name, "resourceVersion": "1"},
            "spec": {
                "group": res.group,
                "scope": "Namespaced",
                "names": {
                    "kind": res.kind,
                    "listKind": f"{res.kind}List",
                    "plural": res.plural,
                    "singular": res.kind.lower(),
                },
                "versions": [
                    {
                        "name": res.version,
                        "served": True,
                        "storage": True,
                        "schema": {"openAPIV3Schema": schema},
                        "subresources": {"status": {}},
                    }
                ],
            },
        }
    return out
