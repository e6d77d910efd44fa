"""Overlaying a group's ``k8s_pod`` pod spec onto the base pod, as Flyte's ``MergeOverlayPodSpecOntoBase``
does (mergo with override and append-slice): non-empty overlay values win, lists are appended, maps
merge key by key, and containers merge only with the base container of the same name (an overlay
container with another name is dropped).
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["merge_overlay_pod_spec", "merge_base_pod_template"]

_CONTAINER_LISTS = ("containers", "initContainers")


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == 0 or value is False or value == {} or value == []


def _merge(base: dict[str, Any], overlay: dict[str, Any]) -> None:
    for key, value in overlay.items():
        if _empty(value):
            continue
        current = base.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            _merge(current, value)
        elif isinstance(current, list) and isinstance(value, list):
            current.extend(copy.deepcopy(value))
        else:
            base[key] = copy.deepcopy(value)


def merge_overlay_pod_spec(base: dict[str, Any], overlay: dict[str, Any]) -> None:
    """Merge ``overlay`` into ``base`` in place (``overlay`` is not modified)."""
    _merge(base, {k: v for k, v in overlay.items() if k not in _CONTAINER_LISTS})
    for key in _CONTAINER_LISTS:
        by_name = {c.get("name"): c for c in base.get(key) or [] if isinstance(c, dict)}
        for container in overlay.get(key) or []:
            if isinstance(container, dict) and container.get("name") in by_name:
                _merge(by_name[container["name"]], container)


def merge_base_pod_template(spec: dict[str, Any], primary: str, template_spec: dict[str, Any]) -> dict[str, Any]:
    """The task pod ``spec`` laid over a cluster PodTemplate's spec (Flyte's ``MergeBasePodSpecOntoTemplate``):
    the template's containers named ``default`` (every container) and ``primary`` (the primary one) are the
    bases the task's containers are merged onto; other pod fields merge with the task's values winning."""
    base = copy.deepcopy(template_spec)
    by_name = {c.get("name"): c for c in base.pop("containers", None) or [] if isinstance(c, dict)}
    init_by_name = {c.get("name"): c for c in base.pop("initContainers", None) or [] if isinstance(c, dict)}
    _merge(base, {k: v for k, v in spec.items() if k not in _CONTAINER_LISTS})
    for key, templates, names in (
        ("containers", by_name, ("default", "primary")),
        ("initContainers", init_by_name, ("default-init", "primary-init")),
    ):
        merged = []
        for container in spec.get(key) or []:
            out: dict[str, Any] = copy.deepcopy(templates.get(names[0], {}))
            if container.get("name") == primary and names[1] in templates:
                _merge(out, copy.deepcopy(templates[names[1]]))
            _merge(out, container)
            out["name"] = container["name"]
            merged.append(out)
        if merged:
            base[key] = merged
    return base
