"""Thaw a kind node's frozen cgroups so that Docker can remove the node.

On a host with cgroup v1, runc freezes a container's cgroup while it starts or kills a process in it (runc's
``libcontainer/cgroups/fs/freezer.go``). A ``runc init`` caught in a frozen cgroup when its node container is
removed cannot die, so the node's init waits for it and Docker gives up with "tried to kill container, but did not
receive an exit event" (seen in the kind tier: a pod's container cgroup inside a worker left FROZEN). Writing
``THAWED`` to that cgroup's ``freezer.state`` lets the process die and the removal finish (the kernel's
``Documentation/admin-guide/cgroup-v1/freezer-subsys.rst``). Only cgroups under the given containers are touched.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

FREEZER_ROOT = Path("/sys/fs/cgroup/freezer")


def _container_roots(root: Path, container_id: str) -> list[Path]:
    # Docker's cgroupfs driver puts a container at /docker/<id>; its systemd driver at /system.slice/docker-<id>.scope.
    return [p for p in (root / "docker" / container_id, root / "system.slice" / f"docker-{container_id}.scope")
            if p.is_dir()]


def thaw(container_ids: Iterable[str], root: Path = FREEZER_ROOT) -> int:
    """Thaw every frozen (or freezing) cgroup inside the given containers; returns how many were thawed.

    A self-frozen cgroup stays frozen when its parent is thawed, so each one is written, not just the top."""
    thawed = 0
    for cid in container_ids:
        if not cid or "/" in cid or cid.startswith("."):
            continue
        for top in _container_roots(root, cid):
            for state in sorted(top.rglob("freezer.state")):
                try:
                    if state.read_text().strip() in ("FROZEN", "FREEZING"):
                        state.write_text("THAWED")
                        thawed += 1
                except OSError as exc:  # a cgroup removed meanwhile, or no permission: nothing to do there
                    log.debug("could not thaw %s: %s", state, exc)
    return thawed
