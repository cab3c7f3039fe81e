"""The learner's Jupyter server in class mode: ``jupyterhub-singleuser`` as a child, and the learner's lab cluster
stopped when it ends, whether the learner stopped it, the idle culler did, or the hub shut down.

The hub's ``LocalProcessSpawner`` signals this process (SIGINT, then SIGTERM); both are passed on to the server,
and once it has exited the cluster is stopped (its state stays in the learner's home for the next start). With
the class's ``cluster_start`` "login" the cluster starts here too, in a thread beside the server
(``ondemand.at_login``).
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from types import FrameType

log = logging.getLogger(__name__)


def stop_cluster() -> bool:
    """Stop the learner's local cluster if one was ever started; True when there was one."""
    from cluster.backends.local import LocalBackend

    backend = LocalBackend("gpulab")
    if not backend.exists():
        return False
    backend.down()
    return True


def _start_cluster() -> None:
    from labs.classroom import ondemand

    try:
        ondemand.ensure()
    except Exception:  # noqa: BLE001  (the first lab tries again and shows the learner why)
        log.exception("could not start the lab cluster at login; the first lab will try again")


# ``jupyterhub-singleuser`` (its console script's three lines), with one optional module kept out: jsonschema,
# which jupyter_events imports at every Jupyter server start, imports ``rfc3987_syntax`` when it is installed,
# only to check the "iri" and "iri-reference" string formats (jsonschema/_format.py, inside
# ``suppress(ImportError)``); ``rfc3987_syntax/syntax_helpers.py`` builds an Earley parser for each of its grammar
# rules at import, 2 s of the server's start on a quiet 2-core host and more under load. No schema of Jupyter
# Server, jupyter_events or JupyterLab uses those formats, so the server starts without the module.
SERVER = ("import sys; sys.modules['rfc3987_syntax'] = None; from jupyterhub.singleuser import main; "
          "sys.argv[0] = 'jupyterhub-singleuser'; sys.exit(main())")


def run(argv: Sequence[str]) -> int:
    from labs.classroom import ondemand

    child = subprocess.Popen([sys.executable, "-c", SERVER, *argv])
    if ondemand.at_login():
        threading.Thread(target=_start_cluster, name="lab-cluster", daemon=True).start()

    def forward(signum: int, _frame: FrameType | None) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    code = child.wait()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)  # the cluster's shutdown is not interrupted half-way
    try:
        if stop_cluster():
            log.warning("the Jupyter server stopped (exit code %s); the lab cluster is stopped", code)
    except Exception:  # noqa: BLE001  (the server is gone either way; say why the cluster is not)
        log.exception("could not stop the lab cluster")
        return code or 1
    return code
