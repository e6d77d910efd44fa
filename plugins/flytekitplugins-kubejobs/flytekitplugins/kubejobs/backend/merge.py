"""Overlaying a group's ``k8s_pod`` pod spec onto the base pod, as Flyte's ``MergeOverlayPodSpecOntoBase``
does (mergo with override and append-slice): non-empty overlay values win, lists are appended, maps
merge key by key, and containers merge only with the base container of the same name (an overlay
container with another name is dropped).
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["merge_overlay_pod_spec"]

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
