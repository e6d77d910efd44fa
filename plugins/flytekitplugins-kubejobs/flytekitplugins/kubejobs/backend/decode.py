"""Decoding a task's ``custom`` into its flyteidl message, as Flyte's backend does (jsonpb with unknown
fields allowed: lowerCamel or proto names, enum names or numbers, missing fields as proto3 zeros),
with every shape error reported as a ``BuildError`` naming the field path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message

from ..wire.extension import EXTENSION_KEY
from .errors import BuildError

__all__ = ["custom_dict", "decode_custom", "struct_dict", "whole_numbers"]

M = TypeVar("M", bound=Message)
_WELL_KNOWN = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}


def whole_numbers(value: Any) -> Any:
    """``value`` with whole floats as ints: a protobuf Struct stores every number as a double, and
    Kubernetes refuses ``1.0`` where it wants an integer."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [whole_numbers(v) for v in value]
    return value


def custom_dict(template: Any) -> dict[str, Any]:
    """The template's custom as a dict; an absent custom is an error (Flyte: ``nil Struct Object passed``)."""
    if not template.HasField("custom"):
        raise BuildError(
            f"invalid TaskSpecification: the {template.type!r} task has no custom (nil Struct Object passed)"
        )
    return struct_dict(template.custom, "custom")


def struct_dict(struct: Any, what: str) -> dict[str, Any]:
    """A protobuf Struct as a dict with whole numbers as ints; NaN/infinity (not JSON) are a BuildError."""
    try:
        out: dict[str, Any] = whole_numbers(json_format.MessageToDict(struct))
    except (ValueError, RecursionError) as e:
        raise BuildError(f"invalid TaskSpecification: {what} is not valid JSON: {e}") from e
    return out


def _check_shape(value: object, descriptor: Descriptor, path: str) -> None:
    # json_format silently ignores e.g. a string where a message is expected when unknown fields are
    # allowed; Flyte's jsonpb refuses it. Check message/list shapes so such input fails loudly.
    if not isinstance(value, Mapping):
        raise BuildError(f"{path} must be an object, got {value!r}")
    fields = {**descriptor.fields_by_name, **{f.json_name: f for f in descriptor.fields}}
    for key, item in value.items():
        field = fields.get(key)
        if field is None or item is None:
            continue
        where = f"{path}.{key}"
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            if not isinstance(item, Mapping):
                raise BuildError(f"{where} must be an object, got {item!r}")
            continue
        if field.is_repeated:
            if not isinstance(item, list):
                raise BuildError(f"{where} must be a list, got {item!r}")
            items = item
        else:
            items = [item]
        if field.message_type is not None and field.message_type.full_name not in _WELL_KNOWN:
            for i, sub in enumerate(items):
                _check_shape(sub, field.message_type, f"{where}[{i}]" if field.is_repeated else where)


def decode_custom(custom: Mapping[str, Any], message: M, what: str) -> M:
    """Parse ``custom`` (minus the extension key) into ``message``."""
    body = {k: v for k, v in custom.items() if k != EXTENSION_KEY}
    _check_shape(body, message.DESCRIPTOR, what)
    try:
        json_format.ParseDict(body, message, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as e:
        raise BuildError(f"[BadTaskSpecification] invalid TaskSpecification for {what}: {e}") from e
    return message
