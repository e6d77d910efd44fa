"""Local distributed runs (issue 5): a 2-process PyTorch task and a 2-process Elastic task run locally with
``KUBEJOBS_LOCAL_WORLD=full`` against plain ``torchrun --standalone --nproc_per_node 2`` of the same training
function, each a fresh command timed end to end (interpreter start, imports, process start-up, training,
teardown), in interleaved rounds.
Target: the median of the per-round ratios ours / torchrun <= 1.3x.
"""

from __future__ import annotations

import os
import sys
import tempfile
import textwrap
from pathlib import Path

from _common import Row, interleaved, ratio_row, timed_run

__all__ = ["rows"]

STEPS = 300
REPEAT = 3
TARGET = 1.3

BODY = '''
def work(steps: int) -> float:
    """DDP on CPU over gloo: a small MLP, full-batch SGD for `steps` steps; returns the last loss."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo")
    try:
        torch.manual_seed(dist.get_rank())
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
        ddp = DistributedDataParallel(model)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
        x, y = torch.randn(512, 64), torch.randint(0, 10, (512,))
        for _ in range(steps):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(ddp(x), y)
            loss.backward()
            optimizer.step()
        return float(loss)
    finally:
        dist.destroy_process_group()
'''

PLAIN = f"""
from body import work
work({STEPS})
"""

FLYTE = """
from flytekit import task
from flytekitplugins.kfoperators import {config_import}
from body import work

train = task(task_config={config})(work)
if __name__ == "__main__":
    print(train(steps={steps}))
"""


def rows() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="bench-local-world-") as tmp:
        here = Path(tmp)
        (here / "body.py").write_text(textwrap.dedent(BODY))
        (here / "plain.py").write_text(PLAIN)
        (here / "ours_pytorch.py").write_text(
            FLYTE.format(config_import="PyTorch, Worker", config="PyTorch(worker=Worker(replicas=1))", steps=STEPS)
        )
        (here / "ours_elastic.py").write_text(
            FLYTE.format(config_import="Elastic", config="Elastic(nproc_per_node=2)", steps=STEPS)
        )
        base_env = {**os.environ, "PYTHONPATH": str(here)}
        ours_env = {**base_env, "KUBEJOBS_LOCAL_WORLD": "full"}
        torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "plain.py"]
        # Plain torchrun itself sometimes aborts at teardown (SIGABRT, "terminate called without an active
        # exception"): a failed run is retried, and a round where it never succeeds is reported, not fatal.
        samples, failures = interleaved(
            {
                "torchrun": lambda: timed_run(torchrun, here, base_env),
                "pytorch": lambda: timed_run([sys.executable, "ours_pytorch.py"], here, ours_env),
                "elastic": lambda: timed_run([sys.executable, "ours_elastic.py"], here, ours_env),
            },
            REPEAT,
        )
    return [
        ratio_row(
            f"local world: {label} vs torchrun --nproc_per_node 2",
            samples[name],
            samples["torchrun"],
            "s",
            TARGET,
            failures["torchrun"] + failures[name],
        )
        for name, label in (("pytorch", "PyTorch master+worker"), ("elastic", "Elastic nproc_per_node=2"))
    ]


if __name__ == "__main__":
    for row in rows():
        print(" | ".join(row.cells()))
