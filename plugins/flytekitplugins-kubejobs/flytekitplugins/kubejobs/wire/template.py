"""The one ``{{ .var }}`` substitution of Flyte's templates (argument placeholders, log-link URIs).

Propeller and its ``tasklog`` package match ``{{ .name }}`` or ``{{ $name }}`` case-insensitively, with
Go's whitespace (space, tab, newline, form feed, carriage return) allowed inside the braces; a dotted
name (``taskConfig.port``, ``Inputs.n``) may use ``.`` or ``$`` between its parts. The replacement is
literal (a backslash in a value stays a backslash).

>>> substitute("--out {{ .outputPrefix }} {{$Input}}", [("outputPrefix", "s3://b"), ("input", "s3://b/i.pb")])
'--out s3://b s3://b/i.pb'
>>> substitute("{{ .podName }}", [("podName", "")], keep_empty=True)
'{{ .podName }}'
>>> placeholder_names("a {{.input}} b {{ $Inputs.n }} c {{ .taskConfig$port }}")
['input', 'Inputs.n', 'taskConfig.port']
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

__all__ = ["placeholder", "placeholder_names", "substitute"]

_WS = r"[ \t\n\f\r]*"
_ANY = re.compile(r"\{\{" + _WS + r"[.$]([A-Za-z_][A-Za-z0-9_]*(?:[.$][^}\s]+)?)" + _WS + r"\}\}")


@functools.lru_cache(maxsize=512)
def placeholder(name: str) -> re.Pattern[str]:
    """The pattern of ``{{ .<name> }}``."""
    body = "[.$]".join(re.escape(part) for part in name.split("."))
    return re.compile(r"\{\{" + _WS + r"[.$]" + body + _WS + r"\}\}", re.IGNORECASE)


def substitute(text: str, variables: Iterable[tuple[str, str]], *, keep_empty: bool = False) -> str:
    """``text`` with each ``(name, value)`` substituted in order. ``keep_empty`` leaves a placeholder
    whose value is empty as written (Go's log-link rule); otherwise it becomes empty (the argument rule)."""
    if "{{" not in text:
        return text
    for name, value in variables:
        if value or not keep_empty:
            text = placeholder(name).sub(value.replace("\\", "\\\\"), text)
    return text


def placeholder_names(text: str) -> list[str]:
    """The names of the placeholders in ``text``, in order, as written (parts joined by ``.``)."""
    return [re.sub(r"[.$]", ".", name, count=1) for name in _ANY.findall(text)]
