"""Run a local cluster where every packet that leaves loopback is caught, and report what was caught.

Meant to run as root in fresh network and mount namespaces (``unshare --net --mount``, as
``test_nothing_leaves_loopback.py`` starts it): the namespace has ``lo`` and one more interface, ``egress0``, which
holds the IPv4 and IPv6 default routes. So any packet any process here sends to an address outside 127.0.0.0/8 (or
::1) has nowhere to go but ``egress0``, and arrives at its veth peer ``egress1``, where a raw socket records it.
``egress0`` does no ARP or neighbour discovery, so a packet is sent at once rather than held for an answer that
never comes. ``/etc/resolv.conf`` is replaced (in this mount namespace only) by a name server on ``egress0``'s
network, so a DNS lookup is such a packet too. Only IPv6 link-local multicast (the kernel's own router and
multicast-listener messages for the new interface) is counted apart, as noise.

Then it starts a local cluster in a temporary state folder and does what a lab does: bring-up, the GPU Operator,
a pod, ``kubectl logs`` (plain, ``-f``, a GPU operand's), ``kubectl exec`` (a shell's echo, ``nvidia-smi -L`` in
the device plugin's pod), ``gpulab status``, teardown.
The report (JSON, to the path given) lists every packet caught and what each step saw.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

RESOLVER = "192.0.2.53"  # TEST-NET-1, on egress0's network


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, text=True)


def isolate() -> None:
    sh("ip", "link", "set", "lo", "up")
    sh("ip", "link", "add", "egress0", "type", "veth", "peer", "name", "egress1")
    sh("ip", "link", "set", "egress0", "arp", "off")
    sh("ip", "addr", "add", "192.0.2.1/24", "dev", "egress0")
    sh("ip", "-6", "addr", "add", "2001:db8::1/64", "dev", "egress0", "nodad")
    for dev in ("egress0", "egress1"):
        sh("ip", "link", "set", dev, "up")
    sh("ip", "route", "add", "default", "dev", "egress0")
    sh("ip", "-6", "route", "add", "default", "dev", "egress0")
    resolv = Path(tempfile.mkdtemp(prefix="gpulab-probe-")) / "resolv.conf"
    resolv.write_text(f"nameserver {RESOLVER}\n")
    sh("mount", "--bind", str(resolv), "/etc/resolv.conf")


class Catcher:
    """Every frame that reaches egress1, kept as (protocol, destination, port)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0003))
        self.sock.bind(("egress1", 0))
        self.sock.settimeout(0.2)
        self.caught: list[dict[str, Any]] = []
        self.noise = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                frame = self.sock.recv(65535)
            except TimeoutError:
                continue
            self._record(frame)

    def _record(self, frame: bytes) -> None:
        ethertype = struct.unpack("!H", frame[12:14])[0]
        ip = frame[14:]
        if ethertype == 0x0800:
            header = (ip[0] & 0x0F) * 4
            proto, dst = ip[9], socket.inet_ntop(socket.AF_INET, ip[16:20])
            payload = ip[header:]
        elif ethertype == 0x86DD:
            proto, dst = ip[6], socket.inet_ntop(socket.AF_INET6, ip[24:40])
            payload = ip[40:]
            if dst.startswith("ff02:"):
                self.noise += 1
                return
        else:
            self.caught.append({"ethertype": hex(ethertype)})
            return
        port = struct.unpack("!H", payload[2:4])[0] if proto in (6, 17) and len(payload) >= 4 else None
        self.caught.append({"proto": {6: "tcp", 17: "udp"}.get(proto, str(proto)), "dst": dst, "port": port,
                            "dns": port == 53})

    def stop(self) -> None:
        time.sleep(1.0)  # a packet sent just before is still on its way
        self._stop.set()
        self._thread.join()


def exercise(report: dict[str, Any]) -> None:
    os.environ["GPULAB_STATE_DIR"] = state = tempfile.mkdtemp(prefix="gpulab-probe-state-")
    from cluster import binaries, fleet
    from cluster.backends.local import LocalBackend
    from cluster.progress import LogProgress
    from cluster.sim.gpu import operator
    from cluster.sim.kubelet import logstore
    from cluster.testing import LocalCluster, wait_for

    if binaries.cached() is None:
        report["skip"] = "the control-plane binaries are not cached (gpulab binaries ensure)"
        return
    backend = LocalBackend("gpulab", Path(state))
    backend.up(fleet.load("starter"), LogProgress())
    cluster = LocalCluster(backend, Path(state))
    steps: dict[str, Any] = report["steps"]
    try:
        with cluster.client() as c:
            steps["nodes"] = sorted(n["metadata"]["name"] for n in c.get("/api/v1/nodes")["items"])
            operator.install(c, wait=True, timeout=120)
            plugin = wait_for(lambda: next((p["metadata"]["name"] for p in c.get(
                "/api/v1/namespaces/gpu-operator/pods", fieldSelector="spec.nodeName=h100-0")["items"]
                if p["metadata"]["name"].startswith("nvidia-device-plugin-daemonset")
                and p.get("status", {}).get("phase") == "Running"), None), 60, what="the device plugin on h100-0")
            c.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "probe"}})
            c.create("/api/v1/namespaces/probe/pods", {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "annotations": {"gpulab.dev/run-seconds": "8"}},
                "spec": {"restartPolicy": "Never",
                         "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "8"]}]}})
            pod = wait_for(lambda: (lambda p: p if p.get("status", {}).get("phase") == "Running" else None)(
                c.get("/api/v1/namespaces/probe/pods/p")), 60, what="the probe pod running")
        m = pod["metadata"]
        store = logstore.LogStore(backend.dir / "kubelet" / "pod-logs")
        store.write(logstore.ContainerRef("probe", "p", m["uid"], "main"), "hello from the probe")
        steps["logs"] = cluster.kubectl("logs", "-n", "probe", "p", check=False).stdout
        ran = cluster.kubectl("exec", "-n", "probe", "p", "--", "sh", "-c", "echo from exec", check=False)
        steps["exec"] = ran.stdout + ran.stderr.strip()
        smi = cluster.kubectl("exec", "-n", "gpu-operator", plugin, "-c", "nvidia-device-plugin", "--", "nvidia-smi",
                              "-L", check=False)
        steps["nvidia_smi"] = smi.stdout.count("GPU ") if smi.returncode == 0 else smi.stderr.strip()
        steps["plugin_logs"] = cluster.kubectl("logs", "-n", "gpu-operator", plugin, "-c", "nvidia-device-plugin",
                                               check=False).stdout.splitlines()[:2]
        # Follows until the container ends (its 8 s are up), as a kubelet's follow does.
        steps["follow"] = cluster.kubectl("logs", "-f", "-n", "probe", "p", "--request-timeout=30s",
                                          check=False).stdout
        steps["status"] = json.loads(cluster.gpulab("status", "--json", check=False).stdout or "{}").get("healthy")
    finally:
        backend.down(purge=True)


def main() -> None:
    out = Path(sys.argv[1])
    report: dict[str, Any] = {"steps": {}}
    isolate()
    catcher = Catcher()
    try:
        exercise(report)
    except Exception as exc:  # reported, so the test shows what failed beside what leaked
        report["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        catcher.stop()
        report["caught"] = catcher.caught
        report["noise"] = catcher.noise
        out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
