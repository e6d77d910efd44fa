"""The CRD schemas an object is checked against, read at run time (never shipped with the package).

Two sources:

- a directory (``SchemaSet.from_dir``) holding bare ``openAPIV3Schema`` JSON files named
  ``<group>_<plural>[_<version>].json`` (``kubeflow.org_pytorchjobs.json``, ``kubeflow.org_mpijobs_v2beta1.json``)
  and/or whole ``CustomResourceDefinition`` manifests (YAML, multi-document allowed, or JSON);
- CRD objects as listed from a cluster (``SchemaSet.from_crds``): every served version is kept and the
  object's ``apiVersion`` picks one.

Validators are compiled once per (group, version, kind) and cached on the set.

>>> s = SchemaSet.from_crds([{"kind": "CustomResourceDefinition", "spec": {"group": "ray.io",
...     "names": {"kind": "RayJob"}, "versions": [{"name": "v1", "served": True,
...     "schema": {"openAPIV3Schema": {"type": "object"}}}]}}])
>>> s.keys()
[('ray.io', 'v1', 'RayJob')]
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Optional, Union

from ..wire.kinds import KINDS
from .structural import compile_validator

__all__ = ["SchemaSet", "SchemaKey", "KNOWN_PLURALS", "crds_in_file"]

SchemaKey = tuple[str, str, str]  # (group, version, kind)

#: Plural -> (kind, version of a bare schema file without a version suffix).
KNOWN_PLURALS: dict[str, tuple[str, str]] = {
    **{k.plural: (k.kind, k.version) for k in KINDS.values()},
    "rayclusters": ("RayCluster", "v1"),  # validated offline; the backend never builds one
}


def _load_yaml_documents(path: Path) -> list[Any]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader reads a 1.4 MB CRD ~10x faster
    with path.open("rb") as f:
        return [doc for doc in yaml.load_all(f, Loader=loader) if doc is not None]


def _as_plain_dict(crd: Any) -> Any:
    """A kubernetes client model (``V1CustomResourceDefinition``) -> its JSON dict; dicts unchanged."""
    if isinstance(crd, Mapping) or not hasattr(crd, "openapi_types"):
        return crd
    from kubernetes.client import ApiClient

    sanitize: Any = ApiClient().sanitize_for_serialization  # camelCase JSON keys, as the API server lists them
    return sanitize(crd)


def _crds_in(document: Any) -> list[Mapping[str, Any]]:
    """The CRDs in one parsed document: a CRD, a ``List``/``CustomResourceDefinitionList``, or none."""
    if not isinstance(document, Mapping):
        return []
    if document.get("kind") == "CustomResourceDefinition":
        return [document]
    if isinstance(document.get("items"), list):
        return [d for d in document["items"] if isinstance(d, Mapping) and d.get("kind") == "CustomResourceDefinition"]
    return []


def crds_in_file(file: Path) -> list[Mapping[str, Any]]:
    """The CustomResourceDefinitions in a YAML (multi-document) or JSON file; none in other files.

    Raises ``ValueError`` naming the file when it cannot be parsed.
    """
    if file.suffix not in (".json", ".yaml", ".yml") or not file.is_file():
        return []
    try:
        docs = [json.loads(file.read_text())] if file.suffix == ".json" else _load_yaml_documents(file)
    except Exception as e:  # JSONDecodeError, yaml.YAMLError, UnicodeDecodeError
        raise ValueError(f"cannot read CRD schema file {str(file)!r}: {e}") from e
    return [crd for doc in docs for crd in _crds_in(doc)]


@functools.lru_cache(maxsize=64)
def _crds_in_unchanged_file(path: str, mtime_ns: int, size: int) -> tuple[Mapping[str, Any], ...]:
    """``crds_in_file`` once per file version: building Python objects from a CRD's YAML costs about 0.3 s
    even with the C parser, and a CLI session or the test suite reads the same files many times. Shared
    read-only (``SchemaSet`` never modifies a schema)."""
    return tuple(crds_in_file(Path(path)))


class SchemaSet:
    """Structural schemas keyed by (group, version, kind), with a validator cache.

    Thread-safe for concurrent ``validator()`` calls (the connector validates from several threads).
    """

    def __init__(
        self, schemas: Mapping[SchemaKey, Mapping[str, Any]], sources: Optional[Mapping[SchemaKey, str]] = None
    ):
        self._schemas: dict[SchemaKey, Mapping[str, Any]] = dict(schemas)
        self._sources: dict[SchemaKey, str] = dict(sources or {})
        self._validators: dict[SchemaKey, Any] = {}
        self._lock = threading.Lock()

    # -- construction ---------------------------------------------------------------------------------------

    @classmethod
    def from_crds(cls, crd_objects: Iterable[Any], source: str = "CustomResourceDefinitions") -> SchemaSet:
        """From ``CustomResourceDefinition`` dicts (or kubernetes client models): every served version."""
        schemas: dict[SchemaKey, Mapping[str, Any]] = {}
        sources: dict[SchemaKey, str] = {}
        for raw in crd_objects:
            crd = _as_plain_dict(raw)
            spec = crd.get("spec") if isinstance(crd, Mapping) else None
            if not isinstance(spec, Mapping):
                raise ValueError(f"not a CustomResourceDefinition (no spec): {str(raw)[:80]!r}")
            group, kind = spec.get("group"), (spec.get("names") or {}).get("kind")
            if not isinstance(group, str) or not isinstance(kind, str):
                raise ValueError(f"CustomResourceDefinition without spec.group / spec.names.kind: {str(raw)[:80]!r}")
            for version in spec.get("versions") or []:
                schema = (
                    ((version.get("schema") or {}).get("openAPIV3Schema")) if isinstance(version, Mapping) else None
                )
                if version.get("served", True) and isinstance(schema, Mapping):
                    key = (group, str(version["name"]), kind)
                    schemas[key] = schema
                    sources[key] = source
        return cls(schemas, sources)

    @classmethod
    def from_dir(cls, path: Union[str, Path]) -> SchemaSet:
        """From a directory of bare schema JSON files and/or CRD manifests; other files are ignored.

        Files are read in name order; a later file for the same (group, version, kind) replaces an earlier one.
        Raises ``ValueError`` when a file cannot be parsed or nothing usable is found.
        """
        directory = Path(path)
        if not directory.is_dir():
            raise ValueError(f"CRD schema directory {str(directory)!r} does not exist")
        schemas: dict[SchemaKey, Mapping[str, Any]] = {}
        sources: dict[SchemaKey, str] = {}
        for file in sorted(directory.iterdir()):
            stat = file.stat() if file.is_file() else None
            crds = _crds_in_unchanged_file(str(file.resolve()), stat.st_mtime_ns, stat.st_size) if stat else ()
            if crds:
                found = cls.from_crds(crds, source=str(file))
                schemas.update(found._schemas)
                sources.update(found._sources)
            elif file.suffix == ".json" and file.is_file():
                doc = json.loads(file.read_text())  # a bare openAPIV3Schema, the older format
                key = cls._bare_schema_key(file, doc)
                if key is not None:
                    schemas[key] = doc
                    sources[key] = str(file)
        if not schemas:
            raise ValueError(
                f"no CRD schemas found in {str(directory)!r} (expected <group>_<plural>.json schema files "
                "or CustomResourceDefinition manifests)"
            )
        return cls(schemas, sources)

    @staticmethod
    def _bare_schema_key(file: Path, doc: Any) -> Optional[SchemaKey]:
        if not (
            isinstance(doc, Mapping) and doc.get("type") == "object" and isinstance(doc.get("properties"), Mapping)
        ):
            return None
        parts = file.stem.split("_")
        if len(parts) not in (2, 3) or parts[1] not in KNOWN_PLURALS:
            return None
        kind, version = KNOWN_PLURALS[parts[1]]
        return (parts[0], parts[2] if len(parts) == 3 else version, kind)

    # -- lookup ---------------------------------------------------------------------------------------------

    def keys(self) -> list[SchemaKey]:
        """The (group, version, kind) triples held, sorted."""
        return sorted(self._schemas)

    def __contains__(self, key: object) -> bool:
        return key in self._schemas

    def __len__(self) -> int:
        return len(self._schemas)

    def __repr__(self) -> str:
        return f"SchemaSet({', '.join(f'{g}/{v} {k}' for g, v, k in self.keys())})"

    def schema(self, key: SchemaKey) -> Mapping[str, Any]:
        return self._schemas[key]

    def source(self, key: SchemaKey) -> str:
        return self._sources.get(key, "given schemas")

    def served_versions(self, group: str, kind: str) -> list[str]:
        return sorted(v for g, v, k in self._schemas if g == group and k == kind)

    def validator(self, key: SchemaKey) -> Any:
        """The compiled validator for ``key`` (built on first use, then cached)."""
        found = self._validators.get(key)
        if found is None:
            with self._lock:
                found = self._validators.get(key)
                if found is None:
                    found = self._validators[key] = compile_validator(self._schemas[key])
        return found
