"""``kubejobs``: preview and check the Kubernetes objects of distributed-training tasks.

::

    kubejobs render workflows/train.py train_task --crd-dir ../shared/crds > job.yaml
    kubectl apply --dry-run=server -f job.yaml
    kubejobs validate job.yaml --crd-dir ../shared/crds      # or --from-cluster

``render`` serializes a task as ``pyflyte register`` would, builds its object with this project's backend
for an example execution, validates it and prints it. ``validate`` checks PyTorchJob / TFJob / MPIJob /
RayJob manifests (multi-document YAML or JSON). Failures are one line each and exit with status 1.
flytekit, the kubernetes client and jsonschema are imported only by the command that needs them.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Optional

import click

if TYPE_CHECKING:
    from rich.console import Console

    from .schema import SchemaSet

__all__ = ["main", "render", "validate", "EXAMPLE_EXECUTION", "EXAMPLE_TEMPLATE_VARS", "to_version_0"]

#: The example execution ``render`` builds for (fixed, so the output is reproducible).
EXAMPLE_EXECUTION: dict[str, Any] = {
    "project": "flytesnacks",
    "domain": "development",
    "name": "a8f2c61d94b7e03f5c1d",
    "node_id": "n0",
    "retry_attempt": 0,
    "version": "v1",
}
_DATA = "s3://my-s3-bucket/metadata/propeller/flytesnacks-development-a8f2c61d94b7e03f5c1d/n0/data"
#: Values for Flyte's argument placeholders (``{{.input}}`` ...), as propeller would fill them.
EXAMPLE_TEMPLATE_VARS = {
    "input": f"{_DATA}/inputs.pb",
    "outputPrefix": f"{_DATA}/0",
    "rawOutputDataPrefix": "s3://my-s3-bucket/data/a8/a8f2c61d94b7e03f5c1d-n0-0",
    "checkpointOutputPrefix": "s3://my-s3-bucket/data/a8/a8f2c61d94b7e03f5c1d-n0-0/_flytecheckpoints",
    "prevCheckpointPrefix": '""',
}
_KUBEFLOW_TYPES = ("pytorch", "tensorflow", "mpi")


class CliError(Exception):
    """A failure reported as one line, exit status 1."""


def _err() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)  # paths such as `[minReplicas, maxReplicas]` are not markup


def _say(markup: str) -> None:
    _err().print(markup)


def _fail(message: str) -> NoReturn:
    raise CliError(message)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if isinstance(error, (ValueError, TypeError, CliError)) else f"{type(error).__name__}: {text}"


def _load_schemas(crd_dir: Optional[str]) -> Optional[SchemaSet]:
    if crd_dir is None:
        return None
    from .schema import SchemaSet

    return SchemaSet.from_dir(crd_dir)


def _no_schemas_note(console: Console) -> None:
    console.print(
        "[yellow]warning:[/] no --crd-dir or --from-cluster: only the operators' rules were checked "
        "(not unknown fields, types or ranges)"
    )


# ---- render ---------------------------------------------------------------------------------------------------


def _load_task(file: Path, task_name: str) -> Any:
    """Import ``file`` as ``pyflyte`` does (module path from the first ancestor without ``__init__.py``)."""
    import importlib

    from flytekit.core.base_task import PythonTask
    from flytekit.tools.module_loader import add_sys_path
    from flytekit.tools.script_mode import _find_project_root

    root = Path(_find_project_root(str(file.resolve())))
    module_name = ".".join(file.resolve().relative_to(root).with_suffix("").parts)
    with add_sys_path(str(root)):
        module = importlib.import_module(module_name)
    task = getattr(module, task_name, None)
    if task is None:
        _fail(f"{file} has no task named {task_name!r}")
    if not isinstance(task, PythonTask):
        _fail(f"{file}:{task_name} is a {type(task).__name__}, not a flytekit task")
    return task


def _serialize(task: Any, image: Optional[str]) -> Any:
    """The task's ``TaskTemplate`` protobuf, as ``pyflyte register`` sends it."""
    from collections import OrderedDict

    from flytekit.configuration import ImageConfig, SerializationSettings
    from flytekit.tools.translator import get_serializable

    settings = SerializationSettings(
        image_config=ImageConfig.auto(img_name=image) if image else ImageConfig.auto_default_image(),
        project=EXAMPLE_EXECUTION["project"],
        domain=EXAMPLE_EXECUTION["domain"],
        version=EXAMPLE_EXECUTION["version"],
    )
    spec = get_serializable(OrderedDict(), settings, task)
    return spec.template.to_flyte_idl()


def to_version_0(template: Any) -> list[str]:
    """Re-encode a kubeflow ``task_type_version`` 1 custom in place as the version 0 message an old client
    sends (replica counts and, for PyTorch, the elastic config); returns the custom keys version 0 cannot carry.
    """
    from flyteidl.plugins import mpi_pb2, pytorch_pb2, tensorflow_pb2
    from flyteidl.plugins.kubeflow import mpi_pb2 as kf_mpi
    from flyteidl.plugins.kubeflow import pytorch_pb2 as kf_pytorch
    from flyteidl.plugins.kubeflow import tensorflow_pb2 as kf_tensorflow
    from google.protobuf import json_format

    custom = json_format.MessageToDict(template.custom)

    def count(spec: Any) -> int:
        return int(spec.common.replicas or spec.replicas)

    old: Any
    if template.type == "pytorch":
        v1: Any = json_format.ParseDict(custom, kf_pytorch.DistributedPyTorchTrainingTask(), ignore_unknown_fields=True)
        old = pytorch_pb2.DistributedPyTorchTrainingTask(workers=count(v1.worker_replicas))
        if v1.HasField("elastic_config"):
            for field in pytorch_pb2.ElasticConfig.DESCRIPTOR.fields:  # same names in both messages
                setattr(old.elastic_config, field.name, getattr(v1.elastic_config, field.name))
        kept = {"workerReplicas", "elasticConfig"}
    elif template.type == "tensorflow":
        v1 = json_format.ParseDict(
            custom, kf_tensorflow.DistributedTensorflowTrainingTask(), ignore_unknown_fields=True
        )
        old = tensorflow_pb2.DistributedTensorflowTrainingTask(
            workers=count(v1.worker_replicas),
            ps_replicas=count(v1.ps_replicas),
            chief_replicas=count(v1.chief_replicas),
            evaluator_replicas=count(v1.evaluator_replicas),
        )
        kept = {"workerReplicas", "psReplicas", "chiefReplicas", "evaluatorReplicas"}
    elif template.type == "mpi":
        v1 = json_format.ParseDict(custom, kf_mpi.DistributedMPITrainingTask(), ignore_unknown_fields=True)
        old = mpi_pb2.DistributedMPITrainingTask(
            num_workers=count(v1.worker_replicas), num_launcher_replicas=count(v1.launcher_replicas), slots=v1.slots
        )
        kept = {"workerReplicas", "launcherReplicas", "slots"}
    else:
        _fail(f"--version 0 applies to {', '.join(_KUBEFLOW_TYPES)} tasks; this is a {template.type!r} task")
    template.custom.Clear()
    template.custom.update(json_format.MessageToDict(old))
    template.task_type_version = 0
    dropped = sorted(set(custom) - kept)
    # Per-role images, resources and restart policies (written at the role and in `common`) are lost too.
    for role in sorted(k for k in kept & set(custom) if k.endswith("Replicas")):
        spec = custom[role] if isinstance(custom[role], dict) else {}
        common: dict[str, Any] = spec["common"] if isinstance(spec.get("common"), dict) else {}
        dropped += [f"{role}.{field}" for field in sorted((set(spec) | set(common)) - {"replicas", "common"})]
    return dropped


def _example_metadata(template: Any, namespace: str) -> Any:
    from flyteidl.admin.agent_pb2 import TaskExecutionMetadata
    from flyteidl.core import identifier_pb2

    meta = TaskExecutionMetadata(namespace=namespace)
    task_exec = meta.task_execution_id
    task_exec.task_id.CopyFrom(template.id)
    task_exec.task_id.resource_type = identifier_pb2.TASK
    node = task_exec.node_execution_id
    node.node_id = str(EXAMPLE_EXECUTION["node_id"])
    node.execution_id.project = str(EXAMPLE_EXECUTION["project"])
    node.execution_id.domain = str(EXAMPLE_EXECUTION["domain"])
    node.execution_id.name = str(EXAMPLE_EXECUTION["name"])
    task_exec.retry_attempt = int(EXAMPLE_EXECUTION["retry_attempt"])
    return meta


def _dump(obj: Any, output: str) -> str:
    if output == "json":
        return json.dumps(obj, indent=2) + "\n"
    import yaml

    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)


# ---- validate -------------------------------------------------------------------------------------------------


def _documents(path: str) -> Iterator[tuple[str, Any]]:
    """``(label, document)`` for each document of a YAML/JSON file (``-``: stdin); ``List`` items expanded."""
    import yaml

    name = "<stdin>" if path == "-" else path
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as e:
        _fail(f"cannot read {name}: {e.strerror or e}")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        docs = [d for d in yaml.load_all(text, Loader=loader) if d is not None]
    except yaml.YAMLError as e:
        _fail(f"{name} is not valid YAML: {' '.join(str(e).split())}")
    for index, doc in enumerate(docs):
        label = name if len(docs) == 1 else f"{name}[{index}]"
        if (
            isinstance(doc, Mapping)
            and str(doc.get("kind", "")).endswith("List")
            and isinstance(doc.get("items"), list)
        ):
            for item_index, item in enumerate(doc["items"]):
                yield f"{label}.items[{item_index}]", item
        else:
            yield label, doc


def _cluster_schemas(groups: set[str]) -> SchemaSet:
    """The served CRD schemas of ``groups``, listed from the cluster of the current kubeconfig (or in-cluster)."""
    from kubernetes import client
    from kubernetes import config as kube_config

    config: Any = kube_config  # untyped functions

    # A client of its own: load_kube_config() would change the process-wide default configuration. KUBECONFIG
    # is read now (the client reads it once, when first imported).
    try:
        api_client = config.new_client_from_config(config_file=os.environ.get("KUBECONFIG") or None)
    except Exception as kubeconfig_error:  # no usable kubeconfig: try the pod's service account
        try:
            configuration = client.Configuration()
            config.load_incluster_config(client_configuration=configuration)
            api_client = client.ApiClient(configuration)
        except config.ConfigException:
            _fail(f"--from-cluster: no usable kubeconfig ({kubeconfig_error}) and not running in a cluster")
    from .schema import SchemaSet

    host = api_client.configuration.host
    try:
        api: Any = client.ApiextensionsV1Api(api_client)
        response = api.list_custom_resource_definition(_preload_content=False)
        # Raw JSON: the client's models would rebuild every schema node as an object (slow for 0.5 MB schemas).
        listed = json.loads(response.data)
    except client.ApiException as e:
        _fail(f"--from-cluster: listing CustomResourceDefinitions at {host} failed: {e.status} {e.reason}")
    except Exception as e:  # connection refused, DNS, TLS...
        reason = getattr(e, "reason", None) or e
        _fail(f"--from-cluster: cannot reach {host}: {reason}")
    finally:
        api_client.close()
    crds = [item for item in listed.get("items", []) if (item.get("spec") or {}).get("group") in groups]
    if not crds:
        _fail(f"--from-cluster: the cluster has no CustomResourceDefinitions in {', '.join(sorted(groups))}")
    return SchemaSet.from_crds(crds, source="the cluster")


# ---- commands -------------------------------------------------------------------------------------------------


class _OneLineErrors(click.Group):
    """Every failure is one line on stderr and exit status 1 (click's usage errors keep status 2)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit):
            raise
        except Exception as e:  # one clear line instead of a traceback
            _say(f"[red]error:[/] {_escape(_one_line(e))}")
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
@click.option(
    "--crd-dir",
    type=click.Path(exists=True, file_okay=False),
    envvar="KUBEJOBS_CRD_DIR",
    help="Directory of CRD schemas to validate against [env KUBEJOBS_CRD_DIR].",
)
@click.option("--image", default=None, help="Default container image (default: flytekit's default image).")
@click.option("-o", "--output", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True)
def render(
    file: Path,
    task: str,
    type_version: Optional[str],
    namespace: str,
    config_path: Optional[str],
    crd_dir: Optional[str],
    image: Optional[str],
    output: str,
) -> None:
    """Print the object TASK in FILE would create, ready for `kubectl apply --dry-run=server -f -`."""
    from .backend import BackendConfig, build_object
    from .schema import ObjectInvalid, validate_object

    console = _err()
    config = BackendConfig.from_yaml(config_path) if config_path else BackendConfig()
    template = _serialize(_load_task(file, task), image)
    if type_version is not None and int(type_version) != template.task_type_version:
        if type_version == "1":
            _fail(f"{task} serializes as task_type_version {template.task_type_version}; only 0 can be re-encoded")
        dropped = to_version_0(template)
        if dropped:
            console.print(f"[yellow]note:[/] {_escape('task_type_version 0 cannot carry: ' + ', '.join(dropped))}")
    obj = build_object(
        template,
        _example_metadata(template, namespace),
        config,
        template_vars=EXAMPLE_TEMPLATE_VARS,
        validate=False,
    )
    schemas = _load_schemas(crd_dir)
    if schemas is None:
        _no_schemas_note(console)
    try:
        validate_object(obj, schemas, warn_without_schemas=False)
    except ObjectInvalid as e:
        for problem in e.problems:
            console.print(f"[red]invalid:[/] {_escape(f'{e.subject}: {problem}')}")
        raise SystemExit(1) from None
    click.echo(_dump(obj, output), nl=False)


@main.command()
@click.argument("manifest", type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--crd-dir",
    type=click.Path(exists=True, file_okay=False),
    envvar="KUBEJOBS_CRD_DIR",
    help="Directory of CRD schemas [env KUBEJOBS_CRD_DIR].",
)
@click.option("--from-cluster", is_flag=True, help="Read the CRD schemas from the cluster (kubeconfig or in-cluster).")
def validate(manifest: str, crd_dir: Optional[str], from_cluster: bool) -> None:
    """Check the PyTorchJob / TFJob / MPIJob / RayJob objects in MANIFEST (YAML or JSON, `-` for stdin)."""
    from .schema import SUPPORTED_KINDS, object_problems

    console = _err()
    if crd_dir and from_cluster:
        _fail("give either --crd-dir or --from-cluster, not both")
    documents = list(_documents(manifest))
    kinds = {k.rsplit(" ", 1)[1] for k in SUPPORTED_KINDS}
    jobs = []
    for label, doc in documents:
        if isinstance(doc, Mapping) and doc.get("kind") in kinds:
            jobs.append((label, doc))
        else:
            kind = doc.get("kind") if isinstance(doc, Mapping) else type(doc).__name__
            console.print(f"[dim]skipped:[/] {_escape(f'{label}: {kind} is not a job kind kubejobs checks')}")
    if not jobs:
        _fail(f"{manifest} holds no {', '.join(sorted(kinds))} object")
    schemas: Optional[SchemaSet]
    if from_cluster:
        groups = {str(doc.get("apiVersion", "")).partition("/")[0] for _, doc in jobs}
        schemas = _cluster_schemas(groups)
    else:
        schemas = _load_schemas(crd_dir)
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


if __name__ == "__main__":  # pragma: no cover
    main()
