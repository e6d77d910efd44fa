"""A real Kubernetes control plane on 127.0.0.1 for the e2e tests (test-only code, never in a package).

    cd tests && python -m e2e.controlplane up --dir DIR [--watch-pid PID]   start, serve until stopped
    cd tests && python -m e2e.controlplane start --dir DIR                  the same in the background
    cd tests && python -m e2e.controlplane down --dir DIR                   stop a running one

`up` is a supervisor: it builds nothing itself (cluster/build.py does, and is asked for the binaries and the
operators' CRD files), generates the PKI, starts etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok, the Kubeflow Training Operator, the KubeRay operator and the engines (the Kubeflow
Trainer v2 controller manager, the JobSet controller, Kueue) as process groups, installs the CRDs and
Trainer's ClusterTrainingRuntimes, serves every operator's admission webhooks, creates the fake nodes,
waits until each part answers (a condition each, never a sleep), writes
DIR/state.json with the admin kubeconfig, and then stays until SIGTERM/SIGINT or until the watched process
(the pytest session) is gone, when it stops every process it started. SIGUSR1 restarts kube-apiserver with
the same flags (`restart_apiserver(state)`, for the tests of what survives a restart); `--apiserver-arg` adds
a flag to it. `--profile mpi-operator` runs the mpi-operator (MPIJob kubeflow.org/v2beta1) in place of every
other operator and engine: its CRD has the name of the Training Operator's v1 MPIJob CRD.

Pods never run: kwok plays their lifecycle. A pod whose annotation `kubejobs-e2e/outcome` is `succeed` or
`fail` goes Running, then Succeeded (exit 0) or Failed (exit 1) after `kubejobs-e2e/run-for` (a Go
duration, default 1s). Ray head and worker pods (label `ray.io/node-type`) are servers: they stay Running
whatever their annotations say, so a RayJob's outcome is its submitter pod's. A pod without the annotation
stays Running, except a pod of a batch/v1 Job, which succeeds as in kwok's own stages.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, TypeVar

import yaml

from .pki import CertificateAuthority, KeyPair, service_account_keys

REPO = Path(__file__).resolve().parents[2]
OUTCOME = "kubejobs-e2e/outcome"
RUN_FOR = "kubejobs-e2e/run-for"
NODE_COUNT = 3
#: The engines' names in cluster/build.py's manifest (CRDs, module folders) and in the port names below.
ENGINES = ("trainer", "jobset", "kueue")
TRAINING_OPERATOR_NAMESPACE = "kubeflow"
MPI_OPERATOR_NAMESPACE = "mpi-operator"
#: The mpi-operator v0.8's health port, a constant of its server (not a flag), bound on every interface.
MPI_OPERATOR_HEALTH_PORT = 8080
#: "full": every operator and engine (one MPIJob: the Training Operator's v1); "mpi-operator": the core and the
#: mpi-operator only, whose MPIJob v2beta1 CRD has the same name as the v1 one.
FULL_PROFILE, MPI_PROFILE = "full", "mpi-operator"
PROFILES = (FULL_PROFILE, MPI_PROFILE)
KUEUE_NAMESPACE = "kueue-system"
#: Kueue's job integrations enabled here (its 0.17 framework names) for the kinds this project builds. Not
#: "kubeflow.org/mpijob": Kueue's MPIJob integration is the mpi-operator's v2beta1 MPIJob, not the v1 one served.
KUEUE_FRAMEWORKS = (
    "kubeflow.org/pytorchjob",
    "kubeflow.org/tfjob",
    "ray.io/rayjob",
    "trainer.kubeflow.org/trainjob",
    "jobset.x-k8s.io/jobset",
)
#: The resources of Kueue's own API and of those integrations, whose Kueue webhooks are served (Kueue's
#: webhook manifest also covers pods, deployments, statefulsets... of integrations not enabled here).
_KUEUE_WEBHOOK_RESOURCES = frozenset(
    {"workloads", "clusterqueues", "cohorts", "resourceflavors", "localqueues"}
    | {"pytorchjobs", "tfjobs", "rayjobs", "trainjobs", "jobsets"}
)
#: Where controller-runtime webhook servers read their certificate by default (the training operator cannot
#: be told otherwise, nor can Trainer): every operator here serves the one certificate made for 127.0.0.1.
WEBHOOK_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
KUEUE_METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
T = TypeVar("T")


def wait_for(
    what: str, probe: Callable[[], Optional[T]], timeout: float, alive: Callable[[], None] = lambda: None
) -> T:
    """Poll ``probe`` until it returns something other than None; ``alive`` raises if a process died."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        alive()
        found = probe()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(delay)  # polling interval of a condition with a deadline
        delay = min(delay * 1.5, 0.5)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def build_manifest() -> dict[str, Any]:
    """The binaries and CRD files, from cluster/build.py (which builds what is missing, printing progress)."""
    done = subprocess.run(
        [sys.executable, str(REPO / "cluster" / "build.py")], stdout=subprocess.PIPE, stderr=None, text=True
    )
    if done.returncode != 0:
        raise RuntimeError("cluster/build.py failed (its output above says why)")
    manifest: dict[str, Any] = json.loads(done.stdout)
    return manifest


class Api:
    """Minimal JSON REST calls to the API server as the admin user (the supervisor needs nothing more)."""

    def __init__(self, server: str, ca: Path, client: KeyPair) -> None:
        self.server = server
        self._ssl = ssl.create_default_context(cafile=str(ca))
        self._ssl.load_cert_chain(str(client.cert), str(client.key))

    def call(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200, 201)) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.server + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, context=self._ssl, timeout=30) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as e:
            if e.code in ok:
                return json.loads(e.read() or b"null")
            raise RuntimeError(f"{method} {path}: {e.code} {e.read()[:500]!r}") from None

    def ready(self, path: str = "/readyz") -> Optional[bool]:
        try:
            request = urllib.request.Request(self.server + path)
            with urllib.request.urlopen(request, context=self._ssl, timeout=5) as response:
                return True if response.status == 200 else None
        except (urllib.error.URLError, OSError):
            return None


def http_ok(url: str) -> Optional[bool]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return True if response.status == 200 else None
    except (urllib.error.URLError, OSError):
        return None


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    args: list[str]
    env: Optional[dict[str, str]] = None

    def check(self) -> None:
        code = self.popen.poll()
        if code is not None:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{self.name} exited with {code}; end of {self.log}:\n{tail}")


def write_kubeconfig(path: Path, server: str, ca: Path, user: str, client: Optional[KeyPair], token: str = "") -> Path:
    credentials: dict[str, str] = {"token": token} if token else {}
    if client is not None:
        credentials = {"client-certificate": str(client.cert), "client-key": str(client.key)}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kubejobs-e2e", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": user, "context": {"cluster": "kubejobs-e2e", "user": user}}],
        "current-context": user,
    }
    path.write_text(yaml.safe_dump(config))
    return path


def pod_stages() -> list[dict[str, Any]]:
    """Our pod lifecycle: each pod's outcome and run time come from its annotations."""
    not_deleted = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}

    def running_with(outcome: dict[str, Any]) -> list[dict[str, Any]]:
        running = {"key": ".status.phase", "operator": "In", "values": ["Running"]}
        not_a_ray_node = {"key": '.metadata.labels["ray.io/node-type"]', "operator": "DoesNotExist"}
        return [not_deleted, running, not_a_ray_node, outcome]

    def finish(name: str, phase: str, exit_code: int, reason: str, selector: list[dict[str, Any]]) -> dict[str, Any]:
        template = (
            "{{ $now := Now }}\n"
            "containerStatuses:\n"
            "{{ range .spec.containers }}\n"
            "- image: {{ .image | Quote }}\n"
            "  name: {{ .name | Quote }}\n"
            "  ready: false\n"
            "  restartCount: 0\n"
            "  started: false\n"
            "  state:\n"
            "    terminated:\n"
            f"      exitCode: {exit_code}\n"
            "      finishedAt: {{ $now | Quote }}\n"
            f"      reason: {reason}\n"
            "      startedAt: {{ $now | Quote }}\n"
            "{{ end }}\n"
            "conditions:\n"
            "- lastTransitionTime: {{ $now | Quote }}\n"
            "  status: 'False'\n"
            "  type: Ready\n"
            "  reason: PodCompleted\n"
            f"phase: {phase}\n"
        )
        return stage(
            name,
            selector,
            {"statusTemplate": template},
            delay={
                "durationMilliseconds": 1000,
                "durationFrom": {"jq": {"expression": f'.metadata.annotations["{RUN_FOR}"]'}},
            },
        )

    outcome_key = f'.metadata.annotations["{OUTCOME}"]'
    ready_template = (
        "{{ $now := Now }}\n"
        "conditions:\n"
        '{{ range list "Initialized" "Ready" "ContainersReady" "PodScheduled" }}\n'
        "- lastTransitionTime: {{ $now | Quote }}\n"
        "  status: 'True'\n"
        "  type: {{ . }}\n"
        "{{ end }}\n"
        "containerStatuses:\n"
        "{{ range .spec.containers }}\n"
        "- image: {{ .image | Quote }}\n"
        "  name: {{ .name | Quote }}\n"
        "  ready: true\n"
        "  restartCount: 0\n"
        "  started: true\n"
        "  state:\n"
        "    running:\n"
        "      startedAt: {{ $now | Quote }}\n"
        "{{ end }}\n"
        "initContainerStatuses:\n"
        "{{ range .spec.initContainers }}\n"
        "- image: {{ .image | Quote }}\n"
        "  name: {{ .name | Quote }}\n"
        "  ready: true\n"
        "  restartCount: 0\n"
        "  state:\n"
        "    terminated:\n"
        "      exitCode: 0\n"
        "      finishedAt: {{ $now | Quote }}\n"
        "      reason: Completed\n"
        "      startedAt: {{ $now | Quote }}\n"
        "{{ end }}\n"
        "{{ with NodeIPsWith .spec.nodeName }}\n"
        "hostIP: {{ index . 0 | Quote }}\n"
        "{{ end }}\n"
        '{{ with PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" )'
        ' ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}\n'
        "podIP: {{ index . 0 | Quote }}\n"
        "podIPs:\n"
        "{{ range . }}\n"
        "- ip: {{ . | Quote }}\n"
        "{{ end }}\n"
        "{{ end }}\n"
        "phase: Running\n"
        "startTime: {{ $now | Quote }}\n"
    )
    return [
        stage(
            "kubejobs-pod-ready",
            [
                not_deleted,
                {"key": ".spec.nodeName", "operator": "Exists"},
                {"key": ".status.phase", "operator": "In", "values": ["Pending"]},
            ],
            {"statusTemplate": ready_template},
        ),
        finish(
            "kubejobs-pod-succeed",
            "Succeeded",
            0,
            "Completed",
            running_with({"key": outcome_key, "operator": "In", "values": ["succeed"]}),
        ),
        finish(
            "kubejobs-pod-fail",
            "Failed",
            1,
            "Error",
            running_with({"key": outcome_key, "operator": "In", "values": ["fail"]}),
        ),
        finish(
            "kubejobs-job-pod-complete",  # e.g. KubeRay's submitter Job, as kwok's own pod-complete stage does
            "Succeeded",
            0,
            "Completed",
            [
                *running_with({"key": outcome_key, "operator": "DoesNotExist"}),
                {"key": ".metadata.ownerReferences.[].kind", "operator": "In", "values": ["Job"]},
            ],
        ),
        stage(
            "kubejobs-pod-delete",
            [{"key": ".metadata.deletionTimestamp", "operator": "Exists"}],
            {"delete": True},
        ),
    ]


def stage(
    name: str, match: list[dict[str, Any]], next_: dict[str, Any], delay: Optional[dict[str, Any]] = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {"matchExpressions": match},
        "next": next_,
    }
    if delay is not None:
        spec["delay"] = delay
    return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name}, "spec": spec}


def fake_node(name: str) -> dict[str, Any]:
    capacity = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8", "ephemeral-storage": "1Ti"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok"},
        },
        "status": {"capacity": capacity, "allocatable": capacity},
    }


class ControlPlane:
    """Starts and stops the whole control plane under ``directory``."""

    def __init__(
        self,
        directory: Path,
        manifest: dict[str, Any],
        apiserver_args: tuple[str, ...] = (),
        profile: str = FULL_PROFILE,
    ) -> None:
        if profile not in PROFILES:
            raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
        self.dir = directory
        self.manifest = manifest
        self.apiserver_args = apiserver_args
        self.profile = profile
        self.api: Optional[Api] = None
        self.bin = manifest["binaries"]
        self.processes: list[Process] = []
        self.state: dict[str, Any] = {}

    # -- processes --------------------------------------------------------------------------------------------
    def _start(self, name: str, args: list[str], env: Optional[dict[str, str]] = None) -> Process:
        log = self.dir / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            popen = subprocess.Popen(
                [self.bin.get(name, name), *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.dir,
                env={**os.environ, **(env or {})},
                start_new_session=True,  # its own process group, stopped as a whole
            )
        process = Process(name, popen, log, args, env)
        self.processes.append(process)
        return process

    def _alive(self) -> None:
        for process in self.processes:
            process.check()

    @staticmethod
    def _terminate(process: Process) -> None:
        """SIGTERM to the process group, and SIGKILL if it still runs after 10 s."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.popen.pid, signal.SIGTERM)
        try:
            process.popen.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.popen.pid, signal.SIGKILL)
            process.popen.wait()

    def stop(self) -> None:
        """Stop the process groups in reverse start order (clients before the API server, it before etcd)."""
        for process in reversed(self.processes):
            self._terminate(process)
        self.processes.clear()

    def restart_apiserver(self) -> int:
        """Stop kube-apiserver and start it again with the same flags (the other processes keep running and
        reconnect, as on a real control-plane upgrade); returns once /readyz answers. The new pid."""
        index = next(i for i, p in enumerate(self.processes) if p.name == "kube-apiserver")
        old = self.processes.pop(index)
        self._terminate(old)
        fresh = self._start(old.name, old.args, old.env)
        self.processes.insert(index, self.processes.pop())  # keep the stop order
        assert self.api is not None
        wait_for("kube-apiserver /readyz after a restart", self.api.ready, 120, self._alive)
        return fresh.popen.pid

    # -- start ------------------------------------------------------------------------------------------------
    def start(self) -> dict[str, Any]:
        started = time.monotonic()
        pki = self.dir / "pki"
        ca = CertificateAuthority(pki, "kubejobs-e2e-ca")
        serving = ca.issue(
            "apiserver",
            "kube-apiserver",
            dns_names=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"),
            ips=("127.0.0.1",),
        )
        admin = ca.issue("admin", "kubejobs-e2e-admin", organizations=("system:masters",))
        sa = service_account_keys(pki)
        ports = {
            name: free_port()
            for name in (
                *("etcd", "etcd-peer", "apiserver", "to-webhook", "to-probe", "kr-probe"),
                *(f"{engine}-{port}" for engine in ENGINES for port in ("webhook", "probe")),
            )
        }
        server = f"https://127.0.0.1:{ports['apiserver']}"
        kubeconfigs = self.dir / "kubeconfigs"
        kubeconfigs.mkdir(exist_ok=True)
        admin_kubeconfig = write_kubeconfig(kubeconfigs / "admin.yaml", server, ca.pair.cert, "admin", admin)

        def component_kubeconfig(user: str) -> str:
            pair = ca.issue(user.replace(":", "-"), user)
            return str(
                write_kubeconfig(kubeconfigs / f"{user.replace(':', '-')}.yaml", server, ca.pair.cert, user, pair)
            )

        etcd_url = f"http://127.0.0.1:{ports['etcd']}"
        peer_url = f"http://127.0.0.1:{ports['etcd-peer']}"
        # Every start is a new cluster (new CA, new ports): the data of an earlier start that died in this
        # directory would make the bootstrap below fail on objects that already exist.
        shutil.rmtree(self.dir / "etcd", ignore_errors=True)
        self._start(
            "etcd",
            [
                "--name=e2e",
                f"--data-dir={self.dir / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=e2e={peer_url}",
                "--unsafe-no-fsync",  # test data: durability is not needed, speed on a shared disk is
                "--log-level=warn",
            ],
        )
        wait_for("etcd /health", lambda: http_ok(f"{etcd_url}/health"), 60, self._alive)

        self._start(
            "kube-apiserver",
            [
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={ports['apiserver']}",
                f"--cert-dir={self.dir / 'apiserver'}",
                f"--tls-cert-file={serving.cert}",
                f"--tls-private-key-file={serving.key}",
                f"--client-ca-file={ca.pair.cert}",
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction,PodSecurity",
                # As kubeadm and managed clusters run it: privileged pods exist, Pod Security admission and the
                # connector's pod-security level decide where (off, every privileged pod is refused outright).
                "--allow-privileged=true",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={sa.cert}",
                f"--service-account-signing-key-file={sa.key}",
                "--service-cluster-ip-range=10.96.0.0/16",  # addresses allocated to Services, never reached
                "--endpoint-reconciler-type=none",  # the loopback address is not a valid endpoint
                "--profiling=false",
                *self.apiserver_args,
            ],
        )
        api = self.api = Api(server, ca.pair.cert, admin)
        wait_for("kube-apiserver /readyz", api.ready, 120, self._alive)

        full = self.profile == FULL_PROFILE
        crds = (
            [
                *(self.manifest["crds"][operator] for operator in ("training-operator", "kuberay")),
                *(self.manifest["engine_crds"][engine] for engine in ENGINES),
            ]
            if full
            else [self.manifest["crds"]["mpi-operator"]]
        )
        self._install_crds(api, [Path(f) for files in crds for f in files])
        if full:
            self._training_operator_webhook(api, ports["to-webhook"])
            self._engine_webhooks(api, ports)

        self._start(
            "kube-controller-manager",
            [
                f"--kubeconfig={component_kubeconfig('system:kube-controller-manager')}",
                "--secure-port=0",
                "--leader-elect=false",
                "--controllers=garbage-collector-controller,job-controller,namespace-controller,"
                "serviceaccount-controller,serviceaccount-token-controller,root-ca-certificate-publisher-controller,"
                "replicaset-controller,deployment-controller,ttl-after-finished-controller,"
                # node-lifecycle: removes the not-ready taint once kwok reports the node Ready; endpoints: the
                # API server's service proxy (KubeRay reaches the head's dashboard that way) routes by them.
                "node-lifecycle-controller,endpoints-controller,endpointslice-controller",
                # Each controller acts as its own service account (system:controller:<name>), whose bootstrap role
                # grants what it needs (the node controller patches nodes); the manager's own identity does not.
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={sa.key}",
                f"--root-ca-file={ca.pair.cert}",
            ],
        )
        self._start(
            "kube-scheduler",
            [
                f"--kubeconfig={component_kubeconfig('system:kube-scheduler')}",
                "--secure-port=0",
                "--leader-elect=false",
            ],
        )
        kwok_config = self.dir / "kwok.yaml"
        node_stages = Path(self.manifest["module_dirs"]["kwok"]) / "kustomize" / "stage" / "node"
        kwok_config.write_text(
            "\n---\n".join(
                [
                    (node_stages / "fast" / "node-initialize.yaml").read_text(),
                    (node_stages / "heartbeat-with-lease" / "node-heartbeat-with-lease.yaml").read_text(),
                    *(yaml.safe_dump(s) for s in pod_stages()),
                ]
            )
        )
        self._start(
            "kwok",
            [
                f"--kubeconfig={admin_kubeconfig}",
                f"--config={kwok_config}",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                "--cidr=127.1.0.0/16",  # pod IPs on loopback: anything that dials a pod stays on this machine
                "--node-ip=127.0.0.1",
            ],
        )
        if full:
            self._start_operators(admin_kubeconfig, ports)
        else:
            self._start_mpi_operator(api, admin_kubeconfig)
        for i in range(NODE_COUNT):
            api.call("POST", "/api/v1/nodes", fake_node(f"kwok-node-{i}"))

        def nodes_ready() -> Optional[bool]:
            items = api.call("GET", "/api/v1/nodes")["items"]
            ready = [
                n
                for n in items
                if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
                and not n["spec"].get("taints")  # the node controller lifts not-ready once it sees Ready
            ]
            return True if len(ready) == NODE_COUNT else None

        wait_for("kwok nodes Ready and untainted", nodes_ready, 120, self._alive)
        wait_for(
            "the default ServiceAccount (serviceaccount controller)",
            lambda: api.call("GET", "/api/v1/namespaces/default/serviceaccounts/default", ok=(200, 404)).get(
                "metadata"
            ),
            120,
            self._alive,
        )
        if full:
            self._wait_for_operators(api, ports)
        else:
            wait_for("the mpi-operator's leader lease", self._mpi_operator_leads, 180, self._alive)
        self.state = {
            "server": server,
            "etcd": etcd_url,
            "apiserver_restarts": 0,
            "ca": str(ca.pair.cert),
            "kubeconfig": str(admin_kubeconfig),
            "dir": str(self.dir),
            "logs": {p.name: str(p.log) for p in self.processes},
            "pids": {p.name: p.popen.pid for p in self.processes},
            "versions": self.manifest["versions"],
            "crds": self.manifest["crds"],
            "profile": self.profile,
            "start_seconds": round(time.monotonic() - started, 1),
        }
        return self.state

    def _start_operators(self, kubeconfig: Path, ports: dict[str, int]) -> None:
        self._start(
            "training-operator",
            [
                f"--kubeconfig={kubeconfig}",
                "--metrics-bind-address=0",
                f"--health-probe-bind-address=127.0.0.1:{ports['to-probe']}",
                f"--webhook-server-port={ports['to-webhook']}",
                "--leader-elect=false",
            ],
            env={"MY_POD_NAMESPACE": TRAINING_OPERATOR_NAMESPACE},
        )
        self._start(
            "kuberay-operator",
            [
                f"--kubeconfig={kubeconfig}",
                "--metrics-addr=0",
                f"--health-probe-bind-address=127.0.0.1:{ports['kr-probe']}",
                "--enable-leader-election=false",
                "--use-kubernetes-proxy",  # reach the head's dashboard through the API server only
                "--log-stdout-encoder=console",
            ],
        )
        self._start_engines(kubeconfig, ports)

    def _wait_for_operators(self, api: Api, ports: dict[str, int]) -> None:
        for name, port in (("training-operator", ports["to-probe"]), ("kuberay-operator", ports["kr-probe"])):
            wait_for(f"{name} /readyz", functools.partial(http_ok, f"http://127.0.0.1:{port}/readyz"), 180, self._alive)
        for engine in ENGINES:
            wait_for(
                f"{engine} /readyz",
                functools.partial(http_ok, f"http://127.0.0.1:{ports[engine + '-probe']}/readyz"),
                180,
                self._alive,
            )
        self._install_runtimes(api)

    # -- the "mpi-operator" profile: the mpi-operator's MPIJob v2beta1 instead of every other operator ----------
    def _start_mpi_operator(self, api: Api, kubeconfig: Path) -> None:
        """The mpi-operator serves MPIJob v2beta1, whose CRD has the name of the Training Operator's v1 MPIJob
        CRD: a control plane runs one of them. It always elects a leader, with a Lease in its lock namespace;
        its health port (8080 on every interface) is fixed in v0.8, so one such profile runs per machine."""
        # Taken, the operator would exit with "address already in use" in its log: say so here instead.
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Go's listeners do
            try:
                probe.bind(("", MPI_OPERATOR_HEALTH_PORT))
            except OSError as err:
                raise RuntimeError(
                    f"port {MPI_OPERATOR_HEALTH_PORT} is in use ({err.strerror}): the mpi-operator binds its health "
                    "port there on every interface (fixed in v0.8); stop what holds it to run the mpi-operator tests"
                ) from err
        api.call("POST", "/api/v1/namespaces", {"metadata": {"name": MPI_OPERATOR_NAMESPACE}})
        self._start(
            "mpi-operator",
            [f"--kubeConfig={kubeconfig}", f"--lock-namespace={MPI_OPERATOR_NAMESPACE}", "--threadiness=2"],
        )

    def _mpi_operator_leads(self) -> Optional[bool]:
        assert self.api is not None
        path = f"/apis/coordination.k8s.io/v1/namespaces/{MPI_OPERATOR_NAMESPACE}/leases/mpi-operator"
        lease = self.api.call("GET", path, ok=(200, 404))
        return True if (lease.get("spec") or {}).get("holderIdentity") else None

    def _install_crds(self, api: Api, files: list[Path]) -> None:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        names = []
        for file in files:
            for crd in yaml.load_all(file.read_text(), Loader=loader):
                if crd and crd.get("kind") == "CustomResourceDefinition":
                    api.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
                    names.append(crd["metadata"]["name"])

        def established(name: str) -> Optional[bool]:
            crd = api.call("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            conditions = (crd.get("status") or {}).get("conditions") or []  # null until the server sets them
            return True if any(c["type"] == "Established" and c["status"] == "True" for c in conditions) else None

        for name in names:
            wait_for(f"CRD {name} Established", functools.partial(established, name), 60, self._alive)

    def _training_operator_webhook(self, api: Api, port: int) -> None:
        """The training operator's validating webhook, served on 127.0.0.1 and called by the API server.

        The operator's cert-controller reads the serving certificate from a fixed path,
        /tmp/k8s-webhook-server/serving-certs (not configurable in v1.9), checks it against the Secret it
        manages, and parses the Secret's CA key as PKCS#1 RSA. So the CA and certificate are made once per
        user and kept in the cache (valid for ten years, for the CA's and the service's DNS names and for
        127.0.0.1, the URL the webhook configuration names): every control plane on this machine writes the
        same files there, and two at once do not break each other. The webhook rules are the operator's own
        (its module's manifests/base/webhook/manifests.yaml).
        """
        ns = TRAINING_OPERATOR_NAMESPACE
        files = _training_operator_webhook_certs()
        WEBHOOK_CERT_DIR.mkdir(parents=True, exist_ok=True)
        for name in ("tls.crt", "tls.key", "ca.crt"):
            target = WEBHOOK_CERT_DIR / name
            if not target.exists() or target.read_bytes() != files[name]:
                target.write_bytes(files[name])
        api.call("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
        api.call(
            "POST",
            f"/api/v1/namespaces/{ns}/secrets",
            {
                "metadata": {"name": "training-operator-webhook-cert"},
                "data": {k: base64.b64encode(v).decode() for k, v in files.items()},
            },
        )
        upstream = Path(self.manifest["module_dirs"]["training-operator"]) / "manifests/base/webhook/manifests.yaml"
        self._serve_webhooks(api, "training-operator.kubeflow.org", upstream, port)

    def _serve_webhooks(
        self,
        api: Api,
        name: str,
        upstream: Path,
        port: int,
        keep: Callable[[dict[str, Any]], bool] = lambda webhook: True,
    ) -> None:
        """Register an operator's own webhook configurations (its module's manifest, the webhooks ``keep``
        selects) with each call sent to https://127.0.0.1:<port><path>, signed by the shared webhook CA."""
        ca_bundle = base64.b64encode(_training_operator_webhook_certs()["ca.crt"]).decode()
        plurals = {
            "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
            "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
        }
        for config in yaml.safe_load_all(upstream.read_text()):
            if not config or config.get("kind") not in plurals:
                continue
            config["metadata"] = {"name": f"{'validator' if 'Validating' in config['kind'] else 'defaulter'}.{name}"}
            config["webhooks"] = [w for w in config["webhooks"] if keep(w)]
            for webhook in config["webhooks"]:
                path = webhook["clientConfig"]["service"]["path"]
                webhook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}
            api.call("POST", f"/apis/admissionregistration.k8s.io/v1/{plurals[config['kind']]}", config)

    # -- the engines: Kubeflow Trainer v2, JobSet, Kueue ---------------------------------------------------------
    def _engine_webhooks(self, api: Api, ports: dict[str, int]) -> None:
        """Trainer's, JobSet's and Kueue's webhooks, served like the training operator's (their own cert
        management is off: they read the shared certificate). JobSet's pod webhooks get the object selector its
        own kustomization adds (JobSet pods only); of Kueue's, those of its API and of KUEUE_FRAMEWORKS."""
        dirs = self.manifest["module_dirs"]

        def jobset_pods_only(webhook: dict[str, Any]) -> bool:
            if any("pods" in rule["resources"] for rule in webhook["rules"]):
                webhook["objectSelector"] = {
                    "matchExpressions": [{"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]
                }
            return True

        def kueue_enabled(webhook: dict[str, Any]) -> bool:
            return all(set(rule["resources"]) <= _KUEUE_WEBHOOK_RESOURCES for rule in webhook["rules"])

        for engine, manifest, keep in (
            ("trainer", "manifests/base/webhook/manifests.yaml", lambda webhook: True),
            ("jobset", "config/components/webhook/manifests.yaml", jobset_pods_only),
            ("kueue", "config/components/webhook/manifests.yaml", kueue_enabled),
        ):
            self._serve_webhooks(api, f"{engine}.e2e", Path(dirs[engine]) / manifest, ports[f"{engine}-webhook"], keep)
        api.call("POST", "/api/v1/namespaces", {"metadata": {"name": KUEUE_NAMESPACE}})

    def _start_engines(self, kubeconfig: Path, ports: dict[str, int]) -> None:
        """Each engine from a configuration file: leader election, metrics and internal cert management off,
        webhook and health ports on 127.0.0.1. Kueue manages only jobs that name a queue."""

        def common(engine: str) -> dict[str, Any]:
            return {
                "leaderElection": {"leaderElect": False},
                "metrics": {"bindAddress": "0"},
                "health": {"healthProbeBindAddress": f"127.0.0.1:{ports[engine + '-probe']}"},
                "webhook": {"port": ports[engine + "-webhook"], "host": "127.0.0.1"},
            }

        configs = {
            "trainer-controller-manager": {
                "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
                "kind": "Configuration",
                **common("trainer"),
                "certManagement": {"enable": False},
            },
            "jobset-controller": {
                "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
                "kind": "Configuration",
                **common("jobset"),
                "internalCertManagement": {"enable": False},
            },
            "kueue": {
                "apiVersion": "config.kueue.x-k8s.io/v1beta2",
                "kind": "Configuration",
                "namespace": KUEUE_NAMESPACE,
                **common("kueue"),
                "internalCertManagement": {"enable": False},
                "manageJobsWithoutQueueName": False,
                "integrations": {"frameworks": list(KUEUE_FRAMEWORKS)},
                # the visibility API is an aggregated API server on a fixed port: not needed here
                "featureGates": {"VisibilityOnDemand": False},
            },
        }
        configs["kueue"]["webhook"]["certDir"] = str(WEBHOOK_CERT_DIR)
        # Kueue without internal cert management reads a metrics certificate from a fixed path even when metrics
        # are off; it gets the shared one.
        certs = _training_operator_webhook_certs()
        KUEUE_METRICS_CERT_DIR.mkdir(parents=True, exist_ok=True)
        for name in ("tls.crt", "tls.key"):
            target = KUEUE_METRICS_CERT_DIR / name
            if not target.exists() or target.read_bytes() != certs[name]:
                target.write_bytes(certs[name])
        configs["jobset-controller"]["webhook"]["certDir"] = str(WEBHOOK_CERT_DIR)
        for binary, config in configs.items():
            path = self.dir / f"{binary}.yaml"
            path.write_text(yaml.safe_dump(config))
            self._start(binary, [f"--kubeconfig={kubeconfig}", f"--config={path}"])

    def _install_runtimes(self, api: Api) -> None:
        """Trainer's ClusterTrainingRuntimes (its module's manifests/base/runtimes, top level), once its
        webhook, which validates them, serves."""
        folder = Path(self.manifest["module_dirs"]["trainer"]) / "manifests/base/runtimes"
        for file in sorted(folder.glob("*.yaml")):
            for runtime in yaml.safe_load_all(file.read_text()):
                if runtime and runtime.get("kind") == "ClusterTrainingRuntime":
                    api.call("POST", "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes", runtime)


def _training_operator_webhook_certs() -> dict[str, bytes]:
    """The training operator's webhook CA and serving certificate (ca.crt, ca.key, tls.crt, tls.key), made on
    first use and kept under the user's cache directory."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kubejobs" / "e2e-webhook-certs"
    names = ("ca.crt", "ca.key", "tls.crt", "tls.key")
    if not all((cache / n).is_file() for n in names):
        ns = TRAINING_OPERATOR_NAMESPACE
        work = cache.with_name(f"{cache.name}.{os.getpid()}")
        ca = CertificateAuthority(work, "training-operator-ca", dns_names=("training-operator-ca",), rsa_key=True)
        serving = ca.issue(
            "webhook", f"training-operator.{ns}.svc", dns_names=(f"training-operator.{ns}.svc",), ips=("127.0.0.1",)
        )
        for name, data in (
            ("ca.crt", ca.cert_pem),
            ("ca.key", ca.key_pem),
            ("tls.crt", serving.cert.read_bytes()),
            ("tls.key", serving.key.read_bytes()),
        ):
            (work / name).write_bytes(data)
        with contextlib.suppress(OSError):  # another run made it first: use theirs
            work.rename(cache)
    return {n: (cache / n).read_bytes() for n in names}


# -- supervisor -------------------------------------------------------------------------------------------------


def _pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs. A zombie (an exited child its parent, the pytest process, has not reaped yet)
    counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def _write_state(directory: Path, state: dict[str, Any]) -> None:
    tmp = directory / "state.json.tmp"
    tmp.write_text(json.dumps(state, indent=1))
    tmp.replace(directory / "state.json")


def up(
    directory: Path, watch_pid: Optional[int], apiserver_args: tuple[str, ...] = (), profile: str = FULL_PROFILE
) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "supervisor.pid").write_text(str(os.getpid()))
    stopping = threading.Event()
    restart = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.set())
    signal.signal(signal.SIGINT, lambda signum, frame: stopping.set())

    # SIGUSR1 (restart_apiserver() below): restart kube-apiserver, then count it in state.json.
    def request_restart(signum: int, frame: object) -> None:
        restart.set()
        stopping.set()  # ends the wait below at once

    signal.signal(signal.SIGUSR1, request_restart)
    plane = ControlPlane(directory, build_manifest(), apiserver_args, profile)
    try:
        state = plane.start()
        state["supervisor_pid"] = os.getpid()
        _write_state(directory, state)
        print(f"control plane up in {state['start_seconds']}s; KUBECONFIG={state['kubeconfig']}", flush=True)
        while True:
            stopping.wait(1.0)  # a signal ends the wait at once
            if restart.is_set():
                restart.clear()
                stopping.clear()
                state["pids"]["kube-apiserver"] = plane.restart_apiserver()
                state["apiserver_restarts"] += 1
                _write_state(directory, state)
                print(f"kube-apiserver restarted ({state['apiserver_restarts']})", flush=True)
                continue
            if stopping.is_set():
                break
            plane._alive()
            if watch_pid is not None and not _pid_alive(watch_pid):
                print(f"watched process {watch_pid} is gone: stopping", flush=True)
                break
    finally:
        plane.stop()
        (directory / "state.json").unlink(missing_ok=True)
        (directory / "supervisor.pid").unlink(missing_ok=True)
        print("control plane stopped", flush=True)


def restart_apiserver(state: dict[str, Any], timeout: float = 180) -> dict[str, Any]:
    """Ask the supervisor of ``state`` to restart its kube-apiserver; the new state once it serves again."""
    directory = Path(state["dir"])
    before = json.loads((directory / "state.json").read_text())["apiserver_restarts"]
    os.kill(state["supervisor_pid"], signal.SIGUSR1)

    def restarted() -> Optional[dict[str, Any]]:
        current: dict[str, Any] = json.loads((directory / "state.json").read_text())
        return current if current["apiserver_restarts"] > before else None

    return wait_for("the kube-apiserver restart", restarted, timeout)


def down(directory: Path, timeout: float = 60) -> None:
    pid_file = directory / "supervisor.pid"
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text())
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    wait_for("the control plane to stop", lambda: None if _pid_alive(pid) else True, timeout)


def ensure_up(
    directory: Path,
    watch_pid: Optional[int],
    timeout: float = 5400,
    apiserver_args: tuple[str, ...] = (),
    profile: str = FULL_PROFILE,
) -> dict[str, Any]:
    """Start the supervisor unless one already serves ``directory``; return its state (callers hold a lock).
    ``apiserver_args`` are extra kube-apiserver flags; ``profile`` which operators run (``PROFILES``)."""
    state_file = directory / "state.json"
    if state_file.exists():
        state: dict[str, Any] = json.loads(state_file.read_text())
        if _pid_alive(state["supervisor_pid"]):
            return state
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "supervisor.log"
    with log.open("ab") as out:
        watch = [] if watch_pid is None else ["--watch-pid", str(watch_pid)]
        extra = [f"--apiserver-arg={arg}" for arg in apiserver_args] + [f"--profile={profile}"]
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "e2e.controlplane", "up", "--dir", str(directory), *watch, *extra],
            cwd=REPO / "tests",
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def started() -> Optional[dict[str, Any]]:
        if state_file.exists():
            found: dict[str, Any] = json.loads(state_file.read_text())
            return found
        if supervisor.poll() is not None:
            raise RuntimeError(f"the control plane did not start; see {log}:\n{log.read_text()[-4000:]}")
        return None

    # The first run builds the binaries (cluster/build.py prints progress into the log).
    return wait_for(f"the control plane (log: {log})", started, timeout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["up", "start", "down"], help="up: foreground; start: in the background")
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--watch-pid", type=int, help="stop when this process is gone")
    parser.add_argument("--apiserver-arg", action="append", default=[], help="an extra kube-apiserver flag")
    parser.add_argument("--profile", choices=PROFILES, default=FULL_PROFILE, help="which operators run")
    args = parser.parse_args()
    directory = args.dir.resolve()
    if args.command == "up":
        up(directory, args.watch_pid, tuple(args.apiserver_arg), args.profile)
    elif args.command == "start":
        state = ensure_up(directory, args.watch_pid, profile=args.profile)
        print(f"export KUBECONFIG={state['kubeconfig']}   # stop with: make cluster-down")
    else:
        down(directory)


if __name__ == "__main__":
    main()
