"""Our error types reach propeller with their own gRPC status codes, through flytekit's connector service.

flytekit's ``AsyncConnectorService`` (flytekit 1.16, ``connector_service.py``) catches every exception of a
connector call in ``_handle_exception`` and answers ``NOT_FOUND`` for ``FlyteConnectorNotFound`` and
``INTERNAL`` for anything else, with the traceback as details. ``install()`` wraps that one function: for the
task types this package serves, the code comes from ``errors.grpc_status`` (a refused task
``INVALID_ARGUMENT``, a transient API fault ``UNAVAILABLE``, ...) and the details are the error's message;
flytekit's failure metric is still counted (its ``error_code`` label is the matching HTTP number). Other
connectors in the same process, and unclassified errors (``INTERNAL``), keep flytekit's own handling. The
wrapper is installed by the first call to one of our connectors (``runtime.runtime()``, a dictionary lookup
after that), so ``pyflyte serve connector`` needs no flag; nothing is changed when flytekit's service is not
loaded.

What propeller 1.16 does with the codes (``flyteplugins/go/tasks/plugins/webapi/connector/plugin.go`` and
``pluginmachinery/internal/webapi``): any CreateTask error becomes a retryable USER failure of that attempt
(the node is re-attempted while the task's ``retries`` last) with the gRPC code and details in its message;
a GetTask error is retried by the plugin's cache and, after ``maxSystemFailures``, fails the task. That is
why a refused task never reaches this handler from ``create``: ``KubeJobConnector.create`` answers it with a
ResourceMeta whose GetTask is phase FAILED (permanent). The code also drives the gRPC client's own retries
when propeller's ``defaultServiceConfig`` has a ``retryPolicy`` (``retryableStatusCodes: [UNAVAILABLE]``
retries exactly our transient faults).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from ..wire.kinds import KINDS
from .errors import ConnectorError, grpc_status

__all__ = ["SERVICE_MODULE", "install"]

log = logging.getLogger(__name__)
SERVICE_MODULE = "flytekit.extend.backend.connector_service"
_MARK = "_kubejobs_status_codes"


def install() -> bool:
    """Wrap flytekit's ``_handle_exception`` once; True when our codes are in place."""
    module = sys.modules.get(SERVICE_MODULE)
    original = getattr(module, "_handle_exception", None)
    if module is None or original is None:
        return False
    if getattr(original, _MARK, False):
        return True

    def handle_exception(e: Exception, context: Any, task_type: str, operation: str) -> None:
        code, http = grpc_status(e)
        if task_type not in KINDS or (code == "INTERNAL" and not isinstance(e, ConnectorError)):
            return original(e, context, task_type, operation)  # type: ignore[no-any-return]
        import grpc

        details = f"failed to {operation} {task_type} task: {type(e).__name__}: {e}"
        log.error("%s (gRPC %s)", details, code)
        context.set_code(getattr(grpc.StatusCode, code))
        context.set_details(details)
        module.request_failure_count.labels(task_type=task_type, operation=operation, error_code=http).inc()
        return None

    setattr(handle_exception, _MARK, True)
    module._handle_exception = handle_exception  # type: ignore[attr-defined]
    return True
