"""The one error type of object building.

``BuildError`` is a ``ValueError``: every malformed task (bad custom, unknown version, missing container)
surfaces as one, with a message that names the field, so the connector reports it as a permanent
user failure (Flyte's ``FailedToBuildResource``) instead of crashing.
"""

from __future__ import annotations

__all__ = ["BuildError"]


class BuildError(ValueError):
    """The task template cannot be turned into a Kubernetes object; the message says why."""
