"""JSON-Schema validation of an object against a CRD's structural schema, the way the API server reads it.

The CRD schemas are OpenAPI v3 with Kubernetes extensions that a plain JSON-Schema validator ignores. A
Draft 4 validator (OpenAPI 3.0 uses boolean ``exclusiveMinimum``) is extended with keywords for them, so the
schema is used as loaded (no converted copy of a 0.6 MB document):

- closed objects: a node with ``properties`` and neither ``additionalProperties`` nor
  ``x-kubernetes-preserve-unknown-fields`` rejects other keys (the API server would prune them silently);
- ``format: int32`` / ``int64`` ranges;
- ``x-kubernetes-list-type: map`` key uniqueness (keys defaulted from the item schema, e.g. port protocol TCP)
  and ``set`` item uniqueness;
- a bare ``x-kubernetes-int-or-string``, ``x-kubernetes-embedded-resource`` and ``nullable``;
- ``required`` fields that carry a ``default`` count as present (the API server defaults before validating).

CEL rules (``x-kubernetes-validations``) are not evaluated; the ones that matter are in the rule modules.
jsonschema is imported only when a validator is first built.
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Iterator, Mapping
from typing import Any

from .problems import PathPart, Problem, describe_value

__all__ = ["compile_validator", "schema_problems", "INT_RANGES"]

INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}

_EMBEDDED_KEYS = frozenset({"apiVersion", "kind", "metadata"})
_QUANTITY_PATTERN_START = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
# Keywords whose messages this module writes itself.
_OWN_MESSAGES = frozenset(
    {
        "properties",
        "additionalProperties",
        "required",
        "type",
        "format",
        "x-kubernetes-list-type",
        "x-kubernetes-int-or-string",
    }
)


def _unknown_fields(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> Iterator[Any]:
    from jsonschema import ValidationError

    known = schema.get("properties") or {}
    for key in instance:
        if key in known or (schema.get("x-kubernetes-embedded-resource") and key in _EMBEDDED_KEYS):
            continue
        close = difflib.get_close_matches(str(key), list(known), n=1, cutoff=0.75)
        hint = f' (did you mean "{close[0]}"?)' if close else ""
        yield ValidationError(f"unknown field{hint}: the API server would drop it silently", path=[key])


@functools.cache
def _validator_class() -> Any:
    from jsonschema import Draft4Validator, ValidationError, validators

    base = Draft4Validator.VALIDATORS

    def properties(v: Any, props: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[Any]:
        yield from base["properties"](v, props, instance, schema)
        if (
            isinstance(instance, dict)
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            yield from _unknown_fields(instance, schema)

    def additional_properties(v: Any, value: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[Any]:
        if value is False and isinstance(instance, dict):
            yield from _unknown_fields(instance, schema)
        else:
            yield from base["additionalProperties"](v, value, instance, schema)

    def required(v: Any, names: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[Any]:
        if not isinstance(instance, dict):
            return
        props = schema.get("properties") or {}
        for name in names:
            if name not in instance and "default" not in (props.get(name) or {}):
                yield ValidationError("required field is missing", path=[name])

    def type_(v: Any, types: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[Any]:
        if instance is None:
            if not schema.get("nullable"):
                yield ValidationError("null is not allowed here (the API server drops null fields): omit the field")
            return
        wanted = types if isinstance(types, list) else [types]
        if not any(v.is_type(instance, t) for t in wanted):
            yield ValidationError(f"expected {' or '.join(wanted)}, got {describe_value(instance)}")

    def format_(v: Any, fmt: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[Any]:
        bounds = INT_RANGES.get(fmt)
        if bounds and isinstance(instance, int) and not isinstance(instance, bool):
            low, high = bounds
            if not low <= instance <= high:
                yield ValidationError(f"{instance} is out of the {fmt} range [{low}, {high}]")

    def int_or_string(v: Any, flag: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[Any]:
        if (
            flag
            and "anyOf" not in schema
            and not (isinstance(instance, str) or (isinstance(instance, int) and not isinstance(instance, bool)))
        ):
            yield ValidationError(f"expected an integer or a string, got {describe_value(instance)}")

    def list_type(v: Any, kind: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[Any]:
        if not isinstance(instance, list):
            return
        if kind == "map":
            yield from _duplicate_map_keys(instance, schema)
        elif kind == "set":
            seen: dict[str, int] = {}
            for index, item in enumerate(instance):
                key = json.dumps(item, sort_keys=True, default=repr)
                if key in seen:
                    yield ValidationError(
                        f"duplicate item {describe_value(item)} (also at [{seen[key]}])", path=[index]
                    )
                else:
                    seen[key] = index

    return validators.extend(
        Draft4Validator,
        {
            "properties": properties,
            "additionalProperties": additional_properties,
            "required": required,
            "type": type_,
            "format": format_,
            "x-kubernetes-int-or-string": int_or_string,
            "x-kubernetes-list-type": list_type,
        },
    )


def _duplicate_map_keys(items: list[Any], schema: Mapping[str, Any]) -> Iterator[Any]:
    from jsonschema import ValidationError

    keys = list(schema.get("x-kubernetes-list-map-keys") or [])
    if not keys:
        return
    item_props = (schema.get("items") or {}).get("properties") or {}
    defaults = {k: (item_props.get(k) or {}).get("default") for k in keys}
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        values = [item.get(k, defaults[k]) for k in keys]
        marker = json.dumps(values, default=repr)
        if marker not in seen:
            seen[marker] = index
            continue
        if len(keys) == 1:
            yield ValidationError(
                f"duplicate {keys[0]} {json.dumps(values[0])} (also at [{seen[marker]}]): "
                f"entries of this list are keyed by {keys[0]}",
                path=[index, keys[0]],
            )
        else:
            shown = ", ".join(f"{k}={json.dumps(x)}" for k, x in zip(keys, values, strict=True))
            yield ValidationError(
                f"duplicate key ({shown}) (also at [{seen[marker]}]): entries of this list are keyed by "
                f"{' + '.join(keys)}",
                path=[index],
            )


def compile_validator(schema: Mapping[str, Any]) -> Any:
    """A validator for one CRD version's ``openAPIV3Schema`` (cheap: jsonschema resolves lazily)."""
    # apiVersion, kind and metadata are always allowed at the root, declared or not (a shallow copy).
    return _validator_class()({**schema, "x-kubernetes-embedded-resource": True})


def _message(error: Any) -> str:
    validator = error.validator
    if validator in _OWN_MESSAGES:
        return str(error.message)
    instance, schema, value = error.instance, error.schema, error.validator_value
    if validator == "enum":
        return f"must be one of {', '.join(json.dumps(x) for x in value)}; got {describe_value(instance)}"
    if validator == "anyOf" and schema.get("x-kubernetes-int-or-string"):
        hint = ' (write fractional quantities as strings, e.g. "500m" or "0.5")' if isinstance(instance, float) else ""
        return f"expected an integer or a string, got {describe_value(instance)}{hint}"
    if validator == "pattern":
        if str(value).startswith(_QUANTITY_PATTERN_START):
            return f'{describe_value(instance)} is not a Kubernetes quantity (write e.g. "500m", "2", "4Gi")'
        return f"{describe_value(instance)} does not match the pattern {value}"
    if validator in ("minimum", "maximum"):
        exclusive = schema.get(f"exclusive{validator.capitalize()}") is True
        op = (">" if validator == "minimum" else "<") + ("" if exclusive else "=")
        return f"must be {op} {value}, got {describe_value(instance)}"
    return str(error.message)


def schema_problems(validator: Any, obj: Mapping[str, Any]) -> list[Problem]:
    """Every schema violation of ``obj``, in a stable order, as ``Problem`` s."""
    out: list[Problem] = []
    for error in validator.iter_errors(obj):
        path: tuple[PathPart, ...] = tuple(error.absolute_path)
        out.append(Problem(path, _message(error)))
    return out
