"""Entry point of local-world child processes: ``python -m flytekitplugins.kfoperators.world_main``.

Kept apart from :mod:`.world_child`, which the package itself imports: ``python -m`` on an already-imported
module makes runpy warn that it may run twice.
"""

from __future__ import annotations

import sys

__all__: list[str] = []

if __name__ == "__main__":
    from .world_child import exit_now, main

    exit_now(main(sys.argv[1:]))
