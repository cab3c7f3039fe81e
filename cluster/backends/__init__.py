"""Backends behind one protocol (``base.Backend``): ``local`` (embedded default), ``kind`` and ``attach``.

``get(name)`` returns one by name; ``attach(kubeconfig, context)`` records an existing cluster and returns its
backend; ``detect()`` finds the backend the last ``gpulab up`` used and says what it tried; ``current()`` is
``detect().backend``. Nothing is chosen silently: a state record that cannot be read is an error naming it.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from cluster import errors, safefs, settings, staterecord
from cluster.backends.base import Backend

log = logging.getLogger(__name__)

NAMES = ("local", "kind", "attach")
DEFAULT = "local"


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


def attach(kubeconfig: str | os.PathLike[str] | None, context: str | None = None,
           cluster_name: str = "gpulab") -> Backend:
    """Record which kubeconfig (default: kubectl's) and context to use, and return the attach backend."""
    from cluster.backends.attach import AttachBackend

    be = AttachBackend(cluster_name)
    be.configure(kubeconfig, context)
    return be


@dataclass(frozen=True)
class Detection:
    backend: Backend
    tried: tuple[str, ...]  # what was looked at, in order, and what it said

    def explain(self) -> str:
        return "; ".join(self.tried)


def detect(cluster_name: str = "gpulab") -> Detection:
    """The backend of the cluster named ``cluster_name``: the one its state records, else the default (``local``)
    when no cluster was ever brought up. A state file that exists but cannot be read, or names an unknown backend,
    is an error that lists what was tried, never a silent fall-back."""
    path: Path = staterecord.path(settings.state_root() / cluster_name)
    tried = [f"state record {path}"]
    if not path.exists():
        tried.append(f"none there, so no cluster was brought up yet: the default backend {DEFAULT!r}")
        log.debug("backend detection: %s", "; ".join(tried))
        return Detection(get(DEFAULT, cluster_name), tuple(tried))
    if not safefs.looks_like_state(path.parent):
        # Not a folder of ours: the default backend refuses to use or purge it, and says why.
        tried.append(f"{path.parent} is not a gpulab state folder: the default backend {DEFAULT!r}, which refuses it")
        return Detection(get(DEFAULT, cluster_name), tuple(tried))
    try:
        rec = staterecord.read(path.parent)
    except staterecord.Unreadable as exc:
        tried.append(exc.message)
        raise errors.BackendUnavailable(
            f"cannot tell which backend runs cluster {cluster_name!r}: " + "; ".join(tried),
            hint="name it (`gpulab up --backend local|kind|attach`), or remove the cluster's state: "
            "gpulab down --purge") from exc
    if rec is None:  # removed since it was looked at
        tried.append(f"gone now: the default backend {DEFAULT!r}")
        return Detection(get(DEFAULT, cluster_name), tuple(tried))
    name = rec.backend
    tried.append(f"records backend {name!r}")
    return Detection(get(str(name), cluster_name), tuple(tried))


def current(cluster_name: str = "gpulab") -> Backend:
    """The backend the last ``gpulab up`` used (see ``detect``)."""
    return detect(cluster_name).backend
