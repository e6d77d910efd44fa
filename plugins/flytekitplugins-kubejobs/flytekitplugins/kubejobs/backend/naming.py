"""Deterministic object names derived from the task execution id.

The same execution id always gives the same name, so creating the object twice is idempotent (the
second create gets AlreadyExists). Names are DNS-1035 labels within the kind's length limit; a name
that had to be shortened or cleaned keeps a readable prefix and ends in a hash of the full id, so two
ids never share a name by truncation.

>>> object_name("f1a2b3c4d5e6-n0-0", 63)
'f1a2b3c4d5e6-n0-0'
>>> len(object_name("a" * 80, 47))
47
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

__all__ = ["execution_name_parts", "object_name"]

_INVALID = re.compile(r"[^a-z0-9-]+")
_HASH_LEN = 10


def execution_name_parts(task_execution_id: Any) -> str:
    """``<execution name>-<node id>-<retry attempt>``, the name Flyte's propeller generates before
    shortening. A leading empty part is skipped (as propeller does)."""
    node = task_execution_id.node_execution_id
    parts = [node.execution_id.name, node.node_id, str(task_execution_id.retry_attempt)]
    out = ""
    for part in parts:
        if out:
            out += "-"
        out += part
    return out


def object_name(raw: str, max_length: int) -> str:
    """A DNS-1035 label of at most ``max_length`` characters for ``raw``.

    A valid ``raw`` is kept as it is. Otherwise it is lower-cased, invalid characters become ``-``, and
    a ``-<hash>`` of the original ``raw`` is appended after truncating, so distinct inputs stay distinct.
    """
    if max_length < _HASH_LEN + 2:
        raise ValueError(f"max_length must be at least {_HASH_LEN + 2}, got {max_length}")
    if len(raw) <= max_length and re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", raw):
        return raw
    digest = hashlib.sha256(raw.encode("utf-8")).hexdigest()[:_HASH_LEN]
    clean = _INVALID.sub("-", raw.lower()).strip("-")
    if not clean or not clean[0].isalpha():
        clean = "f" + clean
    head = clean[: max_length - _HASH_LEN - 1].rstrip("-")
    return f"{head}-{digest}"
