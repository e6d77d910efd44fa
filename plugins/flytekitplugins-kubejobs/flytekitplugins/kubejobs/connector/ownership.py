"""Which objects are the connector's own: the uid recorded at create, and a keyed owner label.

Every object the connector creates carries ``kubejobs.flyte.org/execution: k1-<HMAC-SHA256(key, execution
id)>`` (truncated to fit a label value). The execution id is public (it is in the object's annotations,
the Flyte UI and the pods' environment), so a plain hash of it, as versions before this one wrote, can be
recomputed by anyone who may create objects in the namespace; the HMAC cannot without the key. It decides
one thing: whether an object met by a create (409) was made by an earlier attempt of the same call and may
be adopted. Once created, an object is identified by its uid (kept in the ResourceMeta), which the API
server assigns and nobody can choose.

The key comes from ``ownership-key-file`` (a mounted Secret, shared by every replica and kept across
restarts). Without it each process draws a random key: adoption then works within one process only, and a
create retried after a restart meets its own object as a foreign one (``ForeignObjectError``), so that
attempt fails and propeller's next attempt (a new name) runs.

>>> owner = Ownership(b"0123456789abcdef0123456789abcdef")
>>> label = owner.label("proj/dev/exec/n0/0/task")
>>> label.startswith("k1-"), len(label) <= 63, owner.label("proj/dev/exec/n0/1/task") != label
(True, True, True)
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from pathlib import Path
from typing import Any, Optional

__all__ = ["MIN_KEY_BYTES", "Ownership", "legacy_label"]

log = logging.getLogger(__name__)
MIN_KEY_BYTES = 16
_PREFIX = "k1-"  # owner labels of this scheme; the plain hashes before it are 40 hex digits
_DIGITS = 56  # 224 bits of the HMAC: "k1-" and 56 hex digits stay under the label value limit of 63


def legacy_label(execution_id: str) -> str:
    """The label value versions before the keyed scheme wrote: a plain hash of the execution id."""
    return hashlib.sha256(execution_id.encode()).hexdigest()[:40]


class Ownership:
    """The owner label of an execution, and the checks made with it and with uids."""

    def __init__(self, key: bytes):
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(f"the ownership key must have at least {MIN_KEY_BYTES} bytes, got {len(key)}")
        self._key = key

    @classmethod
    def from_file(cls, path: Optional[str]) -> Ownership:
        """The key in ``path`` (surrounding whitespace stripped), or a random per-process key for None."""
        if path is None:
            log.warning(
                "connector.ownership-key-file is not set: using a random per-process key, so a create retried "
                "after a restart cannot adopt the object it created (that attempt fails; see the README)"
            )
            return cls(secrets.token_bytes(32))
        try:
            key = Path(path).read_bytes().strip()
        except OSError as err:
            raise ValueError(f"connector.ownership-key-file {path!r} cannot be read: {err.strerror}") from None
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(
                f"connector.ownership-key-file {path!r} holds {len(key)} bytes; the key needs at least "
                f"{MIN_KEY_BYTES} (e.g. `openssl rand -hex 32`)"
            )
        return cls(key)

    def label(self, execution_id: str) -> str:
        digest = hmac.new(self._key, execution_id.encode(), hashlib.sha256).hexdigest()
        return _PREFIX + digest[:_DIGITS]

    def created_by(self, obj: Any, execution_id: str, label_key: str) -> bool:
        """Whether ``obj`` carries the owner label of ``execution_id`` (an earlier attempt of this create)."""
        return hmac.compare_digest(_label_of(obj, label_key), self.label(execution_id))

    @staticmethod
    def is_recorded(obj: Any, uid: str, execution_id: str, label_key: str) -> bool:
        """Whether ``obj`` is the object a ResourceMeta names: the same uid; for a ResourceMeta written before
        uids were recorded (``uid`` empty), an object from before the keyed scheme carrying the plain hash of
        the ResourceMeta's execution id (objects created since carry a keyed label and never match)."""
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if not isinstance(meta, dict):
            return False
        if uid:
            return meta.get("uid") == uid
        return bool(execution_id) and _label_of(obj, label_key) == legacy_label(execution_id)


def _label_of(obj: Any, key: str) -> str:
    labels = (obj.get("metadata") or {}).get("labels") if isinstance(obj, dict) else None
    value = labels.get(key) if isinstance(labels, dict) else None
    return value if isinstance(value, str) else ""
