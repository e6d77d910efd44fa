"""Runnable examples (a package, so `pyflyte run examples/demo.py` imports them as `examples.*` from the
repository root: local Ray workers and local-world processes import the same module by that name)."""
