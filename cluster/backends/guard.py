"""One check that every destructive step makes before it changes a cluster, and who owns a cluster.

On the ``attach`` backend the cluster belongs to someone else (a department cluster, a cloud cluster a class
shares), so steps that create, delete or change cluster-scoped or NVIDIA-named objects, relabel nodes, inject
faults or change cluster-wide policy must refuse there. Callers: the lab runtime (before setup, solve, reset and
stop change anything, and each such step again when it runs), ``gpulab gpu-operator install|uninstall``,
``gpulab fault inject|clear`` and ``gpulab node heartbeat``. Call ``refuse_if_attach(owner, "taint every GPU node")``
at the top of such a step. This module must not change anything itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cluster import backends, errors, staterecord

ATTACH = "attach"
# The backends that create the clusters they run; any other cluster is someone else's.
_OWN = ("local", "kind")


class Named(Protocol):
    """A backend, or an ``Owner``: all the guard needs is the backend's name."""

    @property
    def name(self) -> str: ...


@dataclass(frozen=True)
class Owner:
    """Which backend made the cluster that a kubeconfig reaches (``attach`` when gpulab did not make it)."""

    name: str
    kubeconfig: Path | None = None


def owner(kubeconfig: Path | str | None = None) -> Owner:
    """The owner of the cluster behind ``kubeconfig`` (default: the current backend's cluster).

    A kubeconfig is ours only when it is the ``admin.kubeconfig`` of a state dir whose ``state.json`` records a
    ``local`` or ``kind`` cluster: any other file (a foreign kubeconfig, a tenant's, the attach backend's copy)
    reaches a cluster gpulab did not create, and counts as ``attach``."""
    current = backends.current()
    if kubeconfig is None:
        return Owner(current.name)
    path = Path(kubeconfig).expanduser().resolve()
    if current.name == ATTACH and _same(current.kubeconfig, path):
        return Owner(ATTACH, path)
    if path.name == "admin.kubeconfig":
        rec = staterecord.read_or_none(path.parent)
        if rec is not None and rec.backend in _OWN:
            return Owner(rec.backend, path)
    return Owner(ATTACH, path)


def _same(kubeconfig: Callable[[], Path], path: Path) -> bool:
    try:
        return kubeconfig().resolve() == path
    except errors.CourseError:  # an attach record without a kubeconfig
        return False


def refuse_if_attach(backend: Named, action: str) -> None:
    """Raise ``CourseError`` naming ``action`` when ``backend`` is an attached (foreign) cluster."""
    if backend.name == ATTACH:
        raise errors.CourseError(
            f"refusing to {action}: the lab cluster is attached (someone else's cluster), and gpulab only changes "
            "nodes, cluster-wide objects and the GPU stack on clusters it created",
            hint="run this step on a lab cluster of your own: `gpulab down --purge` (forgets the attached one, "
            "leaving it untouched), then `gpulab up` (local) or `gpulab up --backend kind`",
        )
