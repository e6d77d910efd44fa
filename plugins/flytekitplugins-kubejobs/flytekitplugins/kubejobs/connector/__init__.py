"""Flyte connector for PyTorchJob, TFJob, MPIJob and RayJob: the only code that talks to Kubernetes.

Importing this package registers the connectors (task types ``pytorch``, ``tensorflow``, ``mpi`` at
task_type_version 0 and 1, ``ray`` at 0) in flytekit's ``ConnectorRegistry``. flytekit imports it at
``import flytekit`` through the ``flytekit.plugins`` entry point, so ``pyflyte serve connector`` serves
them with no ``--modules`` flag. The import is light (it only defines classes); the kubernetes client,
the backend and the configuration are loaded by the first create/get/delete.

>>> from flytekit.extend.backend.base_connector import ConnectorRegistry
>>> sorted({c.name for c in ConnectorRegistry.list_connectors()} & {CONNECTOR_NAME})
['Kubejobs Connector']
"""

from .connector import (
    CONNECTOR_NAME,
    EXECUTION_ANNOTATION,
    EXECUTION_LABEL,
    SUPPORTED,
    ForeignObjectError,
    KubeJobConnector,
    KubeJobMetadata,
    register_connectors,
)

__all__ = [
    "CONNECTOR_NAME",
    "EXECUTION_ANNOTATION",
    "EXECUTION_LABEL",
    "SUPPORTED",
    "ForeignObjectError",
    "KubeJobConnector",
    "KubeJobMetadata",
    "register_connectors",
]

register_connectors()
