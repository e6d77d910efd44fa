"""What ``kubejobs validate`` reads: the job documents of a YAML/JSON file, and CRD schemas from a
directory or from the cluster of the current kubeconfig. PyYAML and the kubernetes client are imported
inside the functions.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from .errors import fail

if TYPE_CHECKING:
    from ..schema import SchemaSet

__all__ = ["cluster_schemas", "documents", "dump", "load_schemas"]


def load_schemas(crd_dir: Optional[str]) -> Optional[SchemaSet]:
    """The schemas of ``crd_dir``, or None without one."""
    if crd_dir is None:
        return None
    from ..schema import SchemaSet

    return SchemaSet.from_dir(crd_dir)


def dump(obj: Any, output: str) -> str:
    """``obj`` as ``yaml`` or ``json`` text."""
    if output == "json":
        return json.dumps(obj, indent=2) + "\n"
    import yaml

    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)


def documents(path: str) -> Iterator[tuple[str, Any]]:
    """``(label, document)`` for each document of a YAML/JSON file (``-``: stdin); ``List`` items expanded."""
    import yaml

    name = "<stdin>" if path == "-" else path
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as e:
        fail(f"cannot read {name}: {e.strerror or e}")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        docs = [d for d in yaml.load_all(text, Loader=loader) if d is not None]
    except yaml.YAMLError as e:
        fail(f"{name} is not valid YAML: {' '.join(str(e).split())}")
    for index, doc in enumerate(docs):
        label = name if len(docs) == 1 else f"{name}[{index}]"
        if (
            isinstance(doc, Mapping)
            and str(doc.get("kind", "")).endswith("List")
            and isinstance(doc.get("items"), list)
        ):
            for item_index, item in enumerate(doc["items"]):
                yield f"{label}.items[{item_index}]", item
        else:
            yield label, doc


def cluster_schemas(groups: set[str]) -> SchemaSet:
    """The served CRD schemas of ``groups``, listed from the cluster of the current kubeconfig (or in-cluster)."""
    from kubernetes import client

    from ..connector.kubeconfig import KubeconfigError, client_configuration

    try:
        api_client = client.ApiClient(client_configuration())
    except KubeconfigError as e:
        fail(f"--from-cluster: {e}")
    from ..schema import SchemaSet

    host = api_client.configuration.host
    try:
        api: Any = client.ApiextensionsV1Api(api_client)
        response = api.list_custom_resource_definition(_preload_content=False)
        # Raw JSON: the client's models would rebuild every schema node as an object (slow for 0.5 MB schemas).
        listed = json.loads(response.data)
    except client.ApiException as e:
        fail(f"--from-cluster: listing CustomResourceDefinitions at {host} failed: {e.status} {e.reason}")
    except Exception as e:  # connection refused, DNS, TLS...
        reason = getattr(e, "reason", None) or e
        fail(f"--from-cluster: cannot reach {host}: {reason}")
    finally:
        api_client.close()  # type: ignore[no-untyped-call]
    crds = [item for item in listed.get("items", []) if (item.get("spec") or {}).get("group") in groups]
    if not crds:
        fail(f"--from-cluster: the cluster has no CustomResourceDefinitions in {', '.join(sorted(groups))}")
    return SchemaSet.from_crds(crds, source="the cluster")
