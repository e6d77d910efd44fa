"""Warnings for users, shown by default and attributed to the user's own line.

A ``DeprecationWarning`` is hidden outside ``__main__``, so ``pyflyte run`` never shows one:
:class:`KubejobsDeprecationWarning` is a ``FutureWarning`` (Python's category for deprecations meant for
end users). :func:`warn_user` points a warning at the first frame of the user's code, walking past
flytekit, these plugins, the standard library and installed packages (Python 3.11 has no
``skip_file_prefixes``), or at a given function's definition when no user frame is on the stack
(``pyflyte package`` serializes from flytekit's translator, never from user code).

>>> import warnings
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     warn_user("PyTorch.num_workers is deprecated", KubejobsDeprecationWarning)
>>> caught[0].category.__name__, issubclass(caught[0].category, FutureWarning)
('KubejobsDeprecationWarning', True)
"""

from __future__ import annotations

import os
import sys
import sysconfig
import warnings
from collections.abc import Callable
from typing import Any, Optional

__all__ = ["KubejobsDeprecationWarning", "ExtensionKeyWarning", "ComputeTemplateNameWarning", "warn_user"]


class KubejobsDeprecationWarning(FutureWarning):
    """A deprecated config field or spelling; the message names its replacement."""


class ExtensionKeyWarning(UserWarning):
    """Settings that travel under the ``kubejobs`` extension key, which stock Flyte backends ignore."""


class ComputeTemplateNameWarning(ExtensionKeyWarning):
    """A task names a compute template stored in the cluster: only this project's connector resolves it; a
    stock Flyte backend ignores the name and runs the role without the template."""


def _library_roots() -> tuple[str, ...]:
    import flytekit

    roots = {os.path.dirname(flytekit.__file__)}
    roots.update(str(p) for p in sys.modules["flytekitplugins"].__path__)
    paths = sysconfig.get_paths()
    roots.update(paths[name] for name in ("stdlib", "platstdlib", "purelib", "platlib", "scripts") if name in paths)
    return tuple(os.path.join(os.path.realpath(r), "") for r in roots)


_roots: Optional[tuple[str, ...]] = None


def _is_library(filename: str) -> bool:
    global _roots
    if filename.startswith("<"):  # <string> (dataclass __init__), <frozen importlib._bootstrap>
        return True
    if _roots is None:
        _roots = _library_roots()
    return os.path.realpath(filename).startswith(_roots)


def _user_stacklevel() -> Optional[int]:
    """``stacklevel`` for a ``warnings.warn`` in ``warn_user`` that names the first user frame, or None."""
    frame = sys._getframe(2)  # warn_user's caller
    level = 2
    while frame is not None:
        if not _is_library(frame.f_code.co_filename):
            return level
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return None


def warn_user(message: str, category: type[Warning], *, defined_at: Optional[Callable[..., Any]] = None) -> None:
    """Warn, attributed to the user's code: the first user frame on the stack, else the definition of
    ``defined_at`` (a task function), else the caller."""
    level = _user_stacklevel()
    if level is not None:
        warnings.warn(message, category, stacklevel=level)
        return
    code = getattr(defined_at, "__code__", None)
    if code is None:
        warnings.warn(message, category, stacklevel=2)
        return
    module_globals: dict[str, Any] = getattr(defined_at, "__globals__", {})
    warnings.warn_explicit(
        message,
        category,
        filename=code.co_filename,
        lineno=code.co_firstlineno,
        module=module_globals.get("__name__"),
        registry=module_globals.setdefault("__warningregistry__", {}),
    )
