"""Test support: a fake Kubernetes API server on loopback that plays the Training Operator and KubeRay.

Used by the project's tests and benchmarks; nothing in the plugins imports it.
"""

from .operator import OUTCOMES, Outcome
from .server import FakeApiServer, Fault
from .store import ObjectStore, Resource

__all__ = ["OUTCOMES", "FakeApiServer", "Fault", "ObjectStore", "Outcome", "Resource"]
