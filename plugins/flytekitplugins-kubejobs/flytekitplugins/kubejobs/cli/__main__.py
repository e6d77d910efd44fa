"""``python -m flytekitplugins.kubejobs.cli``: the ``kubejobs`` console script."""

from __future__ import annotations

from . import main

__all__ = ["main"]

if __name__ == "__main__":  # pragma: no cover
    main()
