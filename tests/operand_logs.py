"""What the GPU stack's operand containers log, checked the same way on ``local`` (tests/e2e, where our kubelet
endpoint serves the stack's log store) and on kind (tests/kind, where the real kubelet logs what the stand-in
container printed from the stack's log socket): the device plugin's config-manager sidecar through a label change
and a label that names no config, and the MIG manager's words for a config name its file does not have.
``logs(pod, container)`` is ``kubectl logs -n gpu-operator POD -c CONTAINER``'s stdout on the backend under test."""

from __future__ import annotations

from collections.abc import Callable

from cluster.kube.client import Client
from cluster.sim.gpu import names
from cluster.testing import wait_for

Logs = Callable[[str, str], str]
LABEL = "nvidia.com/device-plugin.config"
POLICY = f"{names.POLICY_PATH}/{names.POLICY_NAME}"
# mig-parted's `assert --valid-config` for a name its file does not have, then the manager's error line
# (cluster/sim/gpu/miglogs.py `invalid`), as on a real node: independent of what the GPUs hold.
BAD_MIG_CONFIG = "all-9g.99gb"
BAD_MIG_CONFIG_SAYS = (f'level=fatal msg="Error selecting MIG config: selected mig-config not present: {BAD_MIG_CONFIG}"',
                       'level=error msg="Error: failed to validate MIG configuration: exit status 1"')


def running_plugin_pod(client: Client, node: str) -> str | None:
    """The node's device-plugin pod, once every container of it runs (and it is not going away)."""
    pods = client.get(f"/api/v1/namespaces/{names.NAMESPACE}/pods", fieldSelector=f"spec.nodeName={node}")["items"]
    return next((p["metadata"]["name"] for p in pods
                 if p["metadata"]["name"].startswith("nvidia-device-plugin-daemonset")
                 and not p["metadata"].get("deletionTimestamp")
                 and all("running" in s["state"] for s in p.get("status", {}).get("containerStatuses") or [{}])
                 ), None)


def config_manager_turn(client: Client, node: str, logs: Logs, timeout: float = 60,
                        found_pod: Callable[[str], None] | None = None) -> list[str]:
    """The node's config-manager log after its label turns to a time-slicing config (x2) and then to a name no
    config has (nope); ``found_pod`` is told the plugin pod's name before the label changes. The policy and the
    label are put back afterwards."""
    client.create(f"/api/v1/namespaces/{names.NAMESPACE}/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-logs"},
        "data": {"whole": "version: v1\n", "x2": "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                                                  "    - {name: nvidia.com/gpu, replicas: 2}\n"}})
    try:
        client.patch(POLICY, {"spec": {"devicePlugin": {"config": {"name": "cm-logs", "default": "whole"}}}})
        name = wait_for(lambda: running_plugin_pod(client, node), timeout,
                        what=f"the device plugin's pod on {node} running")
        if found_pod is not None:
            found_pod(name)
        client.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {LABEL: "x2"}}})
        wait_for(lambda: client.get(f"/api/v1/nodes/{node}")["status"]["allocatable"].get("nvidia.com/gpu") == "4",
                 timeout, what=f"{node} advertising 4 time-sliced GPUs")
        client.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {LABEL: "nope"}}})

        def logged() -> list[str] | None:
            lines = logs(name, "config-manager").splitlines()
            return lines if any("specified config nope does not exist" in line for line in lines) else None
        found: list[str] = wait_for(logged, 30, what="the config-manager's error line")
        return found
    finally:
        client.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {LABEL: None}}})
        client.patch(POLICY, {"spec": {"devicePlugin": {"config": None}}})
        client.delete(f"/api/v1/namespaces/{names.NAMESPACE}/configmaps/cm-logs")


def assert_config_manager_said(lines: list[str]) -> None:
    """``DP cmd/config-manager/main.go`` v0.19.1: the label it saw, the config it chose, the signal to the plugin;
    a label naming no config is the error it exits with (klog's ``E`` line from main.go:209)."""
    texts = [line.split("] ", 1)[1] for line in lines if "] " in line]
    turn = [f"Label change detected: {LABEL}=x2", "Updating to config: x2", "Successfully updated to config: x2",
            "Sending signal 'hangup' to 'nvidia-device-plugin'", "Successfully sent signal",
            f"Waiting for change to '{LABEL}' label"]
    at = texts.index(turn[0])
    assert texts[at:at + len(turn)] == turn, texts
    assert texts[-2:] == [f"Label change detected: {LABEL}=nope", "specified config nope does not exist"], texts
    error = lines[-1]
    assert error.startswith("E") and " main.go:209] " in error, error
    assert all(line[0] in "IE" and " main.go:" in line for line in lines), lines
