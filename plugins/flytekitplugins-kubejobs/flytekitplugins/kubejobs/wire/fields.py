"""Checks for single config fields, shared by every config class.

Each check raises ``ValueError`` or ``TypeError`` whose message names the field and the
offending value, so a bad config fails where it is written, not on the cluster.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Mapping
from typing import Any, TypeVar

__all__ = [
    "INT32_MAX",
    "check_int",
    "check_optional_int",
    "check_bool",
    "check_optional_bool",
    "check_str",
    "check_optional_str",
    "check_str_map",
    "check_json_object",
    "coerce_enum",
]

INT32_MAX = 2**31 - 1

E = TypeVar("E", bound=enum.Enum)


def check_int(field: str, value: object, *, minimum: int = 0, maximum: int = INT32_MAX) -> int:
    """Return ``value`` if it is an int in ``[minimum, maximum]``; bools and floats are refused."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field} must be an int, got {value!r} ({type(value).__name__})")
    if value < minimum or value > maximum:
        raise ValueError(f"{field} must be between {minimum} and {maximum}, got {value!r}")
    return value


def check_optional_int(field: str, value: object, *, minimum: int = 0, maximum: int = INT32_MAX) -> int | None:
    return None if value is None else check_int(field, value, minimum=minimum, maximum=maximum)


def check_bool(field: str, value: object) -> bool:
    """Return ``value`` if it is a bool; ints (even 0 and 1) and strings are refused."""
    if not isinstance(value, bool):
        raise TypeError(f"{field} must be a bool, got {value!r} ({type(value).__name__})")
    return value


def check_optional_bool(field: str, value: object) -> bool | None:
    return None if value is None else check_bool(field, value)


def check_str(field: str, value: object, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a str, got {value!r} ({type(value).__name__})")
    if not allow_empty and not value:
        raise ValueError(f"{field} must not be empty, got {value!r}")
    return value


def check_optional_str(field: str, value: object) -> str | None:
    return None if value is None else check_str(field, value)


def check_str_map(field: str, value: object, *, convert_scalars: bool = False) -> dict[str, str]:
    """A ``{str: str}`` mapping. With ``convert_scalars``, int/float/bool values become strings
    (bools as ``"true"``/``"false"``, the spelling Kubernetes and Ray use)."""
    if not isinstance(value, Mapping):
        raise TypeError(f"{field} must be a dict of str to str, got {value!r}")
    out: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"{field} keys must be non-empty str, got {key!r}")
        if isinstance(item, str):
            out[key] = item
        elif convert_scalars and isinstance(item, bool):
            out[key] = "true" if item else "false"
        elif convert_scalars and isinstance(item, (int, float)) and math.isfinite(item):
            out[key] = str(item)
        else:
            raise TypeError(f"{field}[{key!r}] must be a str, got {item!r} ({type(item).__name__})")
    return out


def check_json_object(field: str, value: object) -> dict[str, Any]:
    """A dict that survives ``json.dumps`` unchanged in meaning (str keys, JSON values)."""
    if not isinstance(value, Mapping):
        raise TypeError(f"{field} must be a dict, got {value!r} ({type(value).__name__})")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{field} must be JSON-serializable, got {value!r}: {e}") from e
    return dict(value)


def coerce_enum(field: str, enum_type: type[E], value: object) -> E:
    """Accept an enum member, its name in any case, or its value; refuse anything else.

    The official plugins accept only members and fail later with an AttributeError.
    """
    if isinstance(value, enum_type):
        return value
    if isinstance(value, str):
        wanted = value.strip().upper()
        for member in enum_type:
            if member.name.upper() == wanted:
                return member
    elif isinstance(value, int) and not isinstance(value, bool):
        for member in enum_type:
            if member.value == value:
                return member
    names = ", ".join(m.name for m in enum_type)
    raise ValueError(f"{field} must be one of {names} (a {enum_type.__name__} or its name), got {value!r}")
