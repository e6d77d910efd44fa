"""Test support: a fake Kubernetes API server on loopback that plays the Training Operator and KubeRay.

Test-only code, in no published wheel: the tests import it as ``fakeapi`` (pytest puts ``tests/`` on
``sys.path``, ``pythonpath`` in setup.cfg), the benchmarks add ``tests/`` themselves. It imports the plugins'
schema layer (to validate created objects), never the other way round.
"""

from .operator import OUTCOMES, Outcome
from .server import FakeApiServer, Fault
from .store import ObjectStore, Resource

__all__ = ["OUTCOMES", "FakeApiServer", "Fault", "ObjectStore", "Outcome", "Resource"]
