"""Run the fake API server in its own process: ``python -m fakeapi [--crd-dir D]`` (from ``tests/``).

Prints the URL on the first line of stdout and serves until stdin closes (or ``--lifetime`` seconds,
default 600, have passed), so a parent that dies never leaves it running. Control: ``GET /fake/stats``,
``POST /fake/step``.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

from .server import FakeApiServer

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fakeapi")
    parser.add_argument("--crd-dir", type=Path, default=None)
    parser.add_argument("--lifetime", type=float, default=600.0)
    args = parser.parse_args(argv)
    done = threading.Event()

    def wait_stdin() -> None:
        sys.stdin.read()
        done.set()

    with FakeApiServer(crd_dir=args.crd_dir, max_watch_seconds=60) as server:
        print(server.url, flush=True)
        threading.Thread(target=wait_stdin, daemon=True).start()
        done.wait(args.lifetime)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
