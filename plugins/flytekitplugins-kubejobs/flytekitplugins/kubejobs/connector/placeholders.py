"""Flyte's argument placeholders a connector still finds in a task: ``{{.input}}``, ``{{.outputPrefix}}``...

FlytePropeller's connector plugin renders the ``container`` target's args before the CreateTask call,
but a ``k8s_pod`` target (a task with a pod template) arrives as written. The connector then fills
what is left, from what the call carries (flytekit's connector convention, ``render_task_template``):

- ``{{.input}}``: ``<output_prefix>/inputs.pb``, written by the connector from the call's inputs;
- ``{{.inputPrefix}}`` and ``{{.outputPrefix}}``: ``<output_prefix>``;
- ``{{.rawOutputDataPrefix}}``: ``<output_prefix>/raw_output``;
- ``{{.checkpointOutputPrefix}}``: ``<output_prefix>/checkpoint_output``;
- ``{{.prevCheckpointPrefix}}``: ``""`` (propeller's "no previous checkpoint", which flytekit reads as none);
- ``{{.perRetryUniqueKey}}``: the object name (``<execution>-<node>-<attempt>``, unique per retry);
- ``{{.Inputs.<name>}}``: the input as propeller prints it (integer, float, string, boolean, datetime,
  blob URI, or a list of them as ``[a,b]``).

``{{.taskTemplatePath}}`` and inputs of other types are refused with a ``ValueError`` (they would reach
the cluster unrendered); placeholders Flyte does not define are left as written.

>>> sorted(found_placeholders(b'["--inputs", "{{ .Input }}", "--out", "{{$outputPrefix}}", "{{.Inputs.n}}"]'))
['Inputs.n', 'input', 'outputPrefix']
>>> values({"input", "outputPrefix"}, "s3://b/out/", None, "job-n0-0")
{'input': 's3://b/out/inputs.pb', 'outputPrefix': 's3://b/out'}
"""

from __future__ import annotations

import asyncio
import io
import math
from datetime import datetime, timezone
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Optional

from ..wire.template import placeholder_names

if TYPE_CHECKING:
    from flytekit.models.literals import LiteralMap

__all__ = ["INPUTS_FILE", "check_output_prefix", "found_placeholders", "values", "write_inputs"]

INPUTS_FILE = "inputs.pb"
#: Placeholder names as Flyte spells them; matching is case-insensitive, like propeller's.
_NAMES = (
    "input",
    "inputPrefix",
    "outputPrefix",
    "rawOutputDataPrefix",
    "checkpointOutputPrefix",
    "prevCheckpointPrefix",
    "perRetryUniqueKey",
    "taskTemplatePath",
)
_BY_LOWER = {n.lower(): n for n in _NAMES}


def found_placeholders(serialized: bytes) -> set[str]:
    """Flyte placeholders (canonical names, ``Inputs.<name>`` for inputs) in a serialized message.

    Protobuf keeps strings as UTF-8 on the wire, so the serialized TaskTemplate is searched as is.
    """
    if b"{{" not in serialized:  # the usual case: propeller rendered the container's args
        return set()
    out: set[str] = set()
    for word in placeholder_names(serialized.decode("utf-8", "replace")):
        if word.lower().startswith("inputs."):
            out.add("Inputs." + word.split(".", 1)[1])
        elif word.lower() in _BY_LOWER:
            out.add(_BY_LOWER[word.lower()])
    return out


def _go_float(value: float) -> str:
    """Go's ``fmt.Sprintf("%v", f)``: the shortest digits, in exponent form below 1e-4 or from 1e6 on."""
    if math.isnan(value) or math.isinf(value):
        return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    shortest = Decimal(repr(value)).normalize()  # repr: the shortest round-tripping digits, as Go's
    sign, digits, exponent = shortest.as_tuple()
    assert isinstance(exponent, int)
    exp10 = len(digits) + exponent - 1
    if -4 <= exp10 < 6:
        return format(shortest, "f")
    mantissa = str(digits[0]) + ("." + "".join(map(str, digits[1:])) if len(digits) > 1 else "")
    return f"{'-' if sign else ''}{mantissa}e{'+' if exp10 >= 0 else '-'}{abs(exp10):02d}"


def _literal_text(name: str, literal: Any) -> str:
    """A flyteidl Literal as propeller's template rendering prints it (``serializeLiteral``)."""
    kind = literal.WhichOneof("value")
    if kind == "collection":
        return "[" + ",".join(_literal_text(name, item) for item in literal.collection.literals) + "]"
    if kind == "scalar":
        kind = literal.scalar.WhichOneof("value")
        if kind == "blob":
            return str(literal.scalar.blob.uri)
        if kind == "primitive":
            p = literal.scalar.primitive
            kind = p.WhichOneof("value")
            if kind in ("integer", "string_value"):
                return str(getattr(p, kind))
            if kind == "boolean":
                return "true" if p.boolean else "false"
            if kind == "float_value":
                return _go_float(p.float_value)
            if kind == "datetime":  # Go's RFC 3339 with nanoseconds, trailing zeros dropped
                moment = datetime.fromtimestamp(p.datetime.seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
                fraction = f"{p.datetime.nanos:09d}".rstrip("0")
                return f"{moment}{'.' + fraction if fraction else ''}Z"
    raise ValueError(
        f"{{{{.Inputs.{name}}}}} cannot be rendered by the connector: propeller prints integers, floats, "
        f"strings, booleans, datetimes, blobs and lists of them (input {name!r} is a {kind})"
    )


def _input_value(name: str, inputs: Optional[LiteralMap]) -> str:
    literal = (inputs.literals if inputs is not None else {}).get(name)
    if literal is None:
        raise ValueError(f"the task's args use {{{{.Inputs.{name}}}}} but the task has no input named {name!r}")
    return _literal_text(name, literal.to_flyte_idl())


def values(found: set[str], output_prefix: str, inputs: Optional[LiteralMap], object_name: str) -> dict[str, str]:
    """``build_object``'s ``template_vars`` for the placeholders ``found`` (from ``found_placeholders``)."""
    prefix = output_prefix.rstrip("/")
    derived = {
        "input": f"{prefix}/{INPUTS_FILE}",
        "inputPrefix": prefix,
        "outputPrefix": prefix,
        "rawOutputDataPrefix": f"{prefix}/raw_output",
        "checkpointOutputPrefix": f"{prefix}/checkpoint_output",
        "prevCheckpointPrefix": '""',
        "perRetryUniqueKey": object_name,
    }
    out: dict[str, str] = {}
    for name in sorted(found):
        if name == "taskTemplatePath":
            raise ValueError(
                "{{.taskTemplatePath}} in a pod-template task cannot be rendered by the connector "
                "(propeller renders it for container targets only); use a container target"
            )
        out[name] = _input_value(name[len("Inputs.") :], inputs) if name.startswith("Inputs.") else derived[name]
    return out


def _normalized(prefix: str) -> str:
    path = prefix[len("file://") :] if prefix.startswith("file://") else prefix
    return path.rstrip("/")


def check_output_prefix(output_prefix: str, allowed: tuple[str, ...]) -> None:
    """Refuse to write under ``output_prefix`` unless it lies inside one of the ``allowed`` prefixes (the
    connector's ``input-prefixes`` setting): the connector writes with its own storage credentials, and the
    prefix comes from the caller. ``..`` segments are refused outright; ``file://`` is the same as a path."""
    where = _normalized(output_prefix)
    if not allowed:
        raise ValueError(
            f"the task needs its inputs written to {output_prefix!r}, but the connector has no input-prefixes "
            "setting naming where it may write (e.g. input-prefixes: [s3://my-flyte-bucket/metadata/])"
        )
    if ".." in where.split("/"):
        raise ValueError(f"output prefix {output_prefix!r} has a '..' segment")
    if not any(where == a or where.startswith(a + "/") for a in map(_normalized, allowed)):
        raise ValueError(f"output prefix {output_prefix!r} is outside the connector's input-prefixes {list(allowed)}")


async def write_inputs(output_prefix: str, inputs: Optional[LiteralMap], timeout: float) -> str:
    """Write the call's inputs (an empty map for none) to ``<output_prefix>/inputs.pb`` with flytekit's
    data persistence (the context's ``FileAccessProvider``: S3, GCS, Azure, local paths); returns the path."""
    from flytekit.core.context_manager import FlyteContextManager
    from flytekit.models.literals import LiteralMap

    payload = (inputs if inputs is not None else LiteralMap(literals={})).to_flyte_idl().SerializeToString()
    file_access = FlyteContextManager.current_context().file_access
    upload = file_access.async_put_raw_data(
        io.BytesIO(payload),
        upload_prefix=output_prefix.rstrip("/"),
        file_name=INPUTS_FILE,
        skip_raw_data_prefix=True,
    )
    path: Any = await asyncio.wait_for(upload, timeout)
    return str(path)
