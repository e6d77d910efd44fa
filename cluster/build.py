"""Build the test control plane's binaries from Go modules at the versions pinned in versions.env.

    python3 cluster/build.py            build what is missing, then print a JSON manifest on stdout
    python3 cluster/build.py --check    exit 1 (building nothing) when a binary is missing
    python3 cluster/build.py --crds     only the CRD files (downloads two modules, builds nothing)

The manifest names the binaries and the CRD files that ship inside the operator modules, so the e2e
harness and the schema tests ask this one script instead of knowing paths. Progress goes to stderr.

Each tool gets a small go.mod generated under the cache folder (never in the clone): `go get -tool` of the
command's package at the pinned version, plus, for k8s.io/kubernetes, a replace of every staging module
(read from the kubernetes go.mod itself) by its published v0.<minor>.<patch>. Binaries are kept in
${XDG_CACHE_HOME:-~/.cache}/kubejobs/<versions key>/bin and reused while they exist; Go's own build and
module caches make a rebuild after a version bump incremental. Binaries come in two groups with a cache
folder each, named after that group's versions: the core (Kubernetes, etcd, kwok, Training Operator, KubeRay)
the engines (Kubeflow Trainer v2, JobSet, Kueue) and the mpi-operator, so that pinning or bumping an engine
never rebuilds kube-apiserver. Standard library only: it runs before the
virtualenv exists.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Bump when a recipe below changes how binaries are built, so old binaries are not reused.
RECIPE = 1


def pinned_versions(path: Path = HERE / "versions.env") -> dict[str, str]:
    versions = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            versions[key.strip()] = value.strip()
    return versions


@dataclass(frozen=True)
class Tool:
    name: str  # the binary's file name
    module: str  # the Go module that pins the version
    version_key: str
    package: str  # the main package built, or "" for our own main under cluster/<name>
    ldflags: tuple[str, ...] = ()
    staging_replaces: bool = False  # k8s.io/kubernetes: pin every k8s.io/<staging> module
    workdir: str = ""  # tools sharing a workdir share one generated go.mod
    source: Path | None = field(default=None)
    group: str = "core"  # which cache folder (GROUPS) holds the binary


def tools(v: dict[str, str]) -> list[Tool]:
    k8s = v["KUBERNETES_VERSION"]
    major, minor = k8s.lstrip("v").split(".")[:2]
    k8s_version_flags = tuple(
        f"-X k8s.io/component-base/version.{name}={value}"
        for name, value in (
            ("gitVersion", k8s),
            ("gitMajor", major),
            ("gitMinor", minor),
            ("gitTreeState", "clean"),
        )
    )
    return [
        Tool("etcd", "go.etcd.io/etcd/server/v3", "ETCD_VERSION", "", source=HERE / "etcd"),
        Tool(
            "kube-apiserver",
            "k8s.io/kubernetes",
            "KUBERNETES_VERSION",
            "k8s.io/kubernetes/cmd/kube-apiserver",
            k8s_version_flags,
            staging_replaces=True,
            workdir="kubernetes",
        ),
        Tool(
            "kube-controller-manager",
            "k8s.io/kubernetes",
            "KUBERNETES_VERSION",
            "k8s.io/kubernetes/cmd/kube-controller-manager",
            k8s_version_flags,
            staging_replaces=True,
            workdir="kubernetes",
        ),
        Tool(
            "kube-scheduler",
            "k8s.io/kubernetes",
            "KUBERNETES_VERSION",
            "k8s.io/kubernetes/cmd/kube-scheduler",
            k8s_version_flags,
            staging_replaces=True,
            workdir="kubernetes",
        ),
        Tool("kwok", "sigs.k8s.io/kwok", "KWOK_VERSION", "sigs.k8s.io/kwok/cmd/kwok"),
        Tool(
            "training-operator",
            "github.com/kubeflow/training-operator",
            "TRAINING_OPERATOR_VERSION",
            "github.com/kubeflow/training-operator/cmd/training-operator.v1",
        ),
        Tool(
            "kuberay-operator",
            "github.com/ray-project/kuberay/ray-operator",
            "KUBERAY_VERSION",
            "github.com/ray-project/kuberay/ray-operator",
        ),
        # Kubeflow Trainer v2 and what it runs on; each its own go.mod (their k8s.io minors differ).
        Tool(
            "trainer-controller-manager",
            "github.com/kubeflow/trainer/v2",
            "TRAINER_VERSION",
            "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager",
            group="engines",
        ),
        Tool("jobset-controller", "sigs.k8s.io/jobset", "JOBSET_VERSION", "sigs.k8s.io/jobset", group="engines"),
        Tool("kueue", "sigs.k8s.io/kueue", "KUEUE_VERSION", "sigs.k8s.io/kueue/cmd/kueue", group="engines"),
        # The mpi-operator's MPIJob v2beta1 shares its CRD name with the Training Operator's v1 MPIJob: it runs
        # on a control plane of its own (profile "mpi-operator" of tests/e2e/controlplane.py).
        Tool(
            "mpi-operator",
            "github.com/kubeflow/mpi-operator",
            "MPI_OPERATOR_VERSION",
            "github.com/kubeflow/mpi-operator/cmd/mpi-operator",
            group="mpi",
        ),
    ]


#: Per cache folder, the versions that name it (short names in order).
GROUPS = {
    "core": {
        "KUBERNETES_VERSION": "k8s",
        "ETCD_VERSION": "etcd",
        "KWOK_VERSION": "kwok",
        "TRAINING_OPERATOR_VERSION": "kto",
        "KUBERAY_VERSION": "kuberay",
    },
    "engines": {"TRAINER_VERSION": "trainer", "JOBSET_VERSION": "jobset", "KUEUE_VERSION": "kueue"},
    "mpi": {"MPI_OPERATOR_VERSION": "mpi-operator"},
}


def versions_key(v: dict[str, str], group: str = "core") -> str:
    parts = [f"{name}{v[key].lstrip('v')}" for key, name in GROUPS[group].items()]
    return "-".join(parts) + f"-r{RECIPE}"


def cache_root(v: dict[str, str], group: str = "core") -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "kubejobs" / versions_key(v, group)


def log(message: str) -> None:
    print(f"[cluster-build {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def go(*args: str, cwd: Path) -> str:
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-buildvcs=false -mod=mod"}
    done = subprocess.run(["go", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"go {' '.join(args)} failed in {cwd}:\n{done.stderr[-6000:]}")
    return done.stdout


def module_download(module: str, version: str, cwd: Path) -> dict[str, str]:
    info: dict[str, str] = json.loads(go("mod", "download", "-json", f"{module}@{version}", cwd=cwd))
    if info.get("Error"):
        raise SystemExit(f"{module}@{version}: {info['Error']}")
    return info


def staging_modules(kubernetes_go_mod: Path) -> list[str]:
    # The kubernetes go.mod replaces each staging module with its ./staging/src copy; a module consumer
    # replaces the same list with the published versions.
    return re.findall(r"^\s*(k8s\.io/[\w.-]+) => \./staging/src/", kubernetes_go_mod.read_text(), re.M)


def prepare_module(tool: Tool, v: dict[str, str], src: Path) -> None:
    """Generate the go.mod (and main package, for our own sources) that builds `tool`."""
    version = v[tool.version_key]
    src.mkdir(parents=True, exist_ok=True)
    if (src / ".ready").exists():
        return
    for stale in ("go.mod", "go.sum"):
        (src / stale).unlink(missing_ok=True)
    go("mod", "init", f"kubejobs.local/cluster/{src.name}", cwd=src)
    if tool.staging_replaces:
        info = module_download(tool.module, version, src)
        staging_version = "v0." + version.lstrip("v").split(".", 1)[1]
        for name in staging_modules(Path(info["GoMod"])):
            go("mod", "edit", f"-replace={name}={name}@{staging_version}", cwd=src)
    if tool.source is not None:
        for file in tool.source.glob("*.go"):
            shutil.copy(file, src / file.name)
        go("get", f"{tool.module}@{version}", cwd=src)
        go("mod", "tidy", cwd=src)
    (src / ".ready").touch()


def add_tool(tool: Tool, v: dict[str, str], src: Path) -> None:
    if tool.package and f"tool {tool.package}\n" not in (src / "go.mod").read_text():
        go("get", "-tool", f"{tool.package}@{v[tool.version_key]}", cwd=src)


def build(tool: Tool, v: dict[str, str]) -> Path:
    root = cache_root(v, tool.group)
    target = root / "bin" / tool.name
    if target.exists():
        return target
    src = root / "src" / (tool.workdir or tool.name)
    started = time.monotonic()
    log(f"{tool.name}: building {tool.module}@{v[tool.version_key]}")
    prepare_module(tool, v, src)
    add_tool(tool, v, src)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        out = Path(tmp) / tool.name
        ldflags = " ".join(("-s", "-w", *tool.ldflags))
        go("build", "-trimpath", f"-ldflags={ldflags}", "-o", str(out), tool.package or ".", cwd=src)
        out.replace(target)  # atomic: a binary in bin/ is always complete
    log(f"{tool.name}: done in {time.monotonic() - started:.0f}s ({target.stat().st_size >> 20} MiB)")
    return target


#: (operator, module, version key, folder of its CRD YAMLs inside the module)
CRD_SOURCES = (
    ("training-operator", "github.com/kubeflow/training-operator", "TRAINING_OPERATOR_VERSION", "manifests/base/crds"),
    ("kuberay", "github.com/ray-project/kuberay/ray-operator", "KUBERAY_VERSION", "config/crd/bases"),
    # MPIJob v2beta1: same CRD name as the training operator's v1 MPIJob; installed only by the "mpi-operator"
    # profile of the e2e control plane.
    ("mpi-operator", "github.com/kubeflow/mpi-operator", "MPI_OPERATOR_VERSION", "manifests/base"),
)
#: The engines' CRDs, kept apart (manifest key ``engine_crds``): the e2e control plane installs them, the
#: schema tests (``crds``, the job kinds this project builds) do not load Kueue's and JobSet's.
ENGINE_CRD_SOURCES = (
    ("trainer", "github.com/kubeflow/trainer/v2", "TRAINER_VERSION", "manifests/base/crds"),
    ("jobset", "sigs.k8s.io/jobset", "JOBSET_VERSION", "config/components/crd/bases"),
    ("kueue", "sigs.k8s.io/kueue", "KUEUE_VERSION", "config/components/crd/bases"),
)


def module_dirs(v: dict[str, str], cwd: Path) -> dict[str, str]:
    """Source folders (in Go's module cache) whose files the harness reads: kwok's stages, the webhooks."""
    modules = {
        "kwok": ("sigs.k8s.io/kwok", "KWOK_VERSION"),
        "training-operator": ("github.com/kubeflow/training-operator", "TRAINING_OPERATOR_VERSION"),
        "kuberay": ("github.com/ray-project/kuberay/ray-operator", "KUBERAY_VERSION"),
        "trainer": ("github.com/kubeflow/trainer/v2", "TRAINER_VERSION"),
        "jobset": ("sigs.k8s.io/jobset", "JOBSET_VERSION"),
        "kueue": ("sigs.k8s.io/kueue", "KUEUE_VERSION"),
        "mpi-operator": ("github.com/kubeflow/mpi-operator", "MPI_OPERATOR_VERSION"),
    }
    return {name: module_download(module, v[key], cwd)["Dir"] for name, (module, key) in modules.items()}


def crd_files(
    v: dict[str, str], cwd: Path, sources: tuple[tuple[str, str, str, str], ...] = CRD_SOURCES
) -> dict[str, list[str]]:
    """Per operator, the CRD YAMLs inside its module at the pinned version (found in Go's module cache)."""
    files: dict[str, list[str]] = {}
    for operator, module, key, folder in sources:
        directory = Path(module_download(module, v[key], cwd)["Dir"]) / folder
        # controller-gen names each CRD file <group>_<plural>.yaml
        files[operator] = sorted(str(p) for p in directory.glob("*_*.yaml"))
        if not files[operator]:
            raise SystemExit(f"no CRD YAML in {directory}")
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail instead of building a missing binary")
    parser.add_argument("--crds", action="store_true", help="print only the CRD files; build nothing")
    parser.add_argument("--only", nargs="*", help="build only these binaries")
    args = parser.parse_args()
    if shutil.which("go") is None:
        raise SystemExit("cluster/build.py: Go is not on PATH; the CRDs and the e2e control plane come from Go modules")
    v = pinned_versions()
    root = cache_root(v)
    (root / "src").mkdir(parents=True, exist_ok=True)
    where = {t.name: cache_root(v, t.group) / "bin" / t.name for t in tools(v)}
    if args.crds:
        json.dump({"versions": v, "crds": crd_files(v, root / "src")}, sys.stdout, indent=1)
        print()
        return
    selected = [t for t in tools(v) if not args.only or t.name in args.only]
    missing = [t.name for t in selected if not where[t.name].exists()]
    if args.check and missing:
        raise SystemExit(f"not built yet: {', '.join(str(where[name]) for name in missing)}")
    if missing:
        folders = sorted({str(where[name].parent) for name in missing})
        log(f"building {', '.join(missing)} into {' and '.join(folders)} (first build: about 25 minutes on 2 cores)")
    started = time.monotonic()
    binaries = {t.name: str(build(t, v)) for t in selected}
    if missing:
        log(f"all built in {time.monotonic() - started:.0f}s")
    manifest = {
        "versions": v,
        "bin_dir": str(root / "bin"),
        "binaries": binaries,
        "crds": crd_files(v, root / "src"),
        "engine_crds": crd_files(v, root / "src", ENGINE_CRD_SOURCES),
        "module_dirs": module_dirs(v, root / "src"),
    }
    json.dump(manifest, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
