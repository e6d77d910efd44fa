"""Shared core of the kubejobs plugins: policies, replica roles, resources and compute templates.

The backend (``flytekitplugins.kubejobs.backend``), the connector and the ``kubejobs`` CLI live in
sub-packages and are imported only when used.

>>> from flytekitplugins.kubejobs import ComputeTemplate, RunPolicy, CleanPodPolicy
>>> RunPolicy(clean_pod_policy=CleanPodPolicy.ALL).clean_pod_policy.k8s_name
'All'
"""

from .compute import ComputeTemplate
from .extension import EXTENSION_KEY
from .policies import CleanPodPolicy, RestartPolicy, RunPolicy, SchedulingPolicy
from .roles import ReplicaRole

__all__ = [
    "CleanPodPolicy",
    "ComputeTemplate",
    "EXTENSION_KEY",
    "ReplicaRole",
    "RestartPolicy",
    "RunPolicy",
    "SchedulingPolicy",
]
