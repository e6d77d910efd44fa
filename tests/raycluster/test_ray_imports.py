"""Importing the plugin, building a config and serializing it stay light: no ray, kubernetes or jsonschema."""

from __future__ import annotations

import json
import subprocess
import sys

CODE = """
import json, sys
import flytekitplugins.raycluster as rc
after_import = sorted(m for m in ("ray", "kubernetes", "jsonschema") if m in sys.modules)
from flytekit import Resources
from flytekitplugins.raycluster.serialize import ray_job_custom
gpu = rc.ComputeTemplate(name="g", gpu=1)
cfg = rc.RayJobConfig(
    [rc.WorkerNodeConfig("gpu", 1, compute_template=gpu, requests=Resources(mem="1Gi"))],
    head_node_config=rc.HeadNodeConfig(requests=Resources(cpu=1)),
    runtime_env={"env_vars": {"A": "1"}},
)
ray_job_custom(cfg)
after_use = sorted(m for m in ("ray", "kubernetes", "jsonschema") if m in sys.modules)
print(json.dumps([after_import, after_use]))
"""


def test_no_heavy_imports_in_a_fresh_interpreter() -> None:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [[], []]
