"""The learner's lab cluster starts on first use: in class mode (``GPULAB_CLUSTER_ON_DEMAND=1``, set by the hub's
spawner) the first lab step that needs a cluster brings the learner's own local cluster up in their state dir
(``~/.local/state/gpulab``), and ``singleuser`` stops it when the server stops. Outside class mode nothing here
runs: a missing cluster stays an error that says ``gpulab up``.

With ``GPULAB_CLUSTER_AT_LOGIN=1`` (``gpulab class init --cluster-start login``) ``singleuser`` calls ``ensure``
in a thread as the server starts, so the bring-up (about 4 s on a quiet machine) overlaps the server's and the
kernel's start instead of following them. A lab started meanwhile calls ``ensure`` too, which looks at the cluster
only under the state folder's lock (``cluster.safefs.locked``, held by ``LocalBackend.up`` until every node is
registered): it waits for that bring-up and finds the cluster up."""

from __future__ import annotations

import grp
import logging
import os
import pwd

from cluster import backends, fleet as fleet_mod, settings
from cluster.progress import LogProgress
from labs.classroom import layout

log = logging.getLogger(__name__)

ENV = "GPULAB_CLUSTER_ON_DEMAND"
AT_LOGIN = "GPULAB_CLUSTER_AT_LOGIN"
FLEET = "starter"


def enabled() -> bool:
    return settings.current().cluster_on_demand


def at_login() -> bool:
    """Start the cluster beside a learner's server (``singleuser``) instead of waiting for the first lab. Not for
    the instructor's server, whose grading starts a cluster of its own (``labs.grader_cluster``)."""
    if not (enabled() and settings.current().cluster_at_login):
        return False
    try:
        learners = grp.getgrnam(layout.LEARNERS_GROUP)
    except KeyError:
        return False
    me = pwd.getpwuid(os.getuid())
    return me.pw_gid == learners.gr_gid or me.pw_name in learners.gr_mem


def ensure() -> None:
    """Bring the learner's local cluster up unless every component already runs (a no-op outside class mode)."""
    if not enabled():
        return
    backend = backends.current()
    if backend.name != "local":
        return
    from cluster.backends.local import LocalBackend  # here: class mode only (see tests/static/test_codebase_measures.py)

    assert isinstance(backend, LocalBackend)
    # Under the state folder's lock: a bring-up at login (``singleuser``'s thread) runs its processes before its
    # nodes register, so "every component runs" is not "up" until that bring-up lets go of the lock.
    with backend.writing(), backend.locked("gpulab lab (starting your lab cluster)"):
        if backend.exists() and all(c.running for c in backend.components()):
            return
        log.info("class mode: starting your lab cluster in %s", backend.dir)
        backend.up(None if backend.exists() else fleet_mod.load(FLEET), LogProgress())

