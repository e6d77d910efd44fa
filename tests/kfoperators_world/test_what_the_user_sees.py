"""Local runs as a user meets them through `pyflyte run` in the task file's own directory: the output text, the
exit code, the file and line of an error. Each test writes a real task file and runs the real `pyflyte`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:Failed to initialize NumPy:UserWarning")]

PYFLYTE = str(Path(sys.executable).parent / "pyflyte")

TASKS = """
import os
import threading
from pathlib import Path

from flytekit import task
from flytekitplugins.kfoperators import PS, Chief, Elastic, PyTorch, TfJob, Worker


def explode(rank: str) -> None:
    raise ValueError(f"rank {rank} exploded")  # line 11


def scale(x: int) -> int:
    return 10 * x


@task(task_config=PyTorch(worker=Worker(replicas=1)))
def torch_fails() -> int:
    if os.environ["RANK"] == "1":
        explode(os.environ["RANK"])
    threading.Event().wait()  # the master waits: only the launcher ends it
    return 0


@task(task_config=Elastic(nproc_per_node=2))
def elastic_helper(x: int) -> int:
    return scale(x) + int(os.environ["RANK"])


@task(task_config=TfJob(chief=Chief(replicas=1), ps=PS(replicas=1), worker=Worker(replicas=2)))
def tf_roles() -> str:
    me = os.environ["TF_CONFIG"]
    print("I am", me.split('"task": ')[1].split("}")[0], flush=True)
    return "chief done"


@task(task_config=TfJob(chief=Chief(replicas=1), worker=Worker(replicas=2)))
def tf_one() -> str:
    return os.environ["TF_CONFIG"]


@task(task_config=PyTorch(worker=Worker(replicas=1)))
def torch_waits() -> int:
    print("READY", os.getpid(), flush=True)
    threading.Event().wait()
    return 0


@task(task_config=Elastic(nproc_per_node=2))
def elastic_waits() -> int:
    print("READY", os.getpid(), flush=True)
    threading.Event().wait()
    return 0


def fail_once(directory: str) -> str:
    marker = Path(directory, "attempted")
    if not marker.exists():
        marker.touch()
        raise RuntimeError("first attempt fails")
    return "succeeded on a restart"


@task(task_config=Elastic(nproc_per_node=1, max_restarts=1))
def restart_once(directory: str) -> str:
    return fail_once(directory)


@task(task_config=Elastic(nproc_per_node=1, max_restarts=0))
def no_restart(directory: str) -> str:
    return fail_once(directory)


@task(task_config=Elastic(nproc_per_node=1, rdzv_configs={"join_timeout": -5}))
def elastic_bad_rdzv() -> str:
    return "rendezvous settings ignored"
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "wf.py").write_text(TASKS)
    return tmp_path


def pyflyte_run(workdir: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYFLYTE, "run", "wf.py", *args],
        cwd=workdir,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_importing_the_package_does_not_load_the_local_runtime() -> None:
    rt = "flytekitplugins.kfoperators.runtime"
    code = f"import sys, flytekitplugins.kfoperators; print(sorted(m for m in sys.modules if m.startswith({rt!r})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_default_elastic_imports_the_users_module_from_its_own_directory(workdir: Path) -> None:
    # the task calls a module-level helper: spawned workers must import `wf` as pyflyte did
    run = pyflyte_run(workdir, "elastic_helper", "--x", "2")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "ModuleNotFoundError" not in run.stdout + run.stderr
    assert run.stdout.strip().splitlines()[-1] == "20"  # rank 0's 10 * 2 + 0


def test_a_failing_member_shows_the_users_file_and_line_once(workdir: Path) -> None:
    run = pyflyte_run(workdir, "torch_fails")
    assert run.returncode == 1
    text = run.stdout + run.stderr
    where = f'File "{workdir / "wf.py"}", line 11, in explode'
    assert where in run.stderr  # the member's own traceback, live under its prefix
    # and the task's error names the line (rich wraps it anywhere, even inside a long path: compare sans spaces)
    assert f"at{where}".replace(" ", "") in "".join(run.stdout.split())
    assert "<dynamic-code>" not in text
    assert text.count("Traceback (most recent call last)") == 1
    assert "worker 0 (worker-0, RANK=1) failed: ValueError: rank 1 exploded" in " ".join(run.stdout.split())


def test_every_tf_roles_output_reaches_the_user_when_the_chief_returns(workdir: Path) -> None:
    for _ in range(3):
        run = pyflyte_run(workdir, "tf_roles")
        assert run.returncode == 0, run.stderr[-3000:]
        for member, role in [("chief-0", "chief"), ("worker-0", "worker"), ("worker-1", "worker")]:
            assert f'[{member}] I am {{"type": "{role}"' in run.stdout, run.stdout


def test_a_tf_world_of_one_is_the_chief(workdir: Path) -> None:
    run = pyflyte_run(workdir, "tf_one", env={"KUBEJOBS_LOCAL_WORLD": "one"})
    assert run.returncode == 0, run.stderr[-3000:]
    assert '"task": {"type": "chief", "index": 0}' in run.stdout


@pytest.mark.parametrize(
    ("entity", "line"),
    [
        ("torch_waits", "interrupted: stopped the 2 processes of the local PyTorch world"),
        ("elastic_waits", "interrupted: stopped the 2 worker processes of the local Elastic run"),
    ],
)
def test_ctrl_c_prints_one_line_and_exits_130(workdir: Path, entity: str, line: str) -> None:
    run = subprocess.Popen(
        [PYFLYTE, "run", "wf.py", entity], cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert run.stdout is not None
    seen, ready = [], 0
    for output in run.stdout:  # blocks until both processes say they are up
        seen.append(output)
        ready += "READY" in output
        if ready == 2:
            break
    run.send_signal(signal.SIGINT)  # what Ctrl-C sends to the foreground process
    rest = run.stdout.read()
    assert run.wait(timeout=60) == 130
    assert rest.strip().splitlines() == [line]
    assert "Traceback" not in "".join(seen) + rest


def test_max_restarts_restarts_a_failed_elastic_worker(workdir: Path) -> None:
    run = pyflyte_run(workdir, "restart_once", "--directory", str(workdir))
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().splitlines()[-1] == "succeeded on a restart"


def test_without_restarts_the_first_failure_fails_the_task(workdir: Path) -> None:
    run = pyflyte_run(workdir, "no_restart", "--directory", str(workdir))
    assert run.returncode == 1
    assert "rank 0 failed: RuntimeError: first attempt fails" in " ".join(run.stdout.split())


def test_rdzv_configs_reach_the_rendezvous(workdir: Path) -> None:
    # torch refuses a negative join timeout: ignoring the setting would let the task succeed
    run = pyflyte_run(workdir, "elastic_bad_rdzv")
    assert run.returncode == 1
    assert "join timeout" in (run.stdout + run.stderr).lower()
    assert "rendezvous settings ignored" not in run.stdout
