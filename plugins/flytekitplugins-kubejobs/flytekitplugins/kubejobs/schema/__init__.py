"""Offline validation of PyTorchJob / TFJob / MPIJob / RayJob objects: the operators' CRD schemas (given at
run time, never shipped) in strict mode, plus the webhook and controller rules no schema encodes.

>>> from flytekitplugins.kubejobs.schema import validate_object, ObjectInvalid, SchemaSet
>>> head = {"template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray"}]}}}
>>> job = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "demo"},
...        "spec": {"entrypoint": "python main.py", "ttlSecondsAfterFinished": 60,
...                 "rayClusterSpec": {"headGroupSpec": head}}}
>>> try:
...     validate_object(job, None, warn_without_schemas=False)
... except ObjectInvalid as e:
...     print(e.paths)
['spec.ttlSecondsAfterFinished']
"""

from .problems import ObjectInvalid, Problem, format_path
from .schemaset import SchemaSet
from .validate import SUPPORTED_KINDS, object_problems, validate_object

__all__ = [
    "ObjectInvalid",
    "Problem",
    "SchemaSet",
    "SUPPORTED_KINDS",
    "format_path",
    "object_problems",
    "validate_object",
]
