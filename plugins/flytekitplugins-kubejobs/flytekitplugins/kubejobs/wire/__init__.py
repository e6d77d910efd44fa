"""The wire core: what the SDK side and the server side of kubejobs must agree on, in the standard library only.

Nothing here imports flytekit, flyteidl, protobuf or kubernetes (a test checks it), so the backend, the
schema rules and the connector read it without loading the SDK:

- ``kinds``: THE table of job kinds (task type -> group/version/kind/plural, roles, pod names, status style...)
- ``extension``: the shape of the ``kubejobs`` extension key
- ``quantity``: Kubernetes resource quantities, by the API server's grammar
- ``fields``: single-field checks whose errors name the field and the value
- ``template``: the ``{{ .var }}`` substitution
"""

from .extension import EXTENSION_KEY, EXTENSION_VERSION
from .kinds import KINDS, JobKind, StatusStyle, kind_of
from .quantity import check_quantity, parse_quantity

__all__ = [
    "EXTENSION_KEY",
    "EXTENSION_VERSION",
    "KINDS",
    "JobKind",
    "StatusStyle",
    "check_quantity",
    "kind_of",
    "parse_quantity",
]
