"""Entry point of local-world child processes: ``python -m flytekitplugins.kfoperators.runtime.child_main``.

Kept apart from :mod:`.child`, which the launchers import: ``python -m`` on an already-imported
module makes runpy warn that it may run twice.
"""

from __future__ import annotations

import sys

__all__: list[str] = []

if __name__ == "__main__":
    from .child import exit_now, main

    exit_now(main(sys.argv[1:]))
