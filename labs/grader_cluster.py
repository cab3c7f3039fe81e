"""The grader's own cluster: a local control plane that replay grading resets and replays onto.

``GraderCluster`` starts a private local cluster (its own state folder, named ``grader``) once for a batch and
removes it afterwards; or it uses a cluster given by kubeconfig (tests, an instructor's prepared cluster)
without owning it. Nothing the learner handed in decides what this cluster shows: ``labs.replay`` does.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import TracebackType

from cluster import fleet as fleet_mod, settings
from cluster.kube.client import Client
from cluster.progress import LogProgress, Progress

log = logging.getLogger(__name__)

NAME = "grader"


class GraderCluster:
    """``with GraderCluster(fleet) as gc: gc.client()``; ``kubeconfig`` uses a running cluster instead."""

    def __init__(self, fleet: str = "starter", *, kubeconfig: Path | None = None, root: Path | None = None,
                 keep: bool = False, progress: Progress | None = None) -> None:
        self.fleet = fleet
        self.root = root or settings.state_root() / "grading"
        self.keep = keep
        self.progress = progress or LogProgress()
        self._kubeconfig = kubeconfig
        self._owned = False

    def __enter__(self) -> GraderCluster:
        if self._kubeconfig is None:
            from cluster.backends.local import LocalBackend

            backend = LocalBackend(NAME, self.root)
            log.info("starting the grader's cluster in %s", backend.dir)
            backend.up(fleet_mod.load(self.fleet), self.progress)
            self._owned = True
            self._kubeconfig = backend.kubeconfig()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._owned and not self.keep:
            from cluster.backends.local import LocalBackend

            LocalBackend(NAME, self.root).down(purge=True)

    @property
    def kubeconfig(self) -> Path:
        assert self._kubeconfig is not None, "use GraderCluster in a with block"
        return self._kubeconfig

    def client(self) -> Client:
        """A new admin client of the grader's cluster (one per process: clients do not survive a fork)."""
        return Client.from_kubeconfig(self.kubeconfig)
