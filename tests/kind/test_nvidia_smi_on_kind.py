"""``kubectl exec POD -- nvidia-smi`` on a real kind cluster prints what it prints on ``local`` for the same fleet
node and devices. The kubelet is real here: gpulab's node plugin's ``Allocate`` mounts the nvidia-smi client at
``/usr/bin/nvidia-smi`` and the node's socket folder into each container it gives GPUs (as NVIDIA's container
toolkit injects the tool), the real kubelet sets ``NVIDIA_VISIBLE_DEVICES``, and the GPU stack on the host answers
over the socket. The expected text is what the local backend's kubelet endpoint computes for the Node the local
backend registers for that fleet node (``cluster.sim.nodes.build_all``) and the same devices; only a UUID the
kubelet picked is read from the output. A pod without GPUs gets no nvidia-smi, as on any node."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest

from cluster import binaries, fleet as fleet_mod
from cluster.backends import kindconfig
from cluster.backends.kind import KindBackend
from cluster.kube.client import Client
from cluster.sim import nodes
from cluster.sim.gpu import hoststate, names, operator
from cluster.sim.kubelet import gpuview, programs
from cluster.testing import wait_for

NS = "smi-on-kind"
QUERY = ["--query-gpu=gpu_name,gpu_uuid,memory.total", "--format=csv,noheader"]
TOLERATE = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def _pod(name: str, node: str | None, gpus: int, resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    ctr: dict[str, Any] = {"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04",
                           "command": ["sleep", "infinity"]}
    spec: dict[str, Any] = {"containers": [ctr], "terminationGracePeriodSeconds": 1}
    if gpus:
        ctr["resources"] = {"limits": {resource: str(gpus)}}
    if node:
        spec |= {"nodeSelector": {kindconfig.FLEET_NODE_LABEL: node}, "tolerations": TOLERATE}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def _kubectl(backend: KindBackend, *args: str) -> subprocess.CompletedProcess[str]:
    found = binaries.cached()
    assert found is not None
    return subprocess.run([str(found.kubectl), f"--kubeconfig={backend.kubeconfig()}", *args], capture_output=True,
                          text=True, timeout=60, check=False)


def _local_node(name: str, mig_layout: str = "") -> dict[str, Any]:
    """The Node the local backend registers for this fleet node, with the MIG layout the stack gave it."""
    [node] = [n for n in nodes.build_all(fleet_mod.load("starter")) if n["metadata"]["name"] == name]
    if mig_layout:
        node["metadata"]["annotations"][names.MIG_LAYOUT] = mig_layout
    return node


def _local(node: str, visible: str, args: list[str], mig_layout: str = "") -> programs.Outcome:
    """What ``kubectl exec … nvidia-smi ARGS`` prints on local for a container given ``visible``."""
    return programs.nvidia_smi(gpuview.container(_local_node(node, mig_layout), visible), args,
                               datetime.now(timezone.utc))


@pytest.fixture(scope="module")
def pods(kind_backend: KindBackend) -> Iterator[Client]:
    with Client.from_kubeconfig(kind_backend.kubeconfig()) as client:
        operator.install(client, wait=True, timeout=240)
        client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        for name, pool, gpus in (("trainer", "h100-0", 8), ("single", "a100-0", 1), ("cpu", None, 0)):
            client.create(f"/api/v1/namespaces/{NS}/pods", _pod(name, pool, gpus))

        def running() -> bool:
            items = client.get(f"/api/v1/namespaces/{NS}/pods").get("items", [])
            return len(items) == 3 and all(
                s.get("state", {}).get("running") for p in items for s in p["status"].get("containerStatuses") or [{}])
        wait_for(running, 240, interval=2.0, what="the three pods running on kind")
        try:
            yield client
        finally:
            _kubectl(kind_backend, "delete", "namespace", NS, "--wait=false")
            operator.uninstall(client)


def test_nvidia_smi_in_a_pod_holding_the_8_h100s_matches_local(kind_backend: KindBackend, pods: Client) -> None:
    inv = hoststate.inventory_of(pods.get("/api/v1/nodes/h100-0"))
    assert inv is not None
    every = ",".join(g.uuid for g in inv.gpus)
    for args in (["-L"], QUERY):
        proc = _kubectl(kind_backend, "exec", "-n", NS, "trainer", "--", "nvidia-smi", *args)
        want = _local("h100-0", every, args)
        assert (proc.returncode, proc.stdout) == (want.exit_code, want.stdout.decode()), proc.stderr
    listed = _kubectl(kind_backend, "exec", "-n", NS, "trainer", "--", "nvidia-smi", "-L").stdout
    assert listed.count("GPU ") == 8 and listed.startswith("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-")
    bogus = _kubectl(kind_backend, "exec", "-n", NS, "trainer", "--", "nvidia-smi", "--bogus")
    want = _local("h100-0", every, ["--bogus"])
    assert (bogus.returncode, bogus.stdout) == (want.exit_code, want.stdout.decode()) and want.exit_code != 0


def test_a_one_gpu_pod_sees_only_the_gpu_the_kubelet_gave_it(kind_backend: KindBackend, pods: Client) -> None:
    pod = pods.get(f"/api/v1/namespaces/{NS}/pods/single")
    node = pod["spec"]["nodeName"]
    inv = hoststate.inventory_of(pods.get(f"/api/v1/nodes/{node}"))
    assert inv is not None
    listed = _kubectl(kind_backend, "exec", "-n", NS, "single", "--", "nvidia-smi", "-L")
    assert listed.returncode == 0, listed.stderr
    given = [g.uuid for g in inv.gpus if g.uuid in listed.stdout]  # which one the kubelet picked: read, not assumed
    assert len(given) == 1 and listed.stdout.count("GPU ") == 1
    for args in (["-L"], QUERY):
        proc = _kubectl(kind_backend, "exec", "-n", NS, "single", "--", "nvidia-smi", *args)
        assert proc.stdout == _local(node, given[0], args).stdout.decode()


def test_a_pod_without_gpus_has_no_nvidia_smi(kind_backend: KindBackend, pods: Client) -> None:
    proc = _kubectl(kind_backend, "exec", "-n", NS, "cpu", "--", "nvidia-smi", "-L")
    assert proc.returncode != 0 and 'exec: "nvidia-smi": executable file not found in $PATH' in proc.stderr


def test_a_pod_on_a_mig_instance_sees_its_parent_gpu_and_that_instance(kind_backend: KindBackend,
                                                                       pods: Client) -> None:
    """mixed strategy, a100-1 split into 3g.40gb instances by the MIG manager: the plugin registers the instances
    under their MIG UUIDs, and the pod's nvidia-smi shows one GPU with one ``MIG 3g.40gb`` device under it."""
    pods.patch(names.POLICY, {"spec": {"mig": {"strategy": "mixed"}}})
    pods.patch("/api/v1/nodes/a100-1", {"metadata": {"labels": {names.MIG_CONFIG: "all-3g.40gb"}}})

    def split() -> bool:
        node = pods.get("/api/v1/nodes/a100-1")
        return bool(node["metadata"]["labels"].get(names.MIG_CONFIG_STATE) == "success" and
                    node["status"].get("allocatable", {}).get("nvidia.com/mig-3g.40gb") == "8")
    wait_for(split, 180, interval=2.0, what="a100-1 split into eight 3g.40gb instances, allocatable")
    pods.create(f"/api/v1/namespaces/{NS}/pods", _pod("mig", "a100-1", 1, "nvidia.com/mig-3g.40gb"))

    def running() -> bool:
        statuses = pods.get(f"/api/v1/namespaces/{NS}/pods/mig")["status"].get("containerStatuses") or [{}]
        return bool(statuses[0].get("state", {}).get("running"))
    wait_for(running, 120, interval=2.0, what="the MIG pod running")
    node = pods.get("/api/v1/nodes/a100-1")
    layout = node["metadata"]["annotations"].get(names.MIG_LAYOUT, "")
    inv = hoststate.inventory_of(node)
    assert inv is not None and layout
    listed = _kubectl(kind_backend, "exec", "-n", NS, "mig", "--", "nvidia-smi", "-L")
    assert listed.returncode == 0, listed.stderr
    given = [m.uuid for g in inv.gpus for m in g.mig_devices if m.uuid in listed.stdout]
    assert len(given) == 1 and listed.stdout.count("GPU ") == 1 and listed.stdout.count("  MIG 3g.40gb ") == 1
    for args in (["-L"], QUERY):
        proc = _kubectl(kind_backend, "exec", "-n", NS, "mig", "--", "nvidia-smi", *args)
        assert proc.stdout == _local("a100-1", given[0], args, layout).stdout.decode(), args
