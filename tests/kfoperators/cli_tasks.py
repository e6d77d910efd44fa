"""A task file for `pyflyte run` (without --remote) in the tests."""

from __future__ import annotations

import json
import os

from flytekit import task
from flytekitplugins.kfoperators import PyTorch, Worker

__all__ = ["world"]


@task(task_config=PyTorch(worker=Worker(replicas=2)))
def world(tag: str) -> str:
    return json.dumps({"tag": tag, **{k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR")}})
