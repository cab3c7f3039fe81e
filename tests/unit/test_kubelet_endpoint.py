"""A simulated node's kubelet endpoint answers as a kubelet would, on the node's own loopback address and over TLS
with the node's serving certificate: only the API server's client certificate gets in (401 and 403 otherwise, in
the kubelet's words), logs come with the kubelet's checks and messages, a follow streams new lines and ends when the
container stops, and attach and port-forward are refused as by a kubelet with debugging handlers off (exec:
tests/unit/test_kubelet_exec.py)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster import pki as pki_mod
from cluster.sim import pod_agent
from cluster.sim.kubelet import logstore, server
from cluster.supervisor import free_port

NODE, IP = "cpu-0", "127.1.0.1"
UID = "5d1f9f0e-0000-4000-8000-000000000001"


def _pod(name: str = "render", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "lab-01", "uid": UID},
            "spec": {"nodeName": NODE, "containers": [{"name": "main"}], "initContainers": [{"name": "setup"}]},
            "status": status}


def _running(restart: int = 0, last: bool = False) -> dict[str, Any]:
    cs: dict[str, Any] = {"name": "main", "state": {"running": {}}, "restartCount": restart,
                          "containerID": pod_agent.runtime_id(UID, "main", restart)}
    if last:
        cs["lastState"] = {"terminated": {"exitCode": 1, "containerID": pod_agent.runtime_id(UID, "main", restart - 1)}}
    return cs


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> pki_mod.Pki:
    return pki_mod.ensure(tmp_path_factory.mktemp("pki"), [(NODE, IP)])


class Node:
    def __init__(self, pki: pki_mod.Pki, root: Path) -> None:
        self.pki = pki
        self.pods: dict[str, dict[str, Any]] = {}
        self.store = logstore.LogStore(root)
        self.port = free_port(host=IP)
        self.kubelet = server.KubeletServer(self.pods, self.store, port=self.port, pki_dir=pki.kubelet_dir,
                                            client_ca=pki.ca_cert)

    def context(self, who: str | None = "apiserver-kubelet-client") -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        if who:
            ctx.load_cert_chain(str(self.pki.client_cert(who)), str(self.pki.client_key(who)))
        return ctx

    async def stream(self, path: str, who: str | None = "apiserver-kubelet-client",
                     ctx: ssl.SSLContext | None = None) -> AsyncIterator[bytes]:
        """The raw reply, as it arrives. The certificate is checked against the node's IP, as the API server does."""
        reader, writer = await asyncio.open_connection(IP, self.port, ssl=ctx or self.context(who), server_hostname=IP)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {IP}\r\n\r\n".encode())
        try:
            while chunk := await reader.read(65536):
                yield chunk
        finally:
            writer.close()

    async def get(self, path: str, who: str | None = "apiserver-kubelet-client") -> tuple[int, bytes]:
        raw = b"".join([c async for c in self.stream(path, who)])
        head, _, body = raw.partition(b"\r\n\r\n")
        if b"transfer-encoding: chunked" in head.lower():
            body = _dechunk(body)
        return int(head.split(b" ")[1]), body


def _dechunk(body: bytes) -> bytes:
    out = b""
    while body:
        size, _, rest = body.partition(b"\r\n")
        n = int(size, 16)
        out, body = out + rest[:n], rest[n + 2:]
        if n == 0:
            break
    return out


@pytest.fixture
def node(pki: pki_mod.Pki, tmp_path: Path) -> Iterator[Node]:
    yield Node(pki, tmp_path)


def _run(node: Node, test: Any) -> Any:
    async def main() -> Any:
        await node.kubelet.start([(NODE, IP)])
        try:
            return await test()
        finally:
            await node.kubelet.close()
    return asyncio.run(main())


def test_only_the_api_servers_certificate_gets_in(node: Node) -> None:
    async def test() -> None:
        assert await node.get("/healthz", who=None) == (401, b"Unauthorized")
        assert await node.get("/containerLogs/lab-01/render/main", who="admin") == (
            403, b"Forbidden (user=gpulab-admin, verb=get, resource=nodes, subresource(s)=[proxy])\n")
        assert await node.get("/healthz", who="agent") == (
            403, b"Forbidden (user=gpulab:sim-agent, verb=get, resource=nodes, subresource(s)=[healthz proxy])\n")
        assert await node.get("/healthz") == (200, b"ok")
    _run(node, test)


def test_a_certificate_of_another_ca_fails_the_handshake(node: Node, tmp_path: Path) -> None:
    stranger = pki_mod.ensure(tmp_path / "stranger")
    ctx = ssl.create_default_context(cafile=str(node.pki.ca_cert))
    ctx.load_cert_chain(str(stranger.client_cert("apiserver-kubelet-client")),
                        str(stranger.client_key("apiserver-kubelet-client")))

    async def test() -> bytes:
        got = b""
        try:
            async for chunk in node.stream("/healthz", ctx=ctx):
                got += chunk
        except (ssl.SSLError, ConnectionError):
            pass  # TLS 1.2 says so in the handshake; with TLS 1.3 the server's alert ends the connection
        return got
    assert _run(node, test) == b""  # no HTTP reply at all


def test_the_serving_certificate_names_the_node_and_its_address(node: Node) -> None:
    async def test() -> dict[str, Any]:
        reader, writer = await asyncio.open_connection(IP, node.port, ssl=node.context(), server_hostname=IP)
        cert = writer.get_extra_info("peercert")
        writer.close()
        return dict(cert)
    cert = _run(node, test)
    assert (("commonName", f"system:node:{NODE}"),) in cert["subject"]
    assert ("IP Address", IP) in cert["subjectAltName"] and ("DNS", NODE) in cert["subjectAltName"]


@pytest.mark.parametrize("path", ["/attach/lab-01/render/main",
                                  "/portForward/lab-01/render", "/run/lab-01/render/main"])
def test_streaming_endpoints_are_refused_as_with_debugging_handlers_off(node: Node, path: str) -> None:
    assert _run(node, lambda: node.get(path)) == (405, b"Debug endpoints are disabled.\n")


def test_log_requests_get_the_kubelets_refusals_in_its_order(node: Node) -> None:
    node.pods["lab-01/render"] = _pod(containerStatuses=[_running()])
    node.pods["lab-01/elsewhere"] = dict(_pod("elsewhere"), spec={"nodeName": "t4-0", "containers": []})
    node.pods["lab-01/waiting"] = _pod("waiting", containerStatuses=[
        {"name": "main", "state": {"waiting": {"reason": "ContainerCreating"}}, "restartCount": 0}])
    node.pods["lab-01/pending"] = _pod("pending")

    async def test() -> None:
        base = "/containerLogs/lab-01"
        assert await node.get(f"{base}/render/main?tailLines=x") == (400, b'{"message": "Unable to decode query."}')
        assert await node.get(f"{base}/render/main?limitBytes=0") == (422, b'{"message": "Invalid request."}')
        assert await node.get(f"{base}/missing/main") == (404, b'pod "missing" does not exist')
        assert await node.get(f"{base}/elsewhere/main") == (404, b'pod "elsewhere" does not exist')  # not this node
        assert await node.get(f"{base}/render/nope") == (404, b'container "nope" not found in pod "render"')
        assert (await node.get(f"{base}/render/main?stream=Stderr"))[0] == 400
        assert await node.get(f"{base}/render/main?previous=true") == (
            400, b'previous terminated container "main" in pod "render" not found')
        assert await node.get(f"{base}/render/setup") == (400, b'container "setup" in pod "render" is not available')
        assert await node.get(f"{base}/waiting/main") == (
            400, b'container "main" in pod "waiting" is waiting to start: ContainerCreating')
        assert await node.get(f"{base}/pending/main") == (400, b'container "main" in pod "pending" is not available')
        assert await node.get(f"{base}/render") == (404, b"404 page not found\n")
    _run(node, test)


def test_logs_and_previous_logs_are_read_by_container_instance(node: Node) -> None:
    node.pods["lab-01/render"] = _pod(containerStatuses=[_running(restart=1, last=True)])
    ref = logstore.ContainerRef("lab-01", "render", UID, "main")
    node.store.write(ref, "from the first run\nits last words")
    node.store.write(ref.instance(1), "from the second run")

    async def test() -> None:
        base = "/containerLogs/lab-01/render/main"
        assert await node.get(base) == (200, b"from the second run\n")
        assert await node.get(f"{base}?previous=true&tailLines=1") == (200, b"its last words\n")
        assert await node.get(f"{base}?previous=true&limitBytes=4") == (200, b"from")
    _run(node, test)


def test_a_log_of_a_container_id_that_is_not_ours_says_so_in_the_stream(node: Node) -> None:
    node.pods["lab-01/render"] = _pod(containerStatuses=[dict(_running(), containerID="containerd://feed")])
    assert _run(node, lambda: node.get("/containerLogs/lab-01/render/main")) == (
        200, b"unable to retrieve container logs for containerd://feed")


def test_follow_streams_new_lines_and_ends_when_the_container_stops(node: Node) -> None:
    node.pods["lab-01/render"] = _pod(containerStatuses=[_running()])
    ref = logstore.ContainerRef("lab-01", "render", UID, "main")
    node.store.write(ref, "before")

    async def test() -> bytes:
        got = b""
        stream = node.stream("/containerLogs/lab-01/render/main?follow=true")
        async for chunk in stream:
            got += chunk
            if got.endswith(b"before\n\r\n"):
                node.store.write(ref, "after")  # written as another process would: to the file
            if b"after" in got:
                break
        # The container stops: the follow ends by itself, with the chunked reply's end.
        node.pods["lab-01/render"] = _pod(containerStatuses=[dict(_running(), state={"terminated": {}})])
        async for chunk in stream:
            got += chunk
        return got
    raw = asyncio.run(asyncio.wait_for(_run_async(node, test), 20))
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK") and b"Transfer-Encoding: chunked" in head
    assert _dechunk(body) == b"before\nafter\n" and body.endswith(b"0\r\n\r\n")


async def _run_async(node: Node, test: Any) -> Any:
    await node.kubelet.start([(NODE, IP)])
    try:
        return await test()
    finally:
        await node.kubelet.close()


def test_a_node_without_its_certificate_is_left_out_and_the_others_listen(node: Node) -> None:
    async def main() -> int:
        try:
            return await node.kubelet.start([("no-such-node", "127.1.0.9"), (NODE, IP)])
        finally:
            await node.kubelet.close()
    assert asyncio.run(main()) == 1


def test_serving_certificates_are_kept_per_node_and_renewed_when_an_address_changes(tmp_path: Path) -> None:
    made = pki_mod.ensure(tmp_path, [(NODE, IP), ("t4-0", "127.1.0.2")])
    assert "kubelet-serving" in made.renewed
    assert sorted(p.name for p in made.kubelet_dir.iterdir()) == ["cpu-0.pem", "t4-0.pem"]
    assert oct(made.kubelet_dir.stat().st_mode & 0o777) == "0o700"
    assert "kubelet-serving" not in pki_mod.ensure(tmp_path, [(NODE, IP), ("t4-0", "127.1.0.2")]).renewed
    before = made.kubelet_serving("t4-0").read_bytes()
    assert "kubelet-serving" in pki_mod.ensure(tmp_path, [(NODE, IP), ("t4-0", "127.1.0.7")]).renewed
    assert made.kubelet_serving("t4-0").read_bytes() != before
    assert made.kubelet_serving(NODE).read_bytes() != b"" and "kubelet-serving" in pki_mod.expiry(tmp_path)
