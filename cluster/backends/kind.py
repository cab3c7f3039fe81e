"""The ``kind`` backend: a real cluster of Docker containers (kind), one worker per simulated node of the fleet.

Unlike ``local``, the kubelets are real, so pods really run. The GPUs stay simulated: each worker gets the fleet
node's labels, taints and ``gpulab.dev/hardware`` annotation, and the simulated GPU stack patches node status as
it does on ``local``. Bring-up is ordered steps (check tools, write config, ``kind create cluster``, label and taint
the workers, wait for Ready); a failed bring-up deletes the half-built cluster unless ``retain`` is set. This module
runs the kind CLI and talks to the API; it never calls docker itself except to ask whether the daemon answers.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from cluster import errors, fleet as fleet_mod, ops, progress as progress_mod, versions
from cluster.backends import kindconfig, kindtool
from cluster.backends.base import ClusterStatus, StateDir
from cluster.kube import kubeconfig
from cluster.kube.client import Client

log = logging.getLogger(__name__)

WAIT = "120s"
CREATE_TIMEOUT = 1800.0  # the first run pulls a node image of about 1 GB
NODES_READY_TIMEOUT = 180.0
_NO_DOCKER_HINT = ("install Docker (https://docs.docker.com/get-docker/) and start it, then run "
                   "`gpulab up --backend kind` again; without Docker, `gpulab up --backend local` needs nothing else")


class KindBackend(StateDir):
    name = "kind"

    def config_path(self) -> Path:
        return self.dir / "kind-config.yaml"

    @property
    def log_dir(self) -> Path:
        return self.dir / "logs"

    # --- tools -------------------------------------------------------------------------------------------

    def preflight(self, prog: progress_mod.Progress | None = None) -> Path:
        """Check that Docker answers and return the pinned kind binary (building it if needed)."""
        docker = shutil.which("docker")
        if docker is None:
            raise errors.BackendUnavailable(
                "the kind backend runs each node as a Docker container, and `docker` is not on PATH",
                hint=_NO_DOCKER_HINT)
        try:
            proc = subprocess.run([docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                                  text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise errors.BackendUnavailable(f"`docker info` did not answer: {exc}", hint=_NO_DOCKER_HINT) from exc
        if proc.returncode != 0 or not proc.stdout.strip():
            detail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["no output"]
            raise errors.BackendUnavailable(
                f"docker is installed but its daemon is not answering ({detail[0]})",
                hint="start Docker (Docker Desktop, or `sudo systemctl start docker`), then run "
                "`gpulab up --backend kind` again; or use `gpulab up --backend local`, which needs no Docker")
        return kindtool.ensure_kind(prog)

    def _kind(self, kind: Path, args: list[str], log_name: str, prog: progress_mod.Progress | None = None,
              timeout: float = 300.0) -> str:
        """Run kind, streaming its status lines to the progress bar and the whole output to a log file."""
        cmd = [str(kind), *args]
        env = dict(os.environ, KIND_EXPERIMENTAL_PROVIDER="docker")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{log_name}.log"
        lines: list[str] = []
        started = time.monotonic()
        with log_path.open("w") as logf:
            logf.write(f"$ {' '.join(cmd)}\n")
            # The with block closes kind's output pipe however the loop ends (no unclosed-file warning).
            with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as proc:
                assert proc.stdout is not None
                for line in proc.stdout:
                    logf.write(line)
                    lines.append(line.rstrip())
                    if prog and line.strip().startswith(("✓", "•", "✗")):
                        prog.advance(detail=line.strip().lstrip("✓•✗ ").strip())
                    if time.monotonic() - started > timeout:
                        proc.kill()
                        lines.append(f"(gpulab stopped kind after {timeout:.0f} s)")
                        break
                rc = proc.wait()
        if rc != 0:
            raise errors.CommandFailed(cmd, rc, "\n".join(lines), hint=f"the full output is in {log_path}")
        return "\n".join(lines)

    # --- bring-up ----------------------------------------------------------------------------------------

    def up(self, fl: fleet_mod.Fleet | None, prog: progress_mod.Progress, *, retain: bool = False) -> ClusterStatus:
        fresh = not self.exists()
        fl = self._step_fleet(fl)
        workers = kindconfig.plan(fl, self.cluster_name)  # a fleet too big fails here, before Docker is touched
        kind = self.preflight(prog)
        if self._state().get("created") and self.cluster_name in self._clusters(kind):
            return self._finish(workers, prog)
        if self.cluster_name in self._clusters(kind):
            raise errors.ClusterError(
                f"a kind cluster named {self.cluster_name!r} already exists but gpulab did not create it",
                hint=f"delete it with `kind delete cluster --name {self.cluster_name}`, or use it as it is with "
                "`gpulab up --backend attach --kubeconfig <its kubeconfig>`")
        self._save_fleet(fl)
        self._save({**self._state(), "backend": "kind", "kind_cluster": self.cluster_name, "fleet": fl.name,
                    "kind_version": versions.KIND_VERSION, "node_image": versions.KIND_NODE_IMAGE, "created": False})
        self.config_path().write_text(kindconfig.render(kindconfig.config(fl, self.cluster_name)))
        # A fresh cluster that fails leaves no state dir behind, so its kind log is kept next to it.
        keep_log = self.failed_log() if fresh and not retain else self.log_dir / "kind-create.log"
        try:
            self._create(kind, prog, retain, keep_log)
            return self._finish(workers, prog)
        except BaseException:
            if not retain:
                log.warning("bring-up failed; deleting the half-built kind cluster (use --retain to keep it)")
                self._delete_quietly(kind)
                if fresh:
                    if (self.log_dir / "kind-create.log").exists():
                        shutil.copy2(self.log_dir / "kind-create.log", keep_log)
                    self.purge_state()
            raise

    def failed_log(self) -> Path:
        """Where the kind output of a failed first bring-up is kept once its state dir is gone."""
        return self.dir.parent / f"{self.cluster_name}.kind-create-failed.log"

    def _step_fleet(self, fl: fleet_mod.Fleet | None) -> fleet_mod.Fleet:
        saved = self.dir / "fleet.yaml"
        if not saved.exists():
            return fl or fleet_mod.load("starter")
        current = fleet_mod.load(str(saved))
        if fl is not None and fl.name != current.name:
            raise errors.ClusterError(f"the kind cluster was made for fleet {current.name!r}, not {fl.name!r}",
                                      hint=f"gpulab down --purge, then gpulab up --backend kind --fleet {fl.name}")
        return current

    def _save_fleet(self, fl: fleet_mod.Fleet) -> None:
        self.claim()
        (self.dir / "fleet.yaml").write_text(fleet_mod.dump(fl))

    def _clusters(self, kind: Path) -> list[str]:
        # Not through _kind: kind says "No kind clusters found." on stderr, which must not read as a name.
        cmd = [str(kind), "get", "clusters"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False,
                              env=dict(os.environ, KIND_EXPERIMENTAL_PROVIDER="docker"))
        if proc.returncode != 0:
            raise errors.CommandFailed(cmd, proc.returncode, proc.stderr + proc.stdout, hint="docker ps")
        return proc.stdout.split()

    def _create(self, kind: Path, prog: progress_mod.Progress, retain: bool, log_path: Path) -> None:
        args = ["create", "cluster", "--name", self.cluster_name, "--config", str(self.config_path()),
                "--kubeconfig", str(self.kubeconfig()), "--wait", WAIT]
        if retain:
            args.append("--retain")
        prog.start(f"creating kind cluster {self.cluster_name!r} ({versions.KIND_NODE_IMAGE})")
        try:
            self._kind(kind, args, "kind-create", prog, timeout=CREATE_TIMEOUT)
        except errors.CommandFailed as exc:
            raise errors.ClusterError(
                f"kind could not create cluster {self.cluster_name!r} (exit {exc.returncode}):\n"
                + _tail(exc.output),
                hint=f"see {log_path}; `gpulab up --backend kind --retain` keeps the "
                f"node containers for `docker logs {self.cluster_name}-control-plane`") from exc
        prog.finish()
        self._save({**self._state(), "created": True})

    def _finish(self, workers: list[kindconfig.Worker], prog: progress_mod.Progress) -> ClusterStatus:
        prog.start(f"labelling and tainting {len(workers)} workers as the fleet's nodes", len(workers))
        with Client.from_kubeconfig(self.kubeconfig()) as client:
            self.apply_fleet_nodes(client, workers, prog)
            prog.finish()
            self._save({**self._state(), "nodes": {w.fleet_node: w.kind_node for w in workers}})
            ops.ensure_tenant_rbac(client)
            prog.start(f"waiting for {len(workers)} workers to be Ready")
            ops.wait_nodes_ready(client, {w.kind_node for w in workers}, timeout=NODES_READY_TIMEOUT)
            prog.finish()
        return self.status()

    def apply_fleet_nodes(self, client: Client, workers: list[kindconfig.Worker],
                          prog: progress_mod.Progress | None = None) -> None:
        """Give each kind worker its fleet node's labels, annotation, taints and extended resources (idempotent)."""
        for w in workers:
            self._apply(client, w)
            if prog:
                prog.advance(detail=f"{w.kind_node} = {w.fleet_node}")

    def _apply(self, client: Client, w: kindconfig.Worker) -> None:
        path = f"/api/v1/nodes/{w.kind_node}"
        for attempt in range(5):
            try:
                current = client.get(path)
            except errors.NotFound as exc:
                raise errors.ClusterError(
                    f"kind worker {w.kind_node} (fleet node {w.fleet_node}) has not registered with the API server",
                    hint=f"docker logs {w.kind_node}; then gpulab down --purge and gpulab up --backend kind") from exc
            got = current["metadata"].get("labels", {}).get(kindconfig.FLEET_NODE_LABEL)
            if got != w.fleet_node:
                raise errors.ClusterError(
                    f"kind node {w.kind_node} carries {kindconfig.FLEET_NODE_LABEL}={got!r}, expected {w.fleet_node!r}",
                    hint=f"the cluster does not match {self.config_path()}; gpulab down --purge, then gpulab up")
            try:
                client.patch(path, kindconfig.metadata_patch(w, current))
                break
            except errors.Conflict:
                if attempt == 4:
                    raise
        status = kindconfig.status_patch(w)
        if status:
            client.patch(f"{path}/status", status)

    # --- status, down, logs, tenants --------------------------------------------------------------------

    def status(self) -> ClusterStatus:
        state = self._state()
        if not state:
            return ClusterStatus("kind", False, None, None,
                                 problems=["no kind cluster (run `gpulab up --backend kind`)"])
        if not state.get("created"):
            return ClusterStatus("kind", False, None, str(self.kubeconfig()), fleet=state.get("fleet"),
                                 problems=[f"kind cluster {self.cluster_name!r} is not running (run `gpulab up`)"])
        problems: list[str] = []
        server = None
        found = []
        try:
            with Client.from_kubeconfig(self.kubeconfig(), timeout=5) as client:
                server = client.conn.server
                found = ops.list_nodes(client)
        except errors.CourseError as exc:
            problems.append(f"API server not answering: {exc.message} (is Docker running? "
                            f"`docker ps --filter label=io.x-k8s.kind.cluster={self.cluster_name}`)")
        names = {n.name for n in found}
        mapping: dict[str, str] = state.get("nodes", {})
        if found:
            problems += [f"fleet node {f} ({k}) is missing" for f, k in sorted(mapping.items()) if k not in names]
        problems += [f"node {n.name} is NotReady" for n in found if not n.ready]
        return ClusterStatus("kind", True, server, str(self.kubeconfig()), [], found, state.get("fleet"), problems)

    def down(self, *, purge: bool = False) -> None:
        """Delete the kind cluster (kind cannot stop one and keep its objects); ``purge`` also forgets its state."""
        if self._state().get("created"):
            kind = self.preflight()
            self._kind(kind, ["delete", "cluster", "--name", self.cluster_name, "--kubeconfig", str(self.kubeconfig())],
                       "kind-delete")
            self._save({**self._state(), "created": False, "nodes": {}})
        if purge:
            self.purge_state()

    def _delete_quietly(self, kind: Path) -> None:
        try:
            self._kind(kind, ["delete", "cluster", "--name", self.cluster_name, "--kubeconfig", str(self.kubeconfig())],
                       "kind-delete")
        except errors.CourseError as exc:
            log.error("could not delete the half-built kind cluster: %s", exc)
        if self.exists():
            self._save({**self._state(), "created": False, "nodes": {}})

    def tenant_kubeconfig(self, namespace: str) -> Path:
        conn = kubeconfig.load(self.kubeconfig())
        if not conn.ca_file:
            raise errors.ClusterError(f"{self.kubeconfig()} has no certificate authority", hint="gpulab up")
        with Client(conn) as client:
            return ops.tenant_kubeconfig(client, namespace, self.dir / "tenants" / f"{namespace}.kubeconfig",
                                         server=conn.server, ca_file=Path(conn.ca_file))

    def collect_logs(self, dest: Path) -> list[Path]:
        """Our own kind logs, plus ``kind export logs`` (every node's journal and pod logs) while it runs."""
        dest.mkdir(parents=True, exist_ok=True)
        for f in sorted(self.log_dir.glob("*.log")):
            shutil.copy2(f, dest / f.name)
        if self._state().get("created"):
            try:
                kind = self.preflight()
                self._kind(kind, ["export", "logs", str(dest / "kind"), "--name", self.cluster_name],
                           "kind-export-logs")
            except errors.CourseError as exc:
                (dest / "kind-export-logs.error").write_text(str(exc))
        return sorted(p for p in dest.rglob("*") if p.is_file())


def _tail(output: str, lines: int = 12) -> str:
    kept = [ln for ln in output.splitlines() if ln.strip()]
    return "\n".join(kept[-lines:])
