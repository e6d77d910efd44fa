"""The official plugins' own test suites, run against the official plugins and against ours.

The sdists of flytekitplugins-kfpytorch, -kftensorflow, -kfmpi and -ray at the version requirements.lock
pins are downloaded once (``pip download --no-binary :all: --no-deps``) into
``${XDG_CACHE_HOME:-~/.cache}/kubejobs/official-sdists`` and reused; a failed download is an error. Their
``tests/`` files are laid out side by side in one ``tests`` package (the names do not collide; the Ray test
expects its module to be ``tests.test_ray``), with an empty ``pytest.ini`` so nothing of ours applies.

Rewrite rules for our copy, on ``import``/``from`` lines only:
  ``flytekitplugins.kfpytorch``, ``.kftensorflow``, ``.kfmpi`` -> ``flytekitplugins.kfoperators`` (a ``.task``
  submodule is kept: ours exports the same names there); ``flytekitplugins.ray`` ->
  ``flytekitplugins.raycluster``, except ``flytekitplugins.ray.models`` (the official IDL model helpers build
  expected values). Nothing else changes.

Each layout runs in one pytest subprocess per group (its files, optionally narrowed by a ``-k`` expression), with a
JUnit XML report parsed per test id.
The official plugins' results depend only on the sdists and the locked environment, so they are cached
next to the sdists under a key of both (``KUBEJOBS_OFFICIAL_RERUN=1`` runs them again).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import NamedTuple

__all__ = ["PACKAGES", "Group", "GROUPS", "locked_version", "sdists", "layout", "run", "official_results"]

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("flytekitplugins-kfpytorch", "flytekitplugins-kftensorflow", "flytekitplugins-kfmpi", "flytekitplugins-ray")


class Group(NamedTuple):
    """The tests one subprocess runs: those of ``files`` that the pytest ``-k`` expression ``keyword`` selects
    (``""``: all; ``"word"`` or ``"not word"``: the tests whose id does or does not contain word)."""

    files: tuple[str, ...]
    keyword: str = ""

    def selects(self, test_id: str) -> bool:
        file, _, name = test_id.partition("::")
        word = self.keyword.removeprefix("not ")
        return file in self.files and (not word or (word.lower() in name.lower()) != self.keyword.startswith("not "))


#: One subprocess per group, each a test of its own (the xdist workers run them side by side). The torch
#: elastic file takes most of the time, half of it in its spawn-started worlds: it is split in two.
GROUPS = {
    "elastic-spawn": Group(("test_elastic_task.py",), "spawn"),
    "elastic-other": Group(("test_elastic_task.py",), "not spawn"),
    "others": Group(
        ("test_pytorch_task.py", "test_shared.py", "test_tensorflow_task.py", "test_mpi_task.py", "test_ray.py")
    ),
}
_IMPORT = re.compile(r"^(\s*(?:from|import)\s+)flytekitplugins\.(kfpytorch|kftensorflow|kfmpi|ray)\b(\.models)?")


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "kubejobs" / "official-sdists"


def locked_version(package: str) -> str:
    for line in (REPO / "requirements.lock").read_text().splitlines():
        name, _, version = line.partition("==")
        if name.strip().lower() == package:
            return version.strip()
    raise LookupError(f"{package} is not pinned in requirements.lock")


def sdists() -> list[Path]:
    """The four sdists at the locked versions, downloaded when not cached (a failure raises)."""
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    wanted = {p: folder / f"{p.replace('-', '_')}-{locked_version(p)}.tar.gz" for p in PACKAGES}
    missing = [f"{p}=={locked_version(p)}" for p, path in wanted.items() if not path.exists()]
    if missing:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps", "-d", str(folder)]
        done = subprocess.run([*cmd, *missing], capture_output=True, text=True)
        absent = [str(path) for path in wanted.values() if not path.exists()]
        if done.returncode or absent:
            raise RuntimeError(f"downloading {missing} failed (missing {absent}):\n{done.stdout}{done.stderr}")
    return list(wanted.values())


def rewrite(source: str) -> str:
    def sub(match: re.Match[str]) -> str:
        if match.group(3):  # flytekitplugins.ray.models: the official IDL helpers stay
            return match.group(0)
        target = "raycluster" if match.group(2) == "ray" else "kfoperators"
        return f"{match.group(1)}flytekitplugins.{target}"

    return "\n".join(_IMPORT.sub(sub, line) for line in source.split("\n"))


def layout(root: Path, *, ours: bool) -> Path:
    """``root/tests/<official test files>`` (rewritten when ``ours``) and an empty ``root/pytest.ini``."""
    tests = root / "tests"
    tests.mkdir(parents=True)
    (tests / "__init__.py").write_text("")
    (root / "pytest.ini").write_text("[pytest]\n")
    for sdist in sdists():
        with tarfile.open(sdist) as archive:
            for member in archive.getmembers():
                parts = Path(member.name).parts
                if member.isfile() and len(parts) == 3 and parts[1] == "tests" and parts[2].endswith(".py"):
                    extracted = archive.extractfile(member)
                    assert extracted is not None
                    text = extracted.read().decode()
                    (tests / parts[2]).write_text(rewrite(text) if ours else text)
    return root


def run(root: Path, group: str) -> dict[str, str]:
    """Test id (``file::name``) -> ``passed``/``failed``/``skipped`` for one group of files; a file that
    fails to import reports its tests as absent (the comparison counts them as not passing)."""
    report = root / f"junit-{group}.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "KUBEJOBS_LOCAL_WORLD"))}
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-q",
        "--continue-on-collection-errors",
    ]
    selection = GROUPS[group]
    files = [f"tests/{name}" for name in selection.files]
    keyword = ["-k", selection.keyword] if selection.keyword else []
    done = subprocess.run(
        [*cmd, f"--junitxml={report}", *keyword, *files], cwd=root, env=env, capture_output=True, text=True
    )
    if not report.exists():
        raise RuntimeError(f"pytest wrote no report (exit {done.returncode}):\n{done.stdout[-4000:]}{done.stderr}")
    results: dict[str, str] = {}
    for case in ET.parse(report).iter("testcase"):
        module = case.get("classname", "").rpartition(".")[2]
        if not module:
            continue  # a collection error: the file's tests are absent
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
            elif child.tag == "skipped":
                outcome = "skipped"
        results[f"{module}.py::{case.get('name')}"] = outcome
    return results


def _cache_key() -> str:
    digest = hashlib.sha256(sys.version.encode())
    digest.update((REPO / "requirements.lock").read_bytes())
    digest.update(Path(__file__).read_bytes())
    for sdist in sdists():
        digest.update(sdist.read_bytes())
    return digest.hexdigest()[:16]


def official_results(root: Path, group: str) -> dict[str, str]:
    cached = cache_dir() / f"official-results-{group}-{_cache_key()}.json"
    if cached.exists() and not os.environ.get("KUBEJOBS_OFFICIAL_RERUN"):
        results: dict[str, str] = json.loads(cached.read_text())
        return results
    results = run(layout(root, ours=False), group)
    cached.write_text(json.dumps(results, indent=1, sort_keys=True))
    return results
