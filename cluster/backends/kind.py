"""The ``kind`` backend: a real cluster of Docker containers (kind), one worker per simulated node of the fleet.

Unlike ``local``, the kubelets are real, so pods really run. The GPUs stay simulated: each worker gets the fleet
node's labels, taints and ``gpulab.dev/hardware`` annotation, and the simulated GPU stack (operator, device plugin,
MIG manager, DRA driver) runs on the host against kind's API server, as it does on ``local``; our node and pod
agents do not run (the kubelets are real). Bring-up is ordered steps (``steps()``: fleet, plan, tools, config,
``kind create cluster``, fleet nodes, wait, GPU stack); a failed bring-up deletes the half-built cluster unless
``retain`` is set. This module runs the kind CLI and talks to the API; it never calls docker itself except to ask
whether the daemon answers and, when a deletion fails, which containers are this cluster's nodes.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from cluster import errors, fleet as fleet_mod, gobuild, ops, progress as progress_mod, settings, staterecord, versions
from cluster.backends import kindconfig, kindthaw, kindtool, steps as steps_mod
from cluster.backends.base import ClusterStatus, ComponentStatus, StateDir
from cluster.kube import kubeconfig
from cluster.kube.client import Client
from cluster.sim.kubelet import logsocket, smisocket
from cluster.supervisor import Supervisor

log = logging.getLogger(__name__)

WAIT = "120s"
CREATE_TIMEOUT = 1800.0  # the first run pulls a node image of about 1 GB
NODES_READY_TIMEOUT = 180.0
# What a real kubelet on kind cannot do that the local backend's pod agent does in the kubelet's place: capability
# -> why, as the learner is told beside a check that needs it (docs/kind.md, "What a kind kubelet cannot do"). The
# backend says only what it lacks; which check of which lab needs what is in that lab's lab.yaml
# (``spec.backends.kind``, read by labs.loader), with ``{then}`` filled in from there.
_DRA = ("kind backend difference: a real kubelet prepares a pod's ResourceClaims through the DRA driver's "
        "kubelet plugin (NodePrepareResources, over a socket on the node: kubelet pkg/kubelet/cm/dra); gpulab's DRA "
        "driver runs on your machine and registers no kubelet plugin, so on kind the pod stays ContainerCreating "
        "(FailedPrepareDynamicResources) after the scheduler allocated its claim; on local the pod agent plays "
        "that plugin and the pod runs")
_TOPOLOGY = ("kind backend difference: the Topology Manager aligns a pod's devices with the NUMA affinity its "
             "device plugin reports (GetPreferredAllocation and TopologyInfo; kubelet pkg/kubelet/cm/topologymanager "
             "and devicemanager/topology_hints.go) under the policy of the kubelet's configuration; gpulab's node "
             "plugin on kind reports no NUMA affinity and kind's kubelets run the default policy none, so the kubelet "
             "admits {then}; on local the pod agent plays the kubelet's admission under the node's "
             "gpulab.dev/topology-manager-policy label and refuses such a pod with TopologyAffinityError")
_NO_ANNOTATION = ("kind backend difference: the kubelet allocates the instance through gpulab's node plugin, which "
                  "starts the container with NVIDIA_VISIBLE_DEVICES naming it, as NVIDIA's plugin does "
                  "(k8s-device-plugin internal/plugin/server.go; kubelet pkg/kubelet/cm/devicemanager); the kubelet "
                  "keeps that allocation to itself (its checkpoint on the node), so the pod gets no "
                  "gpulab.dev/devices annotation, which on local the pod agent writes as that allocation")
LACKS: dict[str, str] = {
    "dra-kubelet-plugin": _DRA,
    "topology-manager-admission": _TOPOLOGY,
    "devices-annotation": _NO_ANNOTATION,
}


def lacks(capability: str, then: str = "") -> str:
    """Why a kind kubelet cannot do ``capability`` (one of ``LACKS``), with a lab's ``then`` filled in."""
    return LACKS[capability].format(then=then)


def needs_then(capability: str) -> bool:
    """Whether the reason for ``capability`` has a ``{then}`` that a lab must fill in."""
    return "{then}" in LACKS[capability]


def runs_on_kind(client: Client) -> bool:
    """Whether the cluster behind ``client`` is a kind cluster: kind's kubelets set ``spec.providerID`` to
    ``kind://<provider>/<cluster>/<container>`` (kind's kubeadm config), simulated nodes have none."""
    nodes = client.get("/api/v1/nodes", limit=1).get("items") or []
    return bool(nodes) and str(nodes[0].get("spec", {}).get("providerID", "")).startswith("kind://")


_NO_DOCKER_HINT = ("install Docker (https://docs.docker.com/get-docker/) and start it, then run "
                   "`gpulab up --backend kind` again; without Docker, `gpulab up --backend local` needs nothing else")


class KindBackend(StateDir):
    name = "kind"

    def __init__(self, cluster_name: str = "gpulab", root: Path | None = None) -> None:
        super().__init__(cluster_name, root)
        self.sup = Supervisor(self.dir)  # the host-side processes: the simulated GPU stack

    def config_path(self) -> Path:
        return self.dir / "kind-config.yaml"

    def devices_dir(self) -> Path:
        """Each node's devices file (``<node>/devices.json``), written by the GPU stack, read by the node plugin."""
        return self.dir / "devices"

    def pod_logs_dir(self) -> Path:
        """The GPU stack's container log lines (the kubelet's /var/log/pods layout), served to the nodes'
        containers over each node's log socket (``cluster.sim.kubelet.logsocket``)."""
        return self.dir / "pod-logs"

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

    def steps(self) -> list[steps_mod.Step]:
        """The bring-up, in order: one small step per concern (the fleet step is local's too; the GPU stack step
        is kind's alone, local runs the stack inside its sim-agents process)."""
        found = _Found()
        return [steps_mod.FleetStep("kind", "gpulab up --backend kind"), _Plan(self, found), _Tools(self, found),
                _NodePlugin(self, found), _Config(self, found), _Create(self, found), _FleetNodes(self, found),
                _WaitNodes(self, found), steps_mod.GpuStackStep(self.sup, self.kubeconfig(), None, self.devices_dir(),
                                                                self.pod_logs_dir())]

    def up(self, fl: fleet_mod.Fleet | None, prog: progress_mod.Progress, *, retain: bool = False) -> ClusterStatus:
        # One command at a time works on the state folder, as on local: a second `up` waits for the first.
        with self.locked("gpulab up --backend kind"):
            fresh = not self.exists()
            ctx = steps_mod.Context(self, prog, fl, record=self.record(), fresh=fresh, retain=retain)
            steps_mod.bring_up(self.steps(), ctx, fresh=fresh, retain=retain, teardown=self._teardown_failed)
        return self.status()

    def _teardown_failed(self) -> None:
        """Delete the half-built kind cluster and forget its state; its kind log is kept next to the state dir."""
        self.sup.stop_all([steps_mod.GPU_STACK])
        kind = kindtool.find()
        if kind is not None and (rec := self.record()) is not None and rec.kind_cluster:
            self._delete_quietly(kind)
        if (self.log_dir / "kind-create.log").exists():
            shutil.copy2(self.log_dir / "kind-create.log", self.failed_log())
        if os.path.lexists(self.dir):
            self.purge_state()

    def prepare(self, prog: progress_mod.Progress) -> str:
        """The pinned kind binary (built once from the Go module proxy when missing)."""
        return f"kind: {kindtool.ensure_kind(prog)}"

    def doctor(self) -> list[tuple[str, str, str]]:
        kind_path = kindtool.find()
        return [("docker (kind backend)", shutil.which("docker") or "absent", ""),
                (f"kind {versions.KIND_VERSION}", str(kind_path) if kind_path else "absent",
                 "" if kind_path else "built on first `gpulab up --backend kind`")]

    def failed_log(self) -> Path:
        """Where the kind output of a failed first bring-up is kept once its state dir is gone."""
        return self.dir.parent / f"{self.cluster_name}.kind-create-failed.log"

    def _clusters(self, kind: Path) -> list[str]:
        # Not through _kind: kind says "No kind clusters found." on stderr, which must not read as a name.
        cmd = [str(kind), "get", "clusters"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False,
                              env=dict(os.environ, KIND_EXPERIMENTAL_PROVIDER="docker"))
        if proc.returncode != 0:
            raise errors.CommandFailed(cmd, proc.returncode, proc.stderr + proc.stdout, hint="docker ps")
        return proc.stdout.split()

    def apply_fleet_nodes(self, client: Client, workers: list[kindconfig.Worker],
                          prog: progress_mod.Progress | None = None) -> None:
        """Give each kind worker its fleet node's labels, annotation and taints (idempotent); its extended
        resources are its kubelet's, from gpulab's node plugin."""
        for w in workers:
            self._apply(client, w)
            if prog:
                prog.advance(detail=f"{w.kind_node} = {w.fleet_node}")

    def _apply(self, client: Client, w: kindconfig.Worker) -> None:
        path = f"/api/v1/nodes/{w.fleet_node}"
        for attempt in range(5):
            try:
                current = client.get(path)
            except errors.NotFound as exc:
                raise errors.ClusterError(
                    f"fleet node {w.fleet_node} (kind container {w.kind_node}) has not registered with the API server",
                    hint=f"docker logs {w.kind_node}; then gpulab down --purge and gpulab up --backend kind") from exc
            got = current["metadata"].get("labels", {}).get(kindconfig.FLEET_NODE_LABEL)
            if got != w.fleet_node:
                raise errors.ClusterError(
                    f"node {w.fleet_node} (kind container {w.kind_node}) carries {kindconfig.FLEET_NODE_LABEL}={got!r}, "
                    f"expected {w.fleet_node!r}",
                    hint=f"the cluster does not match {self.config_path()}; gpulab down --purge, then gpulab up")
            try:
                client.patch(path, kindconfig.metadata_patch(w, current))
                break
            except errors.Conflict:
                if attempt == 4:
                    raise

    # --- status, down, logs, tenants --------------------------------------------------------------------

    def status(self) -> ClusterStatus:
        rec = self.record()
        if rec is None:
            return ClusterStatus("kind", False, None, None,
                                 problems=["no kind cluster (run `gpulab up --backend kind`)"])
        if not rec.created:
            return ClusterStatus("kind", False, None, str(self.kubeconfig()), fleet=rec.fleet,
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
        mapping = rec.nodes
        if found:
            problems += [f"fleet node {f} (kind container {k}) is missing" for f, k in sorted(mapping.items())
                         if f not in names]
        problems += [f"node {n.name} is NotReady" for n in found if not n.ready]
        st = self.sup.state(steps_mod.GPU_STACK)
        comps = [ComponentStatus(steps_mod.GPU_STACK, st.running, st.pid, None if not st.running else True,
                                 "" if st.running else "not running")]
        problems += [f"{c.name} is not running (`gpulab up` starts it)" for c in comps if not c.running]
        return ClusterStatus("kind", True, server, str(self.kubeconfig()), comps, found, rec.fleet, problems)

    def down(self, *, purge: bool = False) -> None:
        """Delete the kind cluster (kind cannot stop one and keep its objects); ``purge`` also forgets its state."""
        if not os.path.lexists(self.dir):  # no state folder: nothing to lock, delete or forget
            self.sup.stop_all([steps_mod.GPU_STACK])
            return
        with self.locked("gpulab down --purge" if purge else "gpulab down"):
            self.sup.stop_all([steps_mod.GPU_STACK])
            if self._created():
                self._delete(self.preflight())
                self.update(created=False, nodes={})
            if purge:
                self.purge_state()

    def _created(self) -> bool:
        """Whether the state records a kind cluster made by gpulab that is there."""
        rec = self.record()
        return rec is not None and rec.created

    def _delete(self, kind: Path) -> None:
        """``kind delete cluster``; once more after thawing the nodes' frozen cgroups when Docker could not kill a
        node (see ``kindthaw``)."""
        args = ["delete", "cluster", "--name", self.cluster_name, "--kubeconfig", str(self.kubeconfig())]
        try:
            self._kind(kind, args, "kind-delete")
        except errors.CommandFailed as exc:
            thawed = kindthaw.thaw(self._node_container_ids())
            if not thawed:
                raise
            log.warning("Docker could not kill a node of %s (%s frozen cgroup(s) inside it, thawed); deleting again",
                        self.cluster_name, thawed)
            self._kind(kind, args, "kind-delete-again")

    def _node_container_ids(self) -> list[str]:
        """The full IDs of this cluster's node containers (kind labels each with its cluster's name)."""
        docker = shutil.which("docker")
        if docker is None:
            return []
        proc = subprocess.run([docker, "ps", "-a", "-q", "--no-trunc", "--filter",
                               f"label=io.x-k8s.kind.cluster={self.cluster_name}"],
                              capture_output=True, text=True, timeout=60, check=False)
        return proc.stdout.split() if proc.returncode == 0 else []

    def _delete_quietly(self, kind: Path) -> None:
        try:
            self._delete(kind)
        except errors.CourseError as exc:
            log.error("could not delete the half-built kind cluster: %s", exc)
        self.update(created=False, nodes={})

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
        if self._created():
            try:
                kind = self.preflight()
                self._kind(kind, ["export", "logs", str(dest / "kind"), "--name", self.cluster_name],
                           "kind-export-logs")
            except errors.CourseError as exc:
                (dest / "kind-export-logs.error").write_text(str(exc))
        return sorted(p for p in dest.rglob("*") if p.is_file())


@dataclass
class _Found:
    """What kind's steps find or make for the later ones in one bring-up (typed, one record per ``steps()``)."""

    workers: list[kindconfig.Worker] | None = None  # _Plan
    kind: Path | None = None  # _Tools: the pinned kind binary
    node_plugin: kindconfig.NodePlugin | None = None  # _NodePlugin
    exists: bool = False  # _Config: a kind cluster of this name is there


class _KindStep:
    def __init__(self, be: KindBackend, found: _Found) -> None:
        self.be = be
        self.found = found

    def _kind(self) -> Path:
        return _needed(self.found.kind, "the kind binary")

    def _workers(self) -> list[kindconfig.Worker]:
        return _needed(self.found.workers, "the worker plan")

    def _node_plugin(self) -> kindconfig.NodePlugin:
        return _needed(self.found.node_plugin, "the node plugin")


_T = TypeVar("_T")


def _needed(value: _T | None, what: str) -> _T:
    if value is None:
        raise errors.ClusterError(f"a kind bring-up step ran before the one that finds {what}",
                                  hint="a bug in gpulab: report it")
    return value


class _Plan(_KindStep):
    """Pair each fleet node with a kind worker; a fleet too big for kind fails here, before Docker is touched."""

    title = "plan workers"

    def run(self, ctx: steps_mod.Context) -> None:
        self.found.workers = kindconfig.plan(ctx.need_fleet(), ctx.backend.cluster_name)


class _Tools(_KindStep):
    """Docker answers, and the pinned kind binary is there (built once when missing)."""

    title = "docker and kind"

    def run(self, ctx: steps_mod.Context) -> None:
        self.found.kind = self.be.preflight(ctx.prog)


def ensure_node_plugin(prog: progress_mod.Progress) -> Path:
    """The node plugin's binary, built when missing (the kind image's set-up builds it, so no test does first).
    Named by its source: built once per source, and a running cluster keeps the binary it mounted."""
    binary = settings.cache_root() / "bin" / "kindplugin" / f"kindplugin-{gobuild.source_key('kindplugin')}"
    if binary.exists():
        return binary
    prog.start("building gpulab's device plugin for the kind nodes")
    try:
        built = gobuild.build_standalone(settings.cache_root(), "kindplugin", prog)
    except errors.BinariesUnavailable as exc:
        raise errors.BackendUnavailable(
            "the kind backend runs gpulab's device plugin in every node, and it could not be built: "
            f"{exc.message}",
            hint="install Go >= 1.26 (https://go.dev/dl/), then run `gpulab up --backend kind` again") from exc
    prog.finish()
    binary.parent.mkdir(parents=True, exist_ok=True)
    tmp = binary.with_suffix(".tmp")
    shutil.copy2(built, tmp)
    tmp.chmod(0o755)
    tmp.replace(binary)
    return binary


class _NodePlugin(_KindStep):
    """gpulab's node plugin (``cluster/gosrc/kindplugin``), built once per source: a static binary every worker
    mounts and runs as a systemd service, registering the simulated GPUs with its real kubelet."""

    title = "node plugin"

    def run(self, ctx: steps_mod.Context) -> None:
        be = self.be
        binary = ensure_node_plugin(ctx.prog)
        units = be.dir / "node-plugin"
        units.mkdir(parents=True, exist_ok=True)
        (units / "gpulab-device-plugin.service").write_text(kindconfig.unit_text())
        (units / "20-gpulab-device-plugin.conf").write_text(kindconfig.drop_in_text())
        (units / "gpulab-base-spec.service").write_text(kindconfig.base_spec_unit_text())
        (units / "20-gpulab-base-spec.conf").write_text(kindconfig.containerd_drop_in_text())
        for w in self._workers():
            # with the folder of its nvidia-smi socket: the plugin mounts it into GPU containers (smisocket); and
            # of its log socket: containerd binds it into every container (logsocket)
            smisocket.socket_dir(be.devices_dir(), w.fleet_node).mkdir(parents=True, exist_ok=True)
            (be.devices_dir() / w.fleet_node / logsocket.DIR_NAME).mkdir(parents=True, exist_ok=True)
        self.found.node_plugin = kindconfig.NodePlugin(binary, units / "gpulab-device-plugin.service",
                                                       units / "20-gpulab-device-plugin.conf", be.devices_dir(),
                                                       units / "gpulab-base-spec.service",
                                                       units / "20-gpulab-base-spec.conf")


class _Config(_KindStep):
    """Record the cluster and write kind's config; a kind cluster of that name that gpulab did not make is refused."""

    title = "kind config"

    def run(self, ctx: steps_mod.Context) -> None:
        be, kind = self.be, self._kind()
        exists = be.cluster_name in be._clusters(kind)
        self.found.exists = exists
        if be._created() and exists:
            return
        if exists:
            raise errors.ClusterError(
                f"a kind cluster named {be.cluster_name!r} already exists but gpulab did not create it",
                hint=f"delete it with `kind delete cluster --name {be.cluster_name}`, or use it as it is with "
                "`gpulab up --backend attach --kubeconfig <its kubeconfig>`")
        fl = ctx.need_fleet()
        old = be.record()
        be.save(staterecord.StateRecord("kind", fleet=fl.name, kind_cluster=be.cluster_name,
                                        kind_version=versions.KIND_VERSION, node_image=versions.KIND_NODE_IMAGE,
                                        created=False, extra=old.extra if old else {}))
        be.config_path().write_text(kindconfig.render(kindconfig.config(fl, be.cluster_name, self._node_plugin())))


class _Create(_KindStep):
    """``kind create cluster`` (skipped when gpulab's cluster is already there)."""

    title = "kind create cluster"

    def run(self, ctx: steps_mod.Context) -> None:
        be, kind = self.be, self._kind()
        if be._created() and self.found.exists:
            return
        retain = ctx.retain
        log_path = be.failed_log() if ctx.fresh and not retain else be.log_dir / "kind-create.log"
        args = ["create", "cluster", "--name", be.cluster_name, "--config", str(be.config_path()),
                "--kubeconfig", str(be.kubeconfig()), "--wait", WAIT]
        if retain:
            args.append("--retain")
        ctx.prog.start(f"creating kind cluster {be.cluster_name!r} ({versions.KIND_NODE_IMAGE})")
        try:
            be._kind(kind, args, "kind-create", ctx.prog, timeout=CREATE_TIMEOUT)
        except errors.CommandFailed as exc:
            if not ctx.fresh and not retain:  # a fresh one is torn down whole by bring_up
                be._delete_quietly(kind)
            raise errors.ClusterError(
                f"kind could not create cluster {be.cluster_name!r} (exit {exc.returncode}):\n" + _tail(exc.output),
                hint=f"see {log_path}; `gpulab up --backend kind --retain` keeps the "
                f"node containers for `docker logs {be.cluster_name}-control-plane`") from exc
        ctx.prog.finish()
        be.update(created=True)


class _FleetNodes(_KindStep):
    """Each worker gets its fleet node's labels, annotation, taints and extended resources; tenant RBAC exists."""

    title = "fleet nodes"

    def run(self, ctx: steps_mod.Context) -> None:
        workers = self._workers()
        ctx.prog.start(f"labelling and tainting {len(workers)} workers as the fleet's nodes", len(workers))
        with Client.from_kubeconfig(self.be.kubeconfig()) as client:
            self.be.apply_fleet_nodes(client, workers, ctx.prog)
            ctx.prog.finish()
            self.be.update(nodes={w.fleet_node: w.kind_node for w in workers})
            ops.ensure_tenant_rbac(client)


class _WaitNodes(_KindStep):
    title = "wait for nodes"

    def run(self, ctx: steps_mod.Context) -> None:
        workers = self._workers()
        ctx.prog.start(f"waiting for {len(workers)} workers to be Ready")
        with Client.from_kubeconfig(self.be.kubeconfig()) as client:
            ops.wait_nodes_ready(client, {w.fleet_node for w in workers}, timeout=NODES_READY_TIMEOUT)
        ctx.prog.finish()


def _tail(output: str, lines: int = 12) -> str:
    kept = [ln for ln in output.splitlines() if ln.strip()]
    return "\n".join(kept[-lines:])
