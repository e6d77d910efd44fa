"""THE table of deliberate differences: official tests (flytekit's own suites of the official plugins,
run against ours by test_official_suites.py) that pass with the official plugins and fail with ours by
design. Each entry names the README whose "Differences from the official plugins" section documents it
(``documented_by`` must appear there) and is listed, generated from this table, in that README's block
between the ``official-suite-differences`` markers (a test checks both)."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Difference", "DELIBERATE", "README_BLOCK_BEGIN", "README_BLOCK_END", "readme_block"]


class Difference(NamedTuple):
    reason: str
    readme: str  # "kfoperators" or "raycluster"
    documented_by: str  # text of the README's Differences section that documents it


_EMPTY_RESOURCES = Difference(
    "expects the empty `resources: {}` the official plugins write for every role",
    "kfoperators",
    "Empty `resources: {}` entries and empty TFJob roles are not written",
)
_EMPTY_TF_ROLES = Difference(
    'expects `resources: {}` and the empty chief/ps/evaluator roles (`{"resources": {}}`)',
    "kfoperators",
    "Empty `resources: {}` entries and empty TFJob roles are not written",
)
_MPI_BASE_COMMAND = Difference(
    "reads the private `MPIFunctionTask._MPI_BASE_COMMAND`, then expects `resources: {}`",
    "kfoperators",
    "Private attributes of the official task classes",
)
_RAY_GROUP_NAME = Difference(
    "the module's config names a worker group `test_group`, refused at import (not a DNS-1123 label)",
    "raycluster",
    "| group names, duplicates, negative counts |",
)

DELIBERATE: dict[str, Difference] = {
    "test_pytorch_task.py::test_pytorch_task": _EMPTY_RESOURCES,
    "test_pytorch_task.py::test_pytorch_task_with_default_config": _EMPTY_RESOURCES,
    "test_pytorch_task.py::test_pytorch_task_with_custom_config": _EMPTY_RESOURCES,
    "test_elastic_task.py::test_rdzv_configs[spawn]": Difference(
        "compares the user's `rdzv_configs` with the dict torch's `LaunchConfig` received and changed (it adds"
        " `timeout`); ours hands torch a copy, so the user's dict is left alone",
        "kfoperators",
        "`Elastic.rdzv_configs` is copied",
    ),
    "test_tensorflow_task.py::test_tensorflow_task": _EMPTY_TF_ROLES,
    "test_tensorflow_task.py::test_tensorflow_task_with_default_config": _EMPTY_TF_ROLES,
    "test_tensorflow_task.py::test_tensorflow_task_with_custom_config": _EMPTY_RESOURCES,
    "test_tensorflow_task.py::test_tensorflow_task_with_run_policy": _EMPTY_TF_ROLES,
    "test_mpi_task.py::test_mpi_task": Difference(
        "`num_launcher_replicas=10`: an MPIJob has one launcher, other counts are refused",
        "kfoperators",
        "`num_launcher_replicas` other than 1 is refused",
    ),
    "test_mpi_task.py::test_mpi_task_with_default_config": _MPI_BASE_COMMAND,
    "test_mpi_task.py::test_mpi_task_with_custom_config": _MPI_BASE_COMMAND,
    "test_mpi_task.py::test_horovod_task": _EMPTY_RESOURCES,
    "test_ray.py::test_ray_task": _RAY_GROUP_NAME,
    "test_ray.py::test_ray_task_existing_cluster": _RAY_GROUP_NAME,
}
DELIBERATE["test_elastic_task.py::test_rdzv_configs[fork]"] = DELIBERATE[
    "test_elastic_task.py::test_rdzv_configs[spawn]"
]

README_BLOCK_BEGIN = "<!-- official-suite-differences: generated from tests/official/deliberate.py -->"
README_BLOCK_END = "<!-- /official-suite-differences -->"


def readme_block(readme: str) -> str:
    """The README's generated list of the official tests that fail with ours by design."""
    rows = [f"| `{test_id}` | {d.reason} |" for test_id, d in sorted(DELIBERATE.items()) if d.readme == readme]
    return "\n".join(
        [
            README_BLOCK_BEGIN,
            "",
            "| official test | why it fails with this plugin |",
            "|---|---|",
            *rows,
            "",
            README_BLOCK_END,
        ]
    )
