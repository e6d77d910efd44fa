"""What validation reports: one ``Problem`` per bad field, all of them raised together as ``ObjectInvalid``.

Paths are written the way ``kubectl`` error messages write them: dotted keys, ``[i]`` list indices, and
keys that are not plain identifiers quoted in brackets.

>>> format_path(("spec", "pytorchReplicaSpecs", "Worker", "template", "spec", "containers", 0, "image"))
'spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].image'
>>> format_path(("metadata", "labels", "app.kubernetes.io/name"))
'metadata.labels["app.kubernetes.io/name"]'
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Union

__all__ = ["PathPart", "Problem", "ObjectInvalid", "format_path", "describe_value"]

PathPart = Union[str, int]

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def format_path(parts: Sequence[PathPart]) -> str:
    """``kubectl``-style rendering of a path into an object; ``<root>`` for the object itself."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part)}]"
    return out or "<root>"


def describe_value(value: object, limit: int = 60) -> str:
    """A short JSON rendering of ``value`` with its JSON type, for messages (``string "two"``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        kind = "boolean"
    elif isinstance(value, int):
        kind = "integer"
    elif isinstance(value, float):
        kind = "number"
    elif isinstance(value, str):
        kind = "string"
    elif isinstance(value, (list, tuple)):
        kind = "list"
    elif isinstance(value, dict):
        kind = "object"
    else:
        return f"{type(value).__name__} {value!r}"[:limit]
    try:
        text = json.dumps(value, sort_keys=True, default=repr)
    except ValueError:  # circular structures
        text = repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{kind} {text}"


@dataclass(frozen=True)
class Problem:
    """One invalid field: where it is and what is wrong with it."""

    path: tuple[PathPart, ...]
    message: str

    @property
    def where(self) -> str:
        return format_path(self.path)

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


class ObjectInvalid(ValueError):
    """The object would be rejected (or silently changed) by the API server or the operator.

    ``problems`` lists every problem found, each with the path of its field.

    >>> err = ObjectInvalid("PyTorchJob 'train'", [Problem(("spec", "runPolicy"), "expected object")])
    >>> print(err)
    PyTorchJob 'train' is invalid (1 problem):
      spec.runPolicy: expected object
    >>> err.paths
    ['spec.runPolicy']
    """

    def __init__(self, subject: str, problems: Iterable[Problem]) -> None:
        self.subject = subject
        self.problems: tuple[Problem, ...] = tuple(problems)
        count = len(self.problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"{subject} is invalid ({count} problem{'s' if count != 1 else ''}):\n{lines}")

    @property
    def paths(self) -> list[str]:
        """The paths of the problems, in report order."""
        return [p.where for p in self.problems]
