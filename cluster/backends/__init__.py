"""Backends behind one protocol: ``local`` (embedded default), ``kind`` and ``attach``.

``get(name)`` returns one by name; ``current()`` finds the one the last ``gpulab up`` used.
"""

from __future__ import annotations

import json

from cluster import errors
from cluster.backends.base import Backend, state_root

NAMES = ("local", "kind", "attach")


def get(name: str, cluster_name: str = "gpulab") -> Backend:
    if name == "local":
        from cluster.backends.local import LocalBackend

        return LocalBackend(cluster_name)
    if name == "kind":
        from cluster.backends.kind import KindBackend

        return KindBackend(cluster_name)
    if name == "attach":
        from cluster.backends.attach import AttachBackend

        return AttachBackend(cluster_name)
    raise errors.BackendUnavailable(f"unknown backend {name!r} (choose one of {', '.join(NAMES)})")


def current(cluster_name: str = "gpulab") -> Backend:
    """The backend recorded in the cluster's state, else ``local``."""
    try:
        data = json.loads((state_root() / cluster_name / "state.json").read_text())
        name = str(data.get("backend", "local"))
    except (OSError, ValueError):
        name = "local"
    return get(name, cluster_name)
