"""The one backend protocol (shaped like kind's providers) and the value types it returns."""

from __future__ import annotations

import errno
import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol


from cluster import errors, fleet as fleet_mod, progress as progress_mod, safefs, settings, staterecord
from cluster.ops import NodeStatus

# Write failures that are about the disk, not about gpulab: reported as one clear message, never a traceback.
_DISK_ERRNOS = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is exceeded",
                errno.EROFS: "the filesystem is read-only"}


def free_mib(path: Path) -> float:
    """Free space (MiB) on the filesystem that holds ``path`` (or would hold it: the nearest existing parent)."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free / 2**20


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    running: bool
    pid: int | None = None
    healthy: bool | None = None
    detail: str = ""


@dataclass(frozen=True)
class ClusterStatus:
    backend: str
    exists: bool
    api_server: str | None
    kubeconfig: str | None
    components: list[ComponentStatus] = field(default_factory=list)
    nodes: list[NodeStatus] = field(default_factory=list)
    fleet: str | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return self.exists and not self.problems and all(c.running for c in self.components)

    def to_json(self) -> str:
        data: dict[str, Any] = asdict(self)
        data["healthy"] = self.healthy
        return json.dumps(data, indent=2, sort_keys=True)


class StateDir:
    """The state folder every backend keeps (``<state root>/<cluster name>``) with its ``state.json``."""

    def __init__(self, cluster_name: str = "gpulab", root: Path | None = None) -> None:
        self.cluster_name = cluster_name
        self.dir = (root or settings.state_root()) / cluster_name
        self._lock_depth = 0

    def claim(self) -> None:
        """Make the state folder ours (new, empty or already marked) or refuse it (``cluster.safefs``)."""
        safefs.claim(self.dir)

    def purge_state(self) -> None:
        """Delete the state folder, but only one that carries gpulab's marker."""
        safefs.purge(self.dir)

    @contextmanager
    def locked(self, what: str) -> Iterator[None]:
        """Hold the state folder's lock (claiming the folder first); re-entrant within this object."""
        if self._lock_depth:
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
            return
        self.claim()
        with safefs.locked(self.dir, what=what):
            self._lock_depth = 1
            try:
                yield
            finally:
                self._lock_depth = 0

    @property
    def _state_file(self) -> Path:
        return staterecord.path(self.dir)

    def record(self) -> staterecord.StateRecord | None:
        """This folder's state record; None when there is none or it cannot be read (``backends.detect`` is the
        one that reports an unreadable record)."""
        return staterecord.read_or_none(self.dir)

    def save(self, record: staterecord.StateRecord) -> None:
        """Write the state record atomically (a crash never leaves half a file), into a claimed state folder."""
        self.claim()
        staterecord.write(self.dir, record)

    def update(self, **changes: Any) -> None:
        """Change fields of the existing record (nothing when there is none)."""
        rec = self.record()
        if rec is not None:
            self.save(rec.replace(**changes))

    def exists(self) -> bool:
        return self._state_file.exists()

    def kubeconfig(self) -> Path:
        return self.dir / "admin.kubeconfig"

    def _disk_hint(self) -> str:
        return (f"free space on the filesystem of {self.dir} and run the command again (an existing cluster keeps "
                "its objects), or use another place: GPULAB_STATE_DIR=<a folder with space> gpulab up")

    def ensure_space(self, need_mib: int, what: str) -> None:
        """Refuse to start writing when the state dir's filesystem has less than ``need_mib`` free."""
        free = free_mib(self.dir)
        if free < need_mib:
            raise errors.ClusterError(f"only {free:.0f} MiB free on the filesystem of {self.dir}; {what} needs "
                                      f"at least {need_mib} MiB", hint=self._disk_hint())

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Turn a full, over-quota or read-only disk under the state dir into one ``ClusterError``."""
        try:
            yield
        except OSError as exc:
            reason = _DISK_ERRNOS.get(exc.errno or 0)
            if reason is None:
                raise
            where = f" (writing {exc.filename})" if exc.filename else ""
            raise errors.ClusterError(f"cannot write the cluster state under {self.dir}: {reason}{where}",
                                      hint=self._disk_hint()) from exc


class Backend(Protocol):
    """What every backend offers (kind's provider interface, in our terms). Callers use only this."""

    name: str

    def up(self, fl: fleet_mod.Fleet | None, prog: progress_mod.Progress, *, retain: bool = False) -> ClusterStatus:
        """Create or repair the cluster; a no-op when it is already up."""
        ...

    def down(self, *, purge: bool = False) -> None: ...

    def status(self) -> ClusterStatus: ...

    def kubeconfig(self) -> Path: ...

    def tenant_kubeconfig(self, namespace: str) -> Path: ...

    def collect_logs(self, dest: Path) -> list[Path]: ...

    def prepare(self, prog: progress_mod.Progress) -> str:
        """Make what later bring-ups reuse (local: the etcd seed; kind: the kind binary); one line on what it did."""
        ...

    def doctor(self) -> list[tuple[str, str, str]]:
        """This backend's prerequisites as (check, state, next step) rows for ``gpulab doctor``."""
        ...
