"""Where a task's code imports from, for local runs that start fresh interpreters (Ray workers, world processes).

``pyflyte run file.py`` imports ``file`` with its directory on ``sys.path`` only while loading it, so a
child interpreter needs the module's root given explicitly (a pod imports it from the code root the same way).

>>> import json.decoder
>>> from pathlib import Path
>>> Path(code_root(json.decoder.JSONDecoder)) == Path(json.__file__).parents[1]
True
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

__all__ = ["code_root"]


def code_root(obj: object) -> Optional[str]:
    """The directory from which the module defining ``obj`` imports by its name (the directory above its top
    package, or its own directory for a plain module); None for ``__main__`` and for modules without a file."""
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    path = getattr(module, "__file__", None)
    if module is None or path is None or module.__name__ == "__main__":
        return None
    levels_up = module.__name__.count(".") + (1 if Path(path).name == "__init__.py" else 0)
    return str(Path(os.path.abspath(path)).parents[levels_up])
