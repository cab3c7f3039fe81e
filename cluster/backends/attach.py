"""The ``attach`` backend: use a cluster someone else runs, through an existing kubeconfig and context.

It records which kubeconfig and context to use and then only reads and uses that cluster: ``up`` checks that the
API answers and lists the nodes, ``down`` refuses (gpulab never tears down a cluster it did not create), and
``down --purge`` only forgets the recorded kubeconfig. It never creates, deletes, labels or taints nodes; lab steps
that would change cluster-wide state must call ``guard.refuse_if_attach`` first. Tenant kubeconfigs are allowed:
they create a namespace, a service account, two ClusterRoles (``gpulab:tenant``, ``gpulab:tenant-cluster-reader``)
and bindings, which is what a class sharing one cluster needs and what the cluster's admin can see and remove.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ruamel.yaml import YAML

from cluster import errors, fleet as fleet_mod, ops, progress as progress_mod, staterecord, strict
from cluster.backends import steps as steps_mod
from cluster.backends.base import ClusterStatus, StateDir
from cluster.kube import kubeconfig as kubeconfig_mod
from cluster.kube.client import Client

log = logging.getLogger(__name__)

_USE_HINT = "gpulab up --backend attach --kubeconfig PATH [--context NAME]"
# kubeconfig fields that hold file paths, which a kubeconfig resolves relative to its own directory
_PATH_FIELDS = {"cluster": ("certificate-authority",), "user": ("client-certificate", "client-key", "tokenFile")}


def default_kubeconfig() -> Path:
    """What kubectl would use: the first file of ``$KUBECONFIG``, else ``~/.kube/config``."""
    env = os.environ.get("KUBECONFIG", "")
    first = next((p for p in env.split(os.pathsep) if p), None)
    return Path(first).expanduser() if first else Path.home() / ".kube" / "config"


class AttachBackend(StateDir):
    name = "attach"

    def _attached(self) -> staterecord.StateRecord | None:
        """Only an attach record counts: a local or kind cluster's state is not ours to read."""
        rec = self.record()
        return rec if rec is not None and rec.backend == "attach" else None

    def configured(self) -> bool:
        rec = self._attached()
        return rec is not None and bool(rec.kubeconfig)

    def _source(self) -> tuple[Path, str | None]:
        rec = self._attached()
        if rec is None or not rec.kubeconfig:
            raise errors.ClusterError("no cluster is attached yet", hint=_USE_HINT)
        return Path(rec.kubeconfig), rec.context

    def configure(self, kubeconfig_path: str | os.PathLike[str] | None, context: str | None = None) -> Path:
        """Record which kubeconfig (default: kubectl's) and context to use; the context must exist in it."""
        with self.locked("gpulab up --backend attach"):
            return self._configure(kubeconfig_path, context)

    def _configure(self, kubeconfig_path: str | os.PathLike[str] | None, context: str | None) -> Path:
        if self._state_file.exists() and self._attached() is None:
            raise errors.ClusterError(
                f"{self.dir} holds a lab cluster of another backend; attaching would hide it",
                hint="gpulab down --purge first (this deletes that lab cluster), then " + _USE_HINT)
        path = Path(kubeconfig_path).expanduser().resolve() if kubeconfig_path else default_kubeconfig().resolve()
        if not path.is_file():
            raise errors.ClusterError(f"kubeconfig {path} does not exist", hint=_USE_HINT)
        kubeconfig_mod.load(path, context)  # every problem with the file or the context is reported here
        self.save(staterecord.StateRecord("attach", kubeconfig=str(path), context=context))
        self._pin_context(path, context)
        return path

    def _pin_context(self, path: Path, context: str | None) -> None:
        """When a context other than the file's current one is chosen, write a copy that selects it.

        ``gpulab env`` exports KUBECONFIG, and kubectl uses the current context: without the copy, kubectl in a
        notebook would talk to a different cluster than gpulab does.
        """
        pinned = self.dir / "attach.kubeconfig"
        doc = strict.read_yaml(path.read_text())
        if context is None or doc.get("current-context") == context:
            pinned.unlink(missing_ok=True)
            return
        doc["current-context"] = context
        for section, fields in _PATH_FIELDS.items():
            for item in doc.get(f"{section}s") or []:
                entry = item.get(section) or {}
                for key in fields:
                    if entry.get(key) and not Path(entry[key]).is_absolute():
                        entry[key] = str((path.parent / entry[key]).resolve())
        fd = os.open(pinned, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            YAML(typ="safe", pure=True).dump(doc, f)

    def kubeconfig(self) -> Path:
        path, _ = self._source()
        pinned = self.dir / "attach.kubeconfig"
        return pinned if pinned.exists() else path

    def _client(self, timeout: float = 30.0) -> Client:
        path, context = self._source()
        try:
            return Client.from_kubeconfig(path, context, timeout=timeout)
        except OSError as exc:  # ssl.SSLError included: an unreadable or malformed certificate or key
            raise errors.ClusterError(
                f"cannot use the certificates named in {path}{' (context ' + context + ')' if context else ''}: {exc}",
                hint="check the kubeconfig with `kubectl --kubeconfig " + str(path) + " get nodes`, then " + _USE_HINT,
            ) from exc

    # --- backend protocol --------------------------------------------------------------------------------

    def steps(self) -> list[steps_mod.Step]:
        """One step: the attached cluster answers (nothing is created)."""
        return [_Reach(self)]

    def up(self, fl: fleet_mod.Fleet | None, prog: progress_mod.Progress, *, retain: bool = False) -> ClusterStatus:
        """Check that the attached cluster answers; nothing is created (``retain`` has nothing to keep)."""
        if fl is not None:
            raise errors.ClusterError(
                f"the attach backend uses the nodes the cluster already has; it cannot create fleet {fl.name!r}",
                hint="drop --fleet, or run the fleet on a lab cluster of your own: gpulab up --backend local")
        self._source()  # nothing attached: say so before the lock would make a state folder
        with self.locked("gpulab up --backend attach"):
            steps_mod.bring_up(self.steps(), steps_mod.Context(self, prog, None, record=self.record()), fresh=False,
                               retain=True, teardown=lambda: None)
        return self.status()

    def prepare(self, prog: progress_mod.Progress) -> str:
        return "attach: nothing to prepare (the cluster is someone else's)"

    def doctor(self) -> list[tuple[str, str, str]]:
        if not self.configured():
            return [("attached kubeconfig", "none", _USE_HINT)]
        path, context = self._source()
        return [("attached kubeconfig", f"{path}{' (context ' + context + ')' if context else ''}", "")]

    def status(self) -> ClusterStatus:
        if not self.configured():
            return ClusterStatus("attach", False, None, None, problems=[f"no cluster is attached ({_USE_HINT})"])
        problems: list[str] = []
        server = None
        nodes = []
        try:
            with self._client(timeout=5) as client:
                server = client.conn.server
                nodes = ops.list_nodes(client)
        except errors.CourseError as exc:
            problems.append(f"the attached cluster does not answer: {exc.message}")
        problems += [f"node {n.name} is NotReady" for n in nodes if not n.ready]
        return ClusterStatus("attach", True, server, str(self.kubeconfig()), [], nodes, None, problems)

    def down(self, *, purge: bool = False) -> None:
        """Refuse to stop someone else's cluster; with ``purge``, only forget which kubeconfig was attached."""
        if not purge:
            raise errors.CourseError(
                "the attached cluster is not gpulab's to stop: attach never deletes nodes or tears down a "
                "cluster it did not create",
                hint="`gpulab down --purge` forgets the attached kubeconfig and leaves the cluster as it is")
        if not (self.configured() or self._state_file.exists()):
            return
        with self.locked("gpulab down --purge"):
            self.purge_state()
            log.info("forgot the attached cluster; it keeps running, untouched")

    def tenant_kubeconfig(self, namespace: str) -> Path:
        with self._client() as client:
            if not client.conn.ca_file:
                raise errors.ClusterError(
                    "the attached kubeconfig names no certificate authority file or data, so a tenant kubeconfig "
                    "cannot pin the server's certificate",
                    hint="attach with a kubeconfig that has certificate-authority-data")
            return ops.tenant_kubeconfig(client, namespace, self.dir / "tenants" / f"{namespace}.kubeconfig",
                                         server=client.conn.server, ca_file=Path(client.conn.ca_file))

    def collect_logs(self, dest: Path) -> list[Path]:
        """The attached cluster's components are not ours to read; record what gpulab can see instead."""
        dest.mkdir(parents=True, exist_ok=True)
        out = dest / "attach-status.json"
        out.write_text(self.status().to_json())
        return [out]


class _Reach:
    title = "reach the attached cluster"

    def __init__(self, be: AttachBackend) -> None:
        self.be = be

    def run(self, ctx: steps_mod.Context) -> None:
        path, context = self.be._source()
        ctx.prog.start(f"checking the attached cluster ({path}{', context ' + context if context else ''})")
        with self.be._client() as client:
            version = client.get("/version")
            nodes = ops.list_nodes(client)
        ctx.prog.finish(f"Kubernetes {version.get('gitVersion', '?')}, {len(nodes)} nodes")
