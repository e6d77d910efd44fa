"""The CustomResourceDefinition objects the fake API server serves, read from a directory of CRD files.

The directory holds the operators' whole CRD manifests (YAML or JSON, as they ship them), or bare
``openAPIV3Schema`` JSON files named ``<group>_<plural>.json`` that are wrapped in a CRD here; they are read
at run time and never copied into this repository.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from flytekitplugins.kubejobs.schema.schemaset import crds_in_file

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
    """``{"<plural>.<group>": CRD object}`` for each of ``KINDS`` whose CRD (serving its version) is in ``crd_dir``.

    Read once per directory: the objects are shared and must not be changed.
    """
    return _read_crd_objects(str(crd_dir))


@functools.cache
def _read_crd_objects(crd_dir: str) -> dict[str, dict[str, Any]]:
    wanted = {f"{res.plural}.{res.group}": res for res in KINDS}
    out: dict[str, dict[str, Any]] = {}
    for file in sorted(Path(crd_dir).iterdir()):
        for crd in crds_in_file(file):
            name = f"{crd['spec']['names']['plural']}.{crd['spec']['group']}"
            res = wanted.get(name)
            if res is not None and name not in out and any(v["name"] == res.version for v in crd["spec"]["versions"]):
                out[name] = {**crd, "metadata": {**crd.get("metadata", {}), "resourceVersion": "1"}}
    for name, res in wanted.items():
        bare = Path(crd_dir) / f"{res.group}_{res.plural}.json"
        if name not in out and bare.exists():
            out[name] = _wrap(res, json.loads(bare.read_text()))
    return out


def _wrap(res: Resource, schema: Any) -> dict[str, Any]:
    name = f"{res.plural}.{res.group}"
    return {
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
