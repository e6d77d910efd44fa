"""Module-level functions that tests wrap in @task (flytekit needs them in a real module file)."""

from __future__ import annotations

import json
import os

__all__ = ["train", "read_env", "CONTRACT_VARS"]

#: Every variable a world-of-one local run may set (PyTorch, TF and MPI contracts).
CONTRACT_VARS = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "PYTHONUNBUFFERED",
    "TF_CONFIG",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "OMPI_COMM_WORLD_NODE_RANK",
    "PMI_RANK",
    "PMI_SIZE",
)


def train(epochs: int) -> float:
    return float(epochs) / 2


def read_env(tag: str) -> str:
    """The contract variables the task saw, as JSON."""
    return json.dumps({name: os.environ[name] for name in CONTRACT_VARS if name in os.environ})
