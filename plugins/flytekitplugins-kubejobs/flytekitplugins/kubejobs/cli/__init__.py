"""``kubejobs``: preview and check the Kubernetes objects of distributed-training tasks.

::

    kubejobs render workflows/train.py train_task --crd-dir crds/ > job.yaml
    kubectl apply --dry-run=server -f job.yaml
    kubejobs validate job.yaml --crd-dir crds/      # or --from-cluster
    kubejobs serve --tls-cert-file tls.crt --tls-key-file tls.key
    kubejobs templates create a100x8 --cpu 8 --memory 64Gi --gpu 8 --node-selector pool=a100
    kubejobs templates list | get NAME | delete NAME

``render`` serializes a task as ``pyflyte register`` would, builds its object with this project's backend
for an example execution, validates it and prints it. ``validate`` checks PyTorchJob / TFJob / MPIJob /
RayJob manifests (multi-document YAML or JSON). ``serve`` runs the connector's gRPC server as
``pyflyte serve connector`` does, with TLS as an option (``connector/server.py``). ``templates`` manages the
compute templates tasks name (labelled ConfigMaps in the connector's namespace, ``wire/compute.py``). Failures are
one line each and exit with status 1.
flytekit, the kubernetes client and jsonschema are imported only by the command that needs them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import click

from .errors import CliError, fail, one_line
from .manifests import cluster_schemas, documents, dump, load_schemas
from .render import (
    EXAMPLE_EXECUTION,
    EXAMPLE_TEMPLATE_VARS,
    check_renderable,
    example_metadata,
    load_task,
    serialize,
    to_version_0,
)

if TYPE_CHECKING:
    from rich.console import Console

    from ..schema import SchemaSet

__all__ = [
    "CliError",
    "EXAMPLE_EXECUTION",
    "EXAMPLE_TEMPLATE_VARS",
    "image",
    "main",
    "render",
    "serve",
    "templates",
    "to_version_0",
    "validate",
]


def _err() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)  # paths such as `[minReplicas, maxReplicas]` are not markup


def _no_schemas_note(console: Console) -> None:
    console.print(
        "[yellow]warning:[/] no --crd-dir or --from-cluster: only the operators' rules were checked "
        "(not unknown fields, types or ranges)"
    )


def _default_templates_namespace() -> str:
    from ..wire.compute import DEFAULT_TEMPLATES_NAMESPACE

    return DEFAULT_TEMPLATES_NAMESPACE


_templates_namespace_option = click.option(
    "--templates-namespace",
    "templates_namespace",
    default=_default_templates_namespace,
    envvar="KUBEJOBS_TEMPLATES_NAMESPACE",
    show_default="flyte, the connector's namespace in deploy/",
    help="Namespace of the compute template ConfigMaps [env KUBEJOBS_TEMPLATES_NAMESPACE].",
)

_crd_dir_option = click.option(
    "--crd-dir",
    type=click.Path(exists=True, file_okay=False),
    envvar="KUBEJOBS_CRD_DIR",
    help="Directory of CRD schemas to validate against [env KUBEJOBS_CRD_DIR].",
)


class _OneLineErrors(click.Group):
    """Every failure is one line on stderr and exit status 1 (click's usage errors keep status 2)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit):
            raise
        except Exception as e:  # one clear line instead of a traceback
            _err().print(f"[red]error:[/] {_escape(one_line(e))}")
            ctx.exit(1)


@click.group(cls=_OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Render and validate the Kubernetes objects of Flyte distributed-training tasks."""


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("task")
@click.option(
    "--version",
    "type_version",
    type=click.Choice(["0", "1"]),
    default=None,
    help="Render as this task_type_version (0: what an old client's kubeflow task builds).",
)
@click.option("--namespace", default="flytesnacks-development", show_default=True, help="Namespace of the object.")
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False),
    help="FlytePropeller config (YAML) whose plugins: section configures the backend.",
)
@_crd_dir_option
@click.option("--image", default=None, help="Default container image (default: flytekit's default image).")
@click.option(
    "--templates",
    "templates_file",
    type=click.Path(exists=True, dir_okay=False),
    help="Compute templates the task may name (template documents or their ConfigMaps, YAML/JSON).",
)
@click.option(
    "--from-cluster",
    is_flag=True,
    help="Read the compute templates the task names from the cluster (kubeconfig), as the connector does.",
)
@_templates_namespace_option
@click.option("-o", "--output", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True)
def render(
    file: Path,
    task: str,
    type_version: Optional[str],
    namespace: str,
    config_path: Optional[str],
    crd_dir: Optional[str],
    image: Optional[str],
    templates_file: Optional[str],
    from_cluster: bool,
    templates_namespace: str,
    output: str,
) -> None:
    """Print the object TASK in FILE would create, ready for `kubectl apply --dry-run=server -f -`."""
    from dataclasses import replace

    from ..backend import BackendConfig, build_object
    from ..schema import ObjectInvalid, validate_object
    from ..wire.compute import TemplateSet
    from .templates import TemplateApi, templates_from_file

    console = _err()
    if templates_file and from_cluster:
        fail("give either --templates or --from-cluster, not both")
    config = BackendConfig.from_yaml(config_path) if config_path else BackendConfig()
    if templates_file:
        specs = templates_from_file(templates_file)
        config = replace(config, compute_templates=TemplateSet({t.name: t for t in specs}, source=templates_file))
    elif from_cluster:
        with TemplateApi(templates_namespace) as api:
            config = replace(config, compute_templates=api.list())
    template = serialize(load_task(file, task), image)
    check_renderable(task, template, type_version)
    if type_version is not None and int(type_version) != template.task_type_version:
        if type_version == "1":
            fail(f"{task} serializes as task_type_version {template.task_type_version}; only 0 can be re-encoded")
        dropped = to_version_0(template)
        if dropped:
            console.print(f"[yellow]note:[/] {_escape('task_type_version 0 cannot carry: ' + ', '.join(dropped))}")
    obj = build_object(
        template,
        example_metadata(template, namespace),
        config,
        template_vars=EXAMPLE_TEMPLATE_VARS,
        validate=False,
    )
    schemas = load_schemas(crd_dir)
    if schemas is None:
        _no_schemas_note(console)
    try:
        validate_object(obj, schemas, warn_without_schemas=False)
    except ObjectInvalid as e:
        for problem in e.problems:
            console.print(f"[red]invalid:[/] {_escape(f'{e.subject}: {problem}')}")
        raise SystemExit(1) from None
    click.echo(dump(obj, output), nl=False)


@main.command()
@click.argument("manifest", type=click.Path(dir_okay=False, allow_dash=True))
@_crd_dir_option
@click.option("--from-cluster", is_flag=True, help="Read the CRD schemas from the cluster (kubeconfig or in-cluster).")
def validate(manifest: str, crd_dir: Optional[str], from_cluster: bool) -> None:
    """Check the PyTorchJob / TFJob / MPIJob / RayJob objects in MANIFEST (YAML or JSON, `-` for stdin)."""
    from ..schema import SUPPORTED_KINDS, object_problems

    console = _err()
    if crd_dir and from_cluster:
        # $KUBEJOBS_CRD_DIR is a default, not a choice: an explicit --from-cluster overrides it.
        source = click.get_current_context().get_parameter_source("crd_dir")
        if source is not click.core.ParameterSource.ENVIRONMENT:
            fail("give either --crd-dir or --from-cluster, not both")
        crd_dir = None
    kinds = {k.rsplit(" ", 1)[1] for k in SUPPORTED_KINDS}
    jobs = []
    for label, doc in documents(manifest):
        if isinstance(doc, Mapping) and doc.get("kind") in kinds:
            jobs.append((label, doc))
        else:
            kind = doc.get("kind") if isinstance(doc, Mapping) else type(doc).__name__
            console.print(f"[dim]skipped:[/] {_escape(f'{label}: {kind} is not a job kind kubejobs checks')}")
    if not jobs:
        fail(f"{manifest} holds no {', '.join(sorted(kinds))} object")
    schemas: Optional[SchemaSet]
    if from_cluster:
        groups = {str(doc.get("apiVersion", "")).partition("/")[0] for _, doc in jobs}
        schemas = cluster_schemas(groups)
    else:
        schemas = load_schemas(crd_dir)
        if schemas is None:
            _no_schemas_note(console)
    failed = 0
    for label, doc in jobs:
        problems = object_problems(doc, schemas)
        name = (doc.get("metadata") or {}).get("name") if isinstance(doc.get("metadata"), Mapping) else None
        subject = f"{doc.get('kind')} {json.dumps(name) if name else '(no name)'}"
        if problems:
            failed += 1
            for problem in problems:
                console.print(f"[red]invalid:[/] {_escape(f'{label}: {subject}: {problem}')}")
        else:
            click.echo(f"ok: {label}: {subject} ({doc.get('apiVersion')})")
    if failed:
        raise SystemExit(1)


@main.command()
@click.option("--port", type=int, default=8000, show_default=True, help="gRPC port.")
@click.option("--prometheus-port", type=int, default=9090, show_default=True, help="HTTP port of /metrics.")
@click.option("--workers", type=click.IntRange(min=1), default=10, show_default=True, help="gRPC worker threads.")
@click.option(
    "--tls-cert-file",
    type=click.Path(dir_okay=False),
    envvar="KUBEJOBS_TLS_CERT_FILE",
    help="PEM certificate (chain) to serve TLS with; needs --tls-key-file [env KUBEJOBS_TLS_CERT_FILE].",
)
@click.option(
    "--tls-key-file",
    type=click.Path(dir_okay=False),
    envvar="KUBEJOBS_TLS_KEY_FILE",
    help="PEM private key of --tls-cert-file [env KUBEJOBS_TLS_KEY_FILE].",
)
def serve(
    port: int, prometheus_port: int, workers: int, tls_cert_file: Optional[str], tls_key_file: Optional[str]
) -> None:
    """Serve the connector over gRPC like `pyflyte serve connector`, with TLS when a certificate is given."""
    import asyncio

    from ..connector.server import TlsFiles
    from ..connector.server import serve as serve_connector

    tls = TlsFiles.from_options(tls_cert_file, tls_key_file)
    mode = f"TLS ({tls.cert})" if tls is not None else "plaintext"
    click.echo(f"kubejobs connector: gRPC on port {port} ({mode}), metrics on port {prometheus_port}")
    asyncio.run(serve_connector(port, prometheus_port, workers, tls))


@main.group()
def templates() -> None:
    """Compute templates tasks name (`compute_template="a100x8"`), stored as labelled ConfigMaps."""


_namespace_option = click.option(
    "-n",
    "--namespace",
    "namespace",
    default=_default_templates_namespace,
    envvar="KUBEJOBS_TEMPLATES_NAMESPACE",
    show_default="flyte, the connector's namespace in deploy/",
    help="Namespace of the template ConfigMaps (the connector's) [env KUBEJOBS_TEMPLATES_NAMESPACE].",
)


@templates.command("create")
@click.argument("name", required=False)
@click.option("-f", "--file", "file", type=click.Path(dir_okay=False, allow_dash=True), help="Templates (YAML/JSON).")
@click.option("--cpu", default=None, help="CPU quantity (request = limit), e.g. 8 or 500m.")
@click.option("--memory", default=None, help="Memory quantity, e.g. 64Gi.")
@click.option("--gpu", type=click.IntRange(min=0), default=0, help="GPU count.")
@click.option("--gpu-resource-name", default=None, help="Accelerator resource name (default nvidia.com/gpu).")
@click.option("--extended-resource", multiple=True, metavar="NAME=QTY", help="Extended resource (repeatable).")
@click.option("--toleration", multiple=True, metavar="KEY[=VALUE][:EFFECT]|JSON", help="Toleration (repeatable).")
@click.option("--node-selector", multiple=True, metavar="KEY=VALUE", help="Node selector label (repeatable).")
@click.option("--replace", is_flag=True, help="Overwrite a template of the same name.")
@_namespace_option
def templates_create(
    name: Optional[str],
    file: Optional[str],
    cpu: Optional[str],
    memory: Optional[str],
    gpu: int,
    gpu_resource_name: Optional[str],
    extended_resource: tuple[str, ...],
    toleration: tuple[str, ...],
    node_selector: tuple[str, ...],
    replace: bool,
    namespace: str,
) -> None:
    """Create template NAME from flags, or every template of --file; validated before anything is written."""
    from .templates import TemplateApi, template_from_flags, templates_from_file

    flags = cpu or memory or gpu or gpu_resource_name or extended_resource or toleration or node_selector
    if file is not None:
        if name or flags:
            fail("give either --file or NAME with flags, not both")
        specs = templates_from_file(file)
    elif name is None:
        fail("give a template NAME (with flags) or --file")
    else:
        specs = [
            template_from_flags(name, cpu, memory, gpu, gpu_resource_name, extended_resource, toleration, node_selector)
        ]
    with TemplateApi(namespace) as api:
        for spec in specs:
            click.echo(api.create(spec, replace))


@templates.command("list")
@_namespace_option
@click.option("-o", "--output", type=click.Choice(["table", "yaml", "json"]), default="table", show_default=True)
def templates_list(namespace: str, output: str) -> None:
    """List the templates of the namespace, as the connector sees them (invalid ones say why)."""
    from rich.console import Console
    from rich.table import Table

    from .templates import TemplateApi

    with TemplateApi(namespace) as api:
        found = api.list()
    if output != "table":
        docs = [t.to_document() for _, t in sorted(found.templates.items())]
        docs += [{"name": name, "invalid": why} for name, why in sorted(found.invalid.items())]
        click.echo(dump(docs, output), nl=False)
        return
    table = Table("NAME", "CPU", "MEMORY", "GPU", "NODE SELECTOR", "TOLERATIONS", "STATUS", box=None)
    for name in sorted({*found.templates, *found.invalid}):
        spec = found.templates.get(name)
        if spec is None:
            table.add_row(name, "", "", "", "", "", _escape(f"invalid: {found.invalid[name]}"))
            continue
        gpu = f"{spec.gpu} {spec.gpu_resource_name}" if spec.gpu else ""
        selector = ",".join(f"{k}={v}" for k, v in spec.node_selector.items())
        table.add_row(name, spec.cpu or "", spec.memory or "", gpu, _escape(selector), str(len(spec.tolerations)), "ok")
    if not found.templates and not found.invalid:
        _err().print(f"no compute templates in namespace {namespace}")
        return
    Console(highlight=False, soft_wrap=True, width=200).print(table)


@templates.command("get")
@click.argument("name")
@_namespace_option
@click.option("-o", "--output", type=click.Choice(["yaml", "json", "configmap"]), default="yaml", show_default=True)
def templates_get(name: str, namespace: str, output: str) -> None:
    """Print template NAME (its document; -o configmap: the stored ConfigMap)."""
    from ..wire.compute import parse_configmap
    from .templates import TemplateApi

    with TemplateApi(namespace) as api:
        found = api.get(name)
    if output == "configmap":
        click.echo(dump(found, "yaml"), nl=False)
        return
    try:
        spec = parse_configmap(found, namespace)
    except (TypeError, ValueError) as e:
        fail(f"compute template {name!r} is invalid: {e}")
    click.echo(dump(spec.to_document(), output), nl=False)


@templates.command("delete")
@click.argument("name")
@_namespace_option
def templates_delete(name: str, namespace: str) -> None:
    """Delete template NAME (only a ConfigMap carrying the template label)."""
    from .templates import TemplateApi

    with TemplateApi(namespace) as api:
        click.echo(api.delete(name))


@main.group()
def image() -> None:
    """In-cluster image builds (the ImageSpec builder ``kaniko``)."""


@image.command("render")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("variable")
@click.option("-o", "--output", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True)
def image_render(file: Path, variable: str, output: str) -> None:
    """Print the Dockerfile, the context ConfigMap and the Job that build the ImageSpec VARIABLE of FILE.

    Offline: nothing is created; the settings come from KUBEJOBS_IMAGE_BUILD_* as for a build. The
    Dockerfile goes first, as a YAML comment block (JSON: a `dockerfile` key), then the two manifests.
    """
    import os

    from flytekit.image_spec.image_spec import ImageSpec

    from ..imagebuild import BuildSettings
    from ..imagebuild import render as render_build
    from .render import import_file

    spec = getattr(import_file(file), variable, None)
    if not isinstance(spec, ImageSpec):
        fail(f"{file}:{variable} is a {type(spec).__name__}, not a flytekit ImageSpec")
    built = render_build(spec, BuildSettings.from_env(os.environ))
    if output == "json":
        click.echo(dump({k: built[k] for k in ("image", "dockerfile", "files", "configmap", "job")}, "json"), nl=False)
        return
    header = [f"# image: {built['image']}", f"# context: {', '.join(built['files'])}", "# Dockerfile:"]
    header += [f"#   {line}" for line in built["dockerfile"].splitlines()]
    click.echo("\n".join(header))
    click.echo("---\n" + dump(built["configmap"], "yaml") + "---\n" + dump(built["job"], "yaml"), nl=False)
