"""``kubectl logs`` of the GPU stack's pods on a real kind cluster shows NVIDIA's lines, as on ``local``. The kubelet
is real here and reads what the container printed: the stand-in container asks the stack's log socket on the host
for its lines (the node's containerd binds the socket's folder into every container) and prints them, so the
kubelet's own options work on them: ``-c``, ``--tail``, ``-f``, ``-l``, ``--previous`` after the runtime restarted
the container. The expectations are the local tier's (``operand_logs``): the config-manager through a label change,
the MIG manager's words for a config its file does not have (``kubectl logs -l app=nvidia-mig-manager``)."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import operand_logs
import pytest

from cluster import binaries, fleet as fleet_mod
from cluster.backends import kindconfig
from cluster.backends.kind import KindBackend
from cluster.kube.client import Client
from cluster.sim.gpu import names, operator
from cluster.testing import wait_for


def _kubectl(backend: KindBackend, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    found = binaries.cached()
    assert found is not None
    return subprocess.run([str(found.kubectl), f"--kubeconfig={backend.kubeconfig()}", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def _logs(backend: KindBackend, pod: str, container: str, *args: str) -> str:
    return _kubectl(backend, "logs", "-n", names.NAMESPACE, pod, "-c", container, *args).stdout


@pytest.fixture(scope="module")
def stack(kind_backend: KindBackend) -> Iterator[Client]:
    with Client.from_kubeconfig(kind_backend.kubeconfig()) as client:
        operator.install(client, wait=True, timeout=240)
        try:
            yield client
        finally:
            operator.uninstall(client)


KLOG = re.compile(r"[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} +\d+ [\w.-]+:\d+\] ")
STARTING = "Starting nvidia-device-plugin"  # the plugin's one stdout line at start; its klog lines go to stderr


def _streams(lines: list[str]) -> tuple[list[str], list[str]]:
    """A container log's klog lines (the plugin's stderr) and its other lines (stdout), each in its own order. The
    runtime reads the two pipes apart and writes each line as it reads it, so lines printed at once on the two
    streams may interleave in any order, as in any real container's log; within a stream the order holds."""
    klog = [line for line in lines if KLOG.match(line)]
    return klog, [line for line in lines if not KLOG.match(line)]


def _plugin_log(backend: KindBackend, name: str) -> list[str]:
    """The device plugin container's log, once it holds its stdout line and its first three klog lines."""
    def printed() -> list[str] | None:
        lines = _logs(backend, name, "nvidia-device-plugin").splitlines()
        klog, out = _streams(lines)
        return lines if len(klog) >= 3 and STARTING in out else None
    found: list[str] = wait_for(printed, 60, interval=1.0, what="the device plugin's first lines in kubectl logs")
    return found


def _plugin_pod(client: Client, node: str) -> str:
    found: str = wait_for(lambda: operand_logs.running_plugin_pod(client, node), 120,
                          what=f"the device plugin's pod on {node} running")
    return found


def test_the_device_plugins_log_starts_with_the_plugins_own_lines(kind_backend: KindBackend, stack: Client) -> None:
    name = _plugin_pod(stack, "t4-0")
    lines = _plugin_log(kind_backend, name)
    klog, out = _streams(lines)
    assert klog[0].endswith("main.go:253] Starting FS watcher for /var/lib/kubelet/device-plugins"), lines
    assert klog[1].endswith("main.go:260] Starting OS watcher."), lines
    assert out[0] == STARTING, lines
    assert _logs(kind_backend, name, "nvidia-device-plugin", "--tail=1").splitlines() == lines[-1:]


def test_the_config_manager_logs_each_label_change_and_follow_sees_them(kind_backend: KindBackend,
                                                                       stack: Client) -> None:
    found = binaries.cached()
    assert found is not None
    kubectl = str(found.kubectl)
    followers: list[subprocess.Popen[str]] = []

    def follow(pod: str) -> None:  # before the label changes: what it streams, it streams as the lines come
        followers.append(subprocess.Popen(
            [kubectl, f"--kubeconfig={kind_backend.kubeconfig()}", "logs", "-f", "-n", names.NAMESPACE,
             pod, "-c", "config-manager"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
    try:
        lines = operand_logs.config_manager_turn(stack, "l40s-0", lambda pod, c: _logs(kind_backend, pod, c),
                                                 timeout=120, found_pod=follow)
        operand_logs.assert_config_manager_said(lines)
        follower = followers[0]
        time.sleep(3)  # what it has streamed by now, it streamed while the label changed
        follower.terminate()
        streamed = follower.communicate(timeout=30)[0].splitlines()
        assert streamed == lines, streamed
    finally:
        for follower in followers:
            follower.kill()
            follower.wait()


def test_the_mig_manager_says_why_a_mig_change_failed(kind_backend: KindBackend, stack: Client) -> None:
    node = "a100-1"
    stack.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {names.MIG_CONFIG: operand_logs.BAD_MIG_CONFIG}}})
    try:
        wait_for(lambda: stack.get(f"/api/v1/nodes/{node}")["metadata"]["labels"].get(names.MIG_CONFIG_STATE)
                 == "failed", 120, interval=1.0, what=f"{node} mig.config.state failed")

        def said() -> str | None:
            out = _kubectl(kind_backend, "logs", "-n", names.NAMESPACE, "-l", "app=nvidia-mig-manager",
                           "--tail=-1").stdout
            return out if all(line in out for line in operand_logs.BAD_MIG_CONFIG_SAYS) else None
        out = wait_for(said, 30, interval=1.0, what="the MIG manager's error in kubectl logs -l app=nvidia-mig-manager")
        assert 'msg="Waiting for change to \'nvidia.com/mig.config\' label"' in out
        events = stack.get("/api/v1/namespaces/default/events")["items"]
        assert not any(e["involvedObject"].get("name") == node and "MIG" in e.get("message", "") for e in events)
    finally:
        stack.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {names.MIG_CONFIG: "all-disabled"}}})
        wait_for(lambda: stack.get(f"/api/v1/nodes/{node}")["metadata"]["labels"].get(names.MIG_CONFIG_STATE)
                 == "success", 120, interval=1.0, what=f"{node} back to all-disabled")


def test_previous_shows_what_the_container_printed_before_the_runtime_restarted_it(kind_backend: KindBackend,
                                                                                    stack: Client) -> None:
    node = "h100-0"
    name = _plugin_pod(stack, node)
    [worker] = [w.kind_node for w in kindconfig.plan(fleet_mod.load("starter"), kind_backend.cluster_name)
                if w.fleet_node == node]

    def plugin_status() -> dict[str, Any]:
        p = stack.get(f"/api/v1/namespaces/{names.NAMESPACE}/pods/{name}")
        found: dict[str, Any] = next(s for s in p["status"]["containerStatuses"] if s["name"] == "nvidia-device-plugin")
        return found

    def running() -> tuple[dict[str, Any], str] | None:
        """The container's status once the runtime runs the container it names (the kubelet's status follows the
        runtime by a relist, so a status read just after a restart may still name the container before it)."""
        s = plugin_status()
        if "running" not in s["state"]:
            return None
        ps = subprocess.run(["docker", "exec", worker, "crictl", "ps", "-q", "--no-trunc", "--state", "running"],
                            capture_output=True, text=True, timeout=60, check=False)
        cid = s["containerID"].split("://", 1)[1]
        return (s, cid) if cid in ps.stdout.split() else None
    status, cid = wait_for(running, 60, interval=1.0, what="the device plugin's running container")
    before = _plugin_log(kind_backend, name)
    stopped = subprocess.run(["docker", "exec", worker, "crictl", "stop", "--timeout", "1", cid],
                             capture_output=True, text=True, timeout=60, check=False)
    assert stopped.returncode == 0, stopped.stderr

    def restarted() -> bool:
        s = plugin_status()
        return bool(s["restartCount"] >= status["restartCount"] + 1 and "running" in s["state"])
    wait_for(restarted, 120, interval=1.0, what="the device plugin container restarted by the kubelet")
    previous = _logs(kind_backend, name, "nvidia-device-plugin", "--previous").splitlines()
    assert previous[:len(before)] == before
    now = _plugin_log(kind_backend, name)

    def text(lines: list[str]) -> list[str]:  # without klog's header (its time differs)
        return [line.split("] ", 1)[-1] for line in lines]
    (klog_now, out_now), (klog_before, out_before) = _streams(now), _streams(before)
    assert out_now[0] == out_before[0] == STARTING, now
    assert text(klog_now[:3]) == text(klog_before[:3]), (now, before)
