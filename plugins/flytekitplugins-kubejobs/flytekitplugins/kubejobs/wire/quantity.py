"""Kubernetes resource quantities, parsed with the standard library by the API server's grammar.

``<sign>?<digits>[.<digits>]<suffix>`` with ASCII digits only, where the suffix is a binary SI one
(``Ki Mi Gi Ti Pi Ei``), a decimal SI one (``n u m k M G T P E`` or none) or a decimal exponent
(``e3``, ``E-2``): apimachinery's ``resource.ParseQuantity`` and the quantity pattern in every CRD
schema. The kubernetes Python client's ``parse_quantity`` is looser (it accepts ``NaN``, ``inf``,
``1_000``, non-ASCII digits and ``1K``), which would let a value through that the cluster refuses.

>>> parse_quantity("1.5Gi"), parse_quantity("250m"), parse_quantity("1e3")
(Decimal('1610612736.0'), Decimal('0.250'), Decimal('1E+3'))
>>> check_quantity("Worker.requests.cpu", 0.5)
'0.5'
>>> canonical_quantity("1000m"), canonical_quantity("1024Mi"), canonical_quantity("0.5"), canonical_quantity("1.5Ki")
('1', '1Gi', '500m', '1536')
>>> parse_quantity("2Gb", "Worker.limits.memory")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: Worker.limits.memory is not a Kubernetes quantity: '2Gb' (a number with ASCII digits and ...
"""

from __future__ import annotations

import decimal
import math
import re
from decimal import Decimal

__all__ = ["canonical_quantity", "check_quantity", "is_integer_resource", "parse_quantity"]

_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?",
    re.ASCII,
)
_GRAMMAR = "a number with ASCII digits and an optional suffix Ki Mi Gi Ti Pi Ei, m k M G T P E or e<n>: '2Gi', '500m'"
_BINARY = {"K": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def parse_quantity(value: object, field: str = "quantity") -> Decimal:
    """The amount ``value`` (a quantity string, an int or a finite Decimal) stands for.

    ``ValueError`` naming ``field`` for anything else; ``TypeError`` for a value of another type.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, Decimal)):
        raise TypeError(f"{field} must be a Kubernetes quantity string, got {value!r} ({type(value).__name__})")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"{field} must be a finite quantity, got {value!r}")
        return value
    match = _QUANTITY.fullmatch(value)
    if match is None:
        raise ValueError(f"{field} is not a Kubernetes quantity: {value!r} ({_GRAMMAR})")
    number, suffix = Decimal(match["number"]), match["suffix"] or ""
    if suffix.endswith("i"):
        return number * Decimal(1024 ** _BINARY[suffix[0]])
    exponent = int(suffix[1:]) if suffix[:1] in ("e", "E") else _DECIMAL.get(suffix, 0)
    try:
        return number.scaleb(exponent, decimal.Context(prec=max(decimal.getcontext().prec, len(match["number"]))))
    except decimal.DecimalException as e:  # an exponent beyond what a Decimal holds
        raise ValueError(f"{field} is out of range: {value!r}") from e


def is_integer_resource(name: str) -> bool:
    """Whether the API server wants whole amounts of resource ``name``: every extended resource
    (``nvidia.com/gpu``, ``example.com/fpga``: a ``/`` outside ``kubernetes.io``) cannot be split."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def check_quantity(field: str, value: object, *, integer: bool = False) -> str:
    """Return ``value`` as a non-negative Kubernetes quantity string, or raise naming ``field``.

    ints and finite floats become their decimal spelling (the kubernetes client models refuse numbers);
    strings are stripped of surrounding whitespace. ``integer`` (GPUs and other extended resources, see
    :func:`is_integer_resource`) refuses fractions such as ``"0.5"`` or ``"500m"``.
    """
    if isinstance(value, bool):
        raise TypeError(f"{field} must be a Kubernetes quantity (str, int or float), got {value!r}")
    if isinstance(value, int):
        text = str(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{field} must be a finite quantity, got {value!r}")
        text = format(Decimal(repr(value)).normalize(), "f")
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise TypeError(
            f"{field} must be a Kubernetes quantity (str, int or float), got {value!r} ({type(value).__name__})"
        )
    try:
        amount = parse_quantity(text, field)
    except ValueError:  # the value as given, not as stripped; one error, not a chain
        raise ValueError(f"{field} is not a Kubernetes quantity: {value!r} ({_GRAMMAR})") from None
    if amount < 0:
        raise ValueError(f"{field} must not be negative, got {value!r}")
    if integer and amount != amount.to_integral_value():
        raise ValueError(f"{field} must be a whole number (the resource cannot be split), got {value!r}")
    return text


_DECIMAL_SUFFIX = {exponent: suffix for suffix, exponent in _DECIMAL.items()}
_NANO = Decimal("1e-9")


def canonical_quantity(value: str, field: str = "quantity") -> str:
    """``value`` spelled as apimachinery's ``Quantity.String()`` writes it back (``1000m`` -> ``1``, ``1024Mi`` ->
    ``1Gi``, ``0.5`` -> ``500m``). A controller that updates an object through Go types rewrites every quantity so;
    where a CRD keeps a field immutable (``self == oldSelf`` compares the raw strings), only the canonical spelling
    survives such an update. Same amount, same format family (binary SI, decimal SI, decimal exponent)."""
    match = _QUANTITY.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"{field} is not a Kubernetes quantity: {value!r} ({_GRAMMAR})")
    suffix = match["suffix"] or ""
    amount = parse_quantity(value.strip(), field)
    # the API server rounds up to nano units
    amount = (amount / _NANO).to_integral_value(rounding=decimal.ROUND_CEILING) * _NANO
    if amount == 0:
        return "0"
    sign, amount = ("-" if amount < 0 else ""), abs(amount)
    if suffix.endswith("i") and amount >= 1024 and amount == amount.to_integral_value():
        mantissa, power = int(amount), 0
        while mantissa % 1024 == 0 and power < 6:
            mantissa, power = mantissa // 1024, power + 1
        return f"{sign}{mantissa}{'' if power == 0 else 'KMGTPE'[power - 1] + 'i'}"
    # decimal: an integer mantissa times 10**exponent, the exponent a multiple of 3 (binary falls back here)
    mantissa, exponent = int((amount / _NANO).to_integral_value()), -9
    while mantissa % 10 == 0:
        mantissa, exponent = mantissa // 10, exponent + 1
    while exponent % 3:
        mantissa, exponent = mantissa * 10, exponent - 1
    if suffix[:1] in ("e", "E"):
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    while exponent > 18:  # beyond E: a bigger mantissa
        mantissa, exponent = mantissa * 1000, exponent - 3
    return f"{sign}{mantissa}{_DECIMAL_SUFFIX.get(exponent, '')}"
