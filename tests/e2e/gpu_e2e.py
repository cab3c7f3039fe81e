"""Helpers for the GPU stack's e2e tests: an installed operator per module, pods, events, node resources.

Every module that imports ``gpu_operator`` gets the simulated GPU Operator installed for its tests and
uninstalled afterwards (the cluster is shared by the whole session). Tests reset what they change.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from cluster import errors
from cluster.kube.client import Client
from cluster.sim.gpu import names, operator
from cluster.testing import wait_for

POLICY = f"{names.POLICY_PATH}/{names.POLICY_NAME}"
TOLERATE_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


@pytest.fixture(scope="module")
def gpu_operator(local_cluster: Any) -> Iterator[Client]:
    client = local_cluster.client()
    operator.install(client, wait=True, timeout=120)
    try:
        yield client
    finally:
        operator.uninstall(client)
        client.close()


def ext(client: Client, node: str, section: str = "capacity") -> dict[str, str]:
    st = client.get(f"/api/v1/nodes/{node}").get("status", {})
    return {k: v for k, v in st.get(section, {}).items() if k.startswith("nvidia.com/")}


def labels(client: Client, node: str) -> dict[str, str]:
    return dict(client.get(f"/api/v1/nodes/{node}")["metadata"].get("labels") or {})


def label(client: Client, node: str, key: str, value: str | None) -> None:
    client.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {key: value}}})


def wait_ext(client: Client, node: str, want: dict[str, str], section: str = "capacity", timeout: float = 20) -> None:
    wait_for(lambda: ext(client, node, section) == want, timeout, what=f"{node} {section} == {want}")


def set_device_plugin_config(client: Client, name: str | None, default: str | None) -> None:
    value: dict[str, Any] | None = None if name is None else {"name": name, "default": default or None}
    client.patch(POLICY, {"spec": {"devicePlugin": {"config": value}}})


def set_mig_strategy(client: Client, strategy: str) -> None:
    client.patch(POLICY, {"spec": {"mig": {"strategy": strategy}}})


def configmap(client: Client, name: str, data: dict[str, str]) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": names.NAMESPACE},
            "data": data}
    try:
        client.create(f"/api/v1/namespaces/{names.NAMESPACE}/configmaps", body)
    except errors.Conflict:
        client.replace(f"/api/v1/namespaces/{names.NAMESPACE}/configmaps/{name}", body)


def delete(client: Client, path: str) -> None:
    try:
        client.delete(path)
    except errors.NotFound:
        pass


def gpu_pod(name: str, resources: dict[str, str], node: str | None = None, annotations: dict[str, str] | None = None,
            restart: str = "Always", claims: list[dict[str, str]] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "gpu-workload", "image": "nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04",
                                 "command": ["sleep", "3600"], "resources": {"limits": resources} if resources else {}}
    spec: dict[str, Any] = {"containers": [container], "tolerations": TOLERATE_GPU, "restartPolicy": restart,
                            "terminationGracePeriodSeconds": 0}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    if claims:
        spec["resourceClaims"] = claims
        container["resources"]["claims"] = [{"name": c["name"]} for c in claims]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": annotations or {}}, "spec": spec}


def create_pod(client: Client, ns: str, pod: dict[str, Any]) -> dict[str, Any]:
    return client.create(f"/api/v1/namespaces/{ns}/pods", pod)


def pod(client: Client, ns: str, name: str) -> dict[str, Any]:
    return client.get(f"/api/v1/namespaces/{ns}/pods/{name}")


def wait_phase(client: Client, ns: str, name: str, phase: str, timeout: float = 30) -> dict[str, Any]:
    return wait_for(lambda: (p := pod(client, ns, name)).get("status", {}).get("phase") == phase and p,
                    timeout, what=f"pod {ns}/{name} {phase}")


def events_for(client: Client, ns: str, name: str) -> list[dict[str, Any]]:
    items = client.get(f"/api/v1/namespaces/{ns}/events").get("items", [])
    return [e for e in items if e.get("involvedObject", {}).get("name") == name]


def wait_event(client: Client, ns: str, name: str, reason: str, contains: str = "", timeout: float = 30) -> dict[str, Any]:
    def find() -> dict[str, Any] | None:
        return next((e for e in events_for(client, ns, name)
                     if e.get("reason") == reason and contains in e.get("message", "")), None)
    return wait_for(find, timeout, what=f"event {reason} ~ {contains!r} on {ns}/{name}")


def visible_devices(p: dict[str, Any]) -> str:
    env = json.loads(p["metadata"].get("annotations", {}).get(names.POD_ENV, "{}"))
    return str(env.get("gpu-workload", {}).get("NVIDIA_VISIBLE_DEVICES", ""))


def operand_pods(client: Client, node: str) -> dict[str, dict[str, Any]]:
    items = client.get(f"/api/v1/namespaces/{names.NAMESPACE}/pods", fieldSelector=f"spec.nodeName={node}")["items"]
    return {p["metadata"]["labels"].get(names.OPERAND_LABEL, ""): p for p in items}


def container_log(cluster: Any, pod: str, container: str, *, previous: bool = False) -> str:
    """``kubectl logs -n gpu-operator POD -c CONTAINER [--previous]``: where a failing operand says why."""
    args = ["logs", "-n", names.NAMESPACE, pod, "-c", container, *(["--previous"] if previous else [])]
    return str(cluster.kubectl(*args).stdout)


def mig_manager_log(cluster: Any, client: Client, node: str) -> str:
    """``kubectl logs`` of the node's nvidia-mig-manager pod: where a real cluster says why a MIG change failed."""
    name = operand_pods(client, node)["nvidia-mig-manager"]["metadata"]["name"]
    return str(cluster.kubectl("logs", "-n", names.NAMESPACE, name, "-c", "nvidia-mig-manager").stdout)


def metrics(url: str) -> list[tuple[str, dict[str, str], float]]:
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    out = []
    for fam in text_string_to_metric_families(httpx.get(url, timeout=5).text):
        for s in fam.samples:
            out.append((s.name, dict(s.labels), float(s.value)))
    return out


def metrics_url(client: Client) -> str:
    return str(client.get(f"/api/v1/namespaces/{names.NAMESPACE}/configmaps/{names.DCGM_ENDPOINT_CONFIGMAP}")["data"]["url"])
