"""What the connector hands back and leaves behind: the configured dynamic log links, by their names, on
the task's pods; and no job left on the API server when a create fails after its POST was stored.

The fake API server plays the failure a real one cannot be told to produce (a create stored but never
answered, then every retry refused)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from fakeapi import FakeApiServer
from flyteidl.core.execution_pb2 import TaskExecution
from flytekit.extend.backend.base_connector import ConnectorRegistry
from flytekit.models.task import TaskTemplate
from flytekitplugins.kubejobs.backend import BackendConfig
from flytekitplugins.kubejobs.connector.runtime import configure, shutdown

G, P = "kubeflow.org", "pytorchjobs"
LOGS = {
    "kubernetes-enabled": True,
    "kubernetes-template-uri": "https://k8s/{{ .namespace }}/{{ .podName }}",
    "dynamic-log-links": {
        "vscode": {"displayName": "VS Code", "templateUris": ["https://ide/{{ .podName }}:{{ .taskConfig.port }}"]},
        "wandb": {"displayName": "Weights & Biases", "templateUris": ["https://wandb/{{ .taskConfig.run }}"]},
    },
}


def _with_config(template: TaskTemplate, config: dict[str, str]) -> TaskTemplate:
    pb = template.to_flyte_idl()
    pb.config.update(config)
    return TaskTemplate.from_flyte_idl(pb)


def test_the_configured_dynamic_log_links_come_back_with_their_names(
    server: FakeApiServer, tmp_path: Path, kit: Any
) -> None:
    configure(kit.settings(server, tmp_path, cache=False, backend=BackendConfig.from_flyte_config({"logs": LOGS})))
    connector = ConnectorRegistry.get_connector("pytorch", 1)
    template = _with_config(kit.template("pytorch"), {"link_type": "vscode,wandb", "port": "8080", "run": "r7"})

    async def scenario() -> Any:
        meta = await connector.create(template, "s3://b/out", None, kit.metadata("links"))
        return await kit.get_until(connector, meta, lambda r: r.phase == TaskExecution.RUNNING, server.step)

    try:
        running = asyncio.run(scenario())
    finally:
        shutdown()
    links = [(link.name, link.uri) for link in running.log_links]
    # Pod by pod, the static link then the dynamic ones asked for; the master's names carry its log name
    # ("master"), as Flyte's kubeflow plugin writes them.
    expected = []
    for pod, suffix in (("master-0", "master"), ("worker-0", ""), ("worker-1", "")):
        name = f"links-n0-0-{pod}"
        expected += [
            (f"Kubernetes Logs{suffix}", f"https://k8s/{kit.namespace}/{name}"),
            (f"VS Code{suffix}", f"https://ide/{name}:8080"),
            (f"Weights & Biases{suffix}", "https://wandb/r7"),
        ]
    assert links == expected


def test_a_create_that_fails_after_its_post_was_stored_leaves_no_job(
    server: FakeApiServer, tmp_path: Path, kit: Any
) -> None:
    configure(kit.settings(server, tmp_path, cache=False, retry_deadline=3.0))
    connector = ConnectorRegistry.get_connector("pytorch", 1)
    server.drop_next(1, methods={"POST"}, after_commit=True)  # stored, the answer lost
    server.fail_next(10_000, status=503, methods={"POST"})  # then every retry is refused until the deadline
    try:
        with pytest.raises(Exception, match="503"):
            asyncio.run(connector.create(kit.template("pytorch"), "s3://b/out", None, kit.metadata("lost")))
    finally:
        server.clear_faults()
        shutdown()
    assert server.store.created == 1  # the POST really landed ...
    assert server.objects(G, P) == []  # ... and the connector deleted it again
