"""The CLI's one error type: a failure reported as one line on stderr, exit status 1."""

from __future__ import annotations

from typing import NoReturn

__all__ = ["CliError", "fail", "one_line"]


class CliError(Exception):
    """A failure reported as one line, exit status 1."""


def fail(message: str) -> NoReturn:
    raise CliError(message)


def one_line(error: BaseException) -> str:
    """``error`` as one line; the type is shown unless it is one of the expected bad-input errors."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text if isinstance(error, (ValueError, TypeError, CliError)) else f"{type(error).__name__}: {text}"
