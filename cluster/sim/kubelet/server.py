"""The simulated nodes' kubelet endpoint: what the API server calls for ``kubectl logs``, on loopback only.

Each simulated node listens on its own InternalIP (127.1.x.y, ``cluster.sim.nodes``) at the cluster's kubelet
port, over HTTPS with its own serving certificate (``cluster.pki``: signed by the cluster CA, the node's IP in its
SANs, which the API server checks with ``--kubelet-certificate-authority``). As a kubelet with x509
authentication: a client certificate the cluster CA did not sign fails the handshake; a request without one gets
401 ``Unauthorized``; a verified one is then authorized, and only the API server's own identity
(``kube-apiserver-kubelet-client``, its ``--kubelet-client-certificate``) may pass. A real kubelet asks the API
server (a SubjectAccessReview for ``nodes/proxy``); here the API server is the only caller there is, so the answer
is fixed, with the kubelet's 403 wording for anyone else.

Served: ``/healthz``; ``GET /containerLogs/{namespace}/{pod}/{container}`` with the kubelet's query parameters
and messages (``logquery``), read from ``logstore`` and, with ``follow``, followed until the container stops;
``/exec/{namespace}/{pod}/[{uid}/]{container}`` over WebSocket (``remotecommand``), running the command in the
simulated container (``programs``: ``nvidia-smi`` sees the devices the kubelet's checkpoint gave the container).
``/attach``, ``/portForward`` and ``/run`` are refused as a kubelet with debugging handlers turned off refuses
them (405 ``Debug endpoints are disabled.``); a handler for one is added by putting it in ``routes``. Pods and
nodes are looked up in the pod agent's informer caches, as a kubelet looks in its own pod manager.

An exec asked for over SPDY (clients older than kubectl 1.30 ask for nothing else) gets a 400 saying so: only
WebSocket is served.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime, timezone
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster.kube import httpserver, websocket
from cluster.kube.httpserver import Reply, Request
from cluster.sim.gpu import admission, names as gpu_names
from cluster.sim.kubelet import gpuview, logquery, logstore, programs, remotecommand

log = logging.getLogger("gpulab.kubelet")

APISERVER_USER = "kube-apiserver-kubelet-client"  # the CN of cluster.pki's apiserver-kubelet-client certificate
FOLLOW_POLL_SECONDS = 0.2  # a kubelet waits on inotify, and looks at the container at least once a second
DISABLED = ("/run/", "/attach/", "/portForward/", "/runningpods/", "/debug/pprof/", "/logs/")
_PLAIN = "text/plain; charset=utf-8"
_NOSNIFF = (("X-Content-Type-Options", "nosniff"),)

Route = Callable[["NodeRequest"], Awaitable[Reply]]


@dataclass(frozen=True)
class NodeRequest:
    node: str
    request: Request


def _http_error(status: int, text: str) -> Reply:
    """Go's ``http.Error``: the text and a newline, plain text, no sniffing."""
    return Reply(status, (text + "\n").encode(), _PLAIN, _NOSNIFF)


def _restful_error(status: int, text: str) -> Reply:
    """go-restful's ``WriteError``/``WriteErrorString``: the text as it is."""
    return Reply(status, text.encode(), _PLAIN)


def subresources(path: str) -> list[str]:
    """The ``nodes`` subresources a kubelet authorizes a path against (``GetRequestAttributes``, 1.36, with
    ``KubeletFineGrainedAuthz`` GA)."""
    def under(prefix: str) -> bool:
        return path == prefix.rstrip("/") or path.startswith(prefix.rstrip("/") + "/")
    out = []
    for prefix, sub in (("/pods", "pods"), ("/healthz", "healthz"), ("/configz", "configz"), ("/runningpods", "pods")):
        if under(prefix):
            out.append(sub)
            break
    for prefix, sub in (("/stats", "stats"), ("/metrics", "metrics"), ("/logs", "log"), ("/checkpoint", "checkpoint"),
                        ("/statusz", "statusz"), ("/flagz", "configz")):
        if under(prefix):
            out.append(sub)
            break
    else:
        out.append("proxy")
    return out


_VERBS = {"POST": "create", "GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def authorize(req: Request) -> Reply | None:
    """The kubelet's auth filter: None to go on, or the 401/403 reply."""
    if req.client is None:
        return _restful_error(401, "Unauthorized")
    if req.client.common_name == APISERVER_USER:
        return None
    subs = " ".join(subresources(req.path))
    return _restful_error(403, f"Forbidden (user={req.client.common_name}, verb={_VERBS.get(req.method, '')}, "
                               f"resource=nodes, subresource(s)=[{subs}])\n")


def container_spec(pod: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    spec = pod.get("spec", {})
    for key in ("containers", "initContainers", "ephemeralContainers"):
        for c in spec.get(key) or []:
            if c.get("name") == name:
                return dict(c)
    return None


def _container_status(pod: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    status = pod.get("status", {})
    for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        for cs in status.get(key) or []:
            if cs.get("name") == name:
                return dict(cs)
    return None


def log_container_id(pod: Mapping[str, Any], name: str, previous: bool) -> str:
    """The container whose log to read (``validateContainerLogStatus``), or ``LookupError`` with the kubelet's
    message."""
    pod_name = pod["metadata"]["name"]
    cs = _container_status(pod, name)
    if cs is None:
        raise LookupError(f'container "{name}" in pod "{pod_name}" is not available')
    last = (cs.get("lastState") or {}).get("terminated")
    state = cs.get("state") or {}
    if previous:
        if not last or not last.get("containerID"):
            raise LookupError(f'previous terminated container "{name}" in pod "{pod_name}" not found')
        return str(last["containerID"])
    if "running" in state:
        return str(cs.get("containerID", ""))
    if "terminated" in state:
        cid = state["terminated"].get("containerID") or (last or {}).get("containerID")
        if not cid:
            raise LookupError(f'container "{name}" in pod "{pod_name}" is terminated')
        return str(cid)
    if last:
        if not last.get("containerID"):
            raise LookupError(f'container "{name}" in pod "{pod_name}" is terminated')
        return str(last["containerID"])
    if "waiting" in state:
        reason = (state["waiting"] or {}).get("reason", "")
        if reason == "ErrImagePull":
            reason = "image can't be pulled"
        elif reason == "ImagePullBackOff":
            reason = "trying and failing to pull image"
        raise LookupError(f'container "{name}" in pod "{pod_name}" is waiting to start: {reason}')
    raise LookupError(f'container "{name}" in pod "{pod_name}" is waiting to start - no logs yet')


def is_running(pod: Mapping[str, Any] | None, name: str, cid: str) -> bool:
    """Whether the container instance ``cid`` runs now (what a follow waits on)."""
    cs = _container_status(pod, name) if pod else None
    return bool(cs and "running" in (cs.get("state") or {}) and cs.get("containerID") == cid)


class KubeletServer:
    """Every simulated node's kubelet endpoint, in one process, over one shared pod cache and log store."""

    def __init__(self, pods: Mapping[str, dict[str, Any]], store: logstore.LogStore, *, port: int,
                 pki_dir: Path, client_ca: Path, nodes: Mapping[str, dict[str, Any]] | None = None,
                 devices: Any = None) -> None:
        self.pods = pods
        self.nodes = nodes if nodes is not None else {}
        self.devices = devices  # the device manager's checkpoint (``cluster.sim.checkpoint``): ``entries(uid)``
        self.store = store
        self.port = port
        self.pki_dir = pki_dir
        self.client_ca = client_ca
        self.routes: dict[str, Route] = {"/healthz": self.healthz, "/containerLogs/": self.container_logs,
                                         "/exec/": self.exec}
        for prefix in DISABLED:
            self.routes[prefix] = self.disabled
        self._servers: list[asyncio.AbstractServer] = []

    # --- serving ------------------------------------------------------------------------------------------------

    async def start(self, nodes: list[tuple[str, str]]) -> int:
        """Listen on each (node name, InternalIP); returns how many listen. A node whose certificate is missing or
        whose address:port is taken is logged and left out: the rest of the cluster works without its logs."""
        for i, (name, ip) in enumerate(nodes):
            try:
                ctx = httpserver.tls_context(self.pki_dir / f"{name}.pem", self.client_ca)
                self._servers.append(await httpserver.listen(ip, self.port, ctx, self._handler(name)))
            except (OSError, ValueError) as exc:
                log.error("kubelet endpoint of %s on %s:%d not started: %s", name, ip, self.port, exc)
            if i % 50 == 49:
                await asyncio.sleep(0)  # thousands of TLS contexts take a while: let heartbeats through
        log.info("kubelet endpoints listening for %d of %d nodes on port %d", len(self._servers), len(nodes),
                 self.port)
        return len(self._servers)

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for server in self._servers:
            await server.wait_closed()
        self._servers = []

    async def run(self, nodes: list[tuple[str, str]]) -> None:
        """Serve until cancelled."""
        await self.start(nodes)
        try:
            await asyncio.Event().wait()
        finally:
            await self.close()

    def _handler(self, node: str) -> httpserver.Handler:
        async def handle(req: Request) -> Reply:
            refused = authorize(req)
            if refused is not None:
                return refused
            for prefix, route in self.routes.items():
                if req.path == prefix.rstrip("/") or req.path.startswith(prefix.rstrip("/") + "/"):
                    return await route(NodeRequest(node, req))
            return _http_error(404, "404 page not found")
        return handle

    # --- handlers -----------------------------------------------------------------------------------------------

    async def healthz(self, nreq: NodeRequest) -> Reply:
        return Reply(200, b"ok", _PLAIN, _NOSNIFF)

    async def disabled(self, nreq: NodeRequest) -> Reply:
        return _http_error(405, "Debug endpoints are disabled.")

    def pod(self, node: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod as this node's kubelet knows it: bound to the node (``GetPodByName``)."""
        pod = self.pods.get(f"{namespace}/{name}")
        return pod if pod is not None and pod.get("spec", {}).get("nodeName") == node else None

    async def container_logs(self, nreq: NodeRequest) -> Reply:
        req = nreq.request
        parts = req.path.split("/")[2:]
        if len(parts) != 3 or not all(parts):
            return _http_error(404, "404 page not found")
        if req.method != "GET":
            return Reply(405, b"Method Not Allowed", _PLAIN, (("Allow", "GET"),))
        namespace, pod_name, container = parts
        try:
            opts = logquery.decode(req.query)
        except logquery.QueryError as exc:
            return _restful_error(exc.status, exc.body)
        pod = self.pod(nreq.node, namespace, pod_name)
        if pod is None:
            return _restful_error(404, f'pod "{pod_name}" does not exist')
        if container_spec(pod, container) is None:
            return _restful_error(404, f'container "{container}" not found in pod "{pod_name}"')
        refusal = logquery.stream_refusal(opts)
        if refusal:
            return _restful_error(400, refusal)
        try:
            cid = log_container_id(pod, container, opts.previous)
        except LookupError as exc:
            return _restful_error(400, str(exc.args[0]))
        # From here on a kubelet has sent its 200 (an empty write flushes it): a later failure is written into the
        # log stream itself, as the kubelet's WriteError after the flush does.
        return Reply(200, content_type=_PLAIN, stream=self._log_stream(nreq.node, pod, container, cid, opts))

    async def _log_stream(self, node: str, pod: dict[str, Any], container: str, cid: str,
                          opts: logquery.LogOptions) -> AsyncIterator[bytes]:
        meta = pod["metadata"]
        newest = max(int((_container_status(pod, container) or {}).get("restartCount", 0)), 0)
        restart = logstore.restart_of(str(meta["uid"]), container, cid, newest + 1)
        if restart is None:
            yield f"unable to retrieve container logs for {cid}".encode()
            return
        ref = logstore.ContainerRef(meta["namespace"], meta["name"], meta["uid"], container, restart)
        data = self.store.read(ref)
        if not opts.follow:
            yield logquery.cut(data, opts, time.time_ns())
            return
        cutter = logquery.Cutter(opts, time.time_ns())
        offset = logquery.tail_start(data, opts.tail_lines)
        while not cutter.done:
            data = self.store.read(ref)
            if len(data) < offset:
                offset = 0  # rotated: the kubelet reopens the new file
            complete = data.rfind(b"\n", offset) + 1
            if complete > offset:
                out = b"".join(cutter.feed(raw) for raw in logquery.split_lines(data[offset:complete]))
                offset = complete
                if out:
                    yield out
                continue
            if not is_running(self.pod(node, meta["namespace"], meta["name"]), container, cid):
                return
            await asyncio.sleep(FOLLOW_POLL_SECONDS)


    # --- exec ---------------------------------------------------------------------------------------------------

    async def exec(self, nreq: NodeRequest) -> Reply:
        """``getExec``: the pod, the running container, then the WebSocket upgrade (``remotecommand``)."""
        req = nreq.request
        parts = req.path.split("/")[2:]
        if len(parts) not in (3, 4) or not all(parts):
            return _http_error(404, "404 page not found")
        if req.method not in ("GET", "POST"):
            return Reply(405, b"Method Not Allowed", _PLAIN, (("Allow", "GET, POST"),))
        namespace, pod_name, container = parts[0], parts[1], parts[-1]
        try:
            opts = remotecommand.options(req.query)
        except remotecommand.OptionsError as exc:
            return _restful_error(400, str(exc))
        pod = self.pod(nreq.node, namespace, pod_name)
        if pod is None or (len(parts) == 4 and parts[2] != pod["metadata"].get("uid")):
            return _restful_error(404, "pod does not exist")
        cs = _container_status(pod, container)
        if cs is None or "running" not in (cs.get("state") or {}):
            return _restful_error(500, f'container not found ("{container}")')
        headers = req.headers
        if "websocket" not in headers.get("upgrade", "").lower():
            return _http_error(400, "unable to upgrade connection: this simulated kubelet serves exec over WebSocket "
                                    "only (kubectl 1.30 or newer), not SPDY")
        if headers.get("sec-websocket-version", "") != "13" or not websocket.valid_key(
                headers.get("sec-websocket-key", "")):
            return Reply(400, b"", _PLAIN)
        protocol = remotecommand.negotiate(headers.get("sec-websocket-protocol", ""))
        if protocol is None:
            return Reply(403, b"", _PLAIN)
        inside = self.container(nreq.node, pod, container)

        async def run(argv: Any) -> programs.Outcome:
            return programs.run(list(argv), inside, datetime.now(timezone.utc))

        reply_headers = [("Upgrade", "websocket"), ("Connection", "Upgrade"),
                         ("Sec-WebSocket-Accept", websocket.accept_key(headers["sec-websocket-key"]))]
        if protocol:
            reply_headers.append(("Sec-WebSocket-Protocol", protocol))
        shell = None
        name = programs.interactive(opts.command)
        if name is not None:
            def run_line(text: str, line: int) -> tuple[programs.Outcome, bool]:
                return programs.script(name, text, inside, datetime.now(timezone.utc), line)
            shell = remotecommand.Shell(name, _prompt(name, pod, container), run_line)
        session = remotecommand.Session(protocol, opts, run, shell)
        return Reply(101, headers=tuple(reply_headers), upgrade=session.serve)

    def container(self, node_name: str, pod: Mapping[str, Any], container: str) -> programs.Container:
        """The simulated container: what its ``nvidia-smi`` sees (nothing when the toolkit injected nothing)."""
        node = self.nodes.get(node_name)
        if node is None:
            return programs.Container(None)
        meta = pod["metadata"]
        driver_ds, driver_ctr = gpu_names.OPERANDS["driver"]
        if meta.get("namespace") == gpu_names.NAMESPACE and container == driver_ctr and \
                any(o.get("name") == driver_ds for o in meta.get("ownerReferences") or []):
            visible: str | None = "all"  # the driver container has the driver itself, and every device node
        else:
            entries = self.devices.entries(str(meta.get("uid", ""))) if self.devices is not None else ()
            visible = admission.visible_devices(pod, container, node, entries)
        return gpuview.container(node, visible)


def _prompt(shell: str, pod: Mapping[str, Any], container: str) -> bytes:
    """The prompt an interactive shell in the container shows: dash's ``# `` (``$ `` for another user); bash's
    Debian/Ubuntu ``/etc/bash.bashrc`` one, ``user@host:dir# ``, with the pod's hostname and the working
    directory, and ``I have no name!`` for a user id without a passwd entry (the usual ``runAsUser``)."""
    spec = pod.get("spec", {})
    ctr = container_spec(pod, container) or {}
    uid = (ctr.get("securityContext") or {}).get("runAsUser", (spec.get("securityContext") or {}).get("runAsUser", 0))
    root = not uid
    if shell == "sh":
        return b"# " if root else b"$ "
    host = spec.get("hostname") or pod["metadata"]["name"]
    where = ctr.get("workingDir") or "/"
    user = "root" if root else "I have no name!"
    return f"{user}@{host}:{where}{'#' if root else '$'} ".encode()
