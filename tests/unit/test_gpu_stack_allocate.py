"""The kubelet-side Allocate hook: device choice, failRequestsGreaterThanOne and the recorded identities (§1);
the device-manager checkpoint it decides from (never the pods' annotations, which tenants can write)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from cluster.sim import admission as seam, checkpoint, pod_agent
from cluster.sim.gpu import admission, names
from gpustack_factories import TS_RENAME_4, default_policy, make_node, make_pod, settle

pytestmark = pytest.mark.unit


def shared_node(model: str = "T4", gpus: int = 1, policy_line: str = "") -> dict:
    cfg = TS_RENAME_4 if not policy_line else TS_RENAME_4.replace("version: v1\n", f"version: v1\nflags:\n  plugin:\n    {policy_line}\n")
    pol = default_policy(device_plugin_config="cm", device_plugin_default="ts")
    node, _ = settle(make_node(model, gpus), pol, {"cm": {"ts": cfg}})
    return node


def run(pod: dict, node: dict, others: list[dict] | None = None,
        record: checkpoint.DeviceCheckpoint | None = None) -> seam.Decision | None:
    ctx = seam.Context(node=node, pods_on_node=others or [], checkpoint=record or checkpoint.DeviceCheckpoint())
    return asyncio.run(admission.admit(pod, ctx))


def test_more_than_one_replica_is_rejected_with_the_kubelet_message() -> None:
    """§1 failRequestsGreaterThanOne: phase Failed, UnexpectedAdmissionError, the plugin's error wrapped."""
    node = shared_node(gpus=1)
    d = run(make_pod(containers={"main": {"nvidia.com/gpu.shared": "2"}}), node)
    assert d is not None and d.rejected and d.reason == "UnexpectedAdmissionError"
    assert d.message == ('Allocate failed due to invalid allocation request for "nvidia.com/gpu.shared": invalid request: '
                         "maximum request size for shared resources is 1; found 2, which is unexpected")


def test_one_replica_gets_a_replica_id_and_the_gpu_uuid() -> None:
    """§1 replica IDs `<uuid>::<i>`; NVIDIA_VISIBLE_DEVICES carries the physical GPU's UUID."""
    node = shared_node()
    d = run(make_pod(containers={"main": {"nvidia.com/gpu.shared": "1"}}), node)
    assert d is not None and not d.rejected
    devices = json.loads(d.annotations[names.POD_DEVICES])["main"]
    uuid = devices[0]["uuid"]
    assert devices[0]["id"] == f"{uuid}::0" and uuid.startswith("GPU-")
    assert json.loads(d.annotations[names.POD_ENV]) == {"main": {"NVIDIA_VISIBLE_DEVICES": uuid}}
    assert d.env == {"NVIDIA_VISIBLE_DEVICES": uuid}


def test_pods_on_one_gpu_share_its_uuid_and_take_distinct_replicas() -> None:
    """§1: four time-sliced pods on a 1-GPU node see the same UUID; no replica is handed out twice."""
    node = shared_node()
    record = checkpoint.DeviceCheckpoint()
    others: list[dict] = []
    for i in range(4):
        pod = make_pod(f"p{i}", containers={"main": {"nvidia.com/gpu.shared": "1"}})
        d = run(pod, node, list(others), record)
        assert d is not None and not d.rejected
        others.append({**pod, "metadata": {**pod["metadata"], "annotations": dict(d.annotations)}})
    items = [json.loads(p["metadata"]["annotations"][names.POD_DEVICES])["main"][0] for p in others]
    assert len({i["uuid"] for i in items}) == 1 and len({i["id"] for i in items}) == 4
    d = run(make_pod("p5", containers={"main": {"nvidia.com/gpu.shared": "1"}}), node, others, record)
    assert d is not None and d.rejected and "requested number of devices unavailable" in d.message


def test_checkpoint_covers_pods_whose_annotations_have_not_arrived() -> None:
    """The device manager's own record: a pod admitted a moment ago keeps its replica even without annotations."""
    node = shared_node()
    record = checkpoint.DeviceCheckpoint()
    first = make_pod("a", containers={"main": {"nvidia.com/gpu.shared": "1"}})
    d1 = run(first, node, [], record)
    d2 = run(make_pod("b", containers={"main": {"nvidia.com/gpu.shared": "1"}}), node, [first], record)
    assert d1 and d2
    ids = {json.loads(d.annotations[names.POD_DEVICES])["main"][0]["id"] for d in (d1, d2)}
    assert len(ids) == 2


def test_distributed_and_packed_policies() -> None:
    """§1 sharedDevicesAllocationPolicy: distributed spreads replicas over GPUs, packed fills one GPU first."""
    devs = [admission.Registered(f"G{g}::{i}", f"G{g}", g, True) for g in range(2) for i in range(4)]
    taken = {"G0::0"}
    assert admission.pick(devs, taken, 1, "distributed")[0].uuid == "G1"  # type: ignore[index]
    assert admission.pick(devs, taken, 1, "packed")[0].uuid == "G0"  # type: ignore[index]
    spread = admission.pick(devs, set(), 2, "distributed")
    assert spread is not None and {d.uuid for d in spread} == {"G0", "G1"}


def test_unhealthy_devices_are_never_allocated() -> None:
    """Health (§1, DP health checks): unhealthy devices are not handed out."""
    devs = [admission.Registered("A", "A", 0, False), admission.Registered("B", "B", 1, True)]
    assert admission.pick(devs, set(), 1, "distributed") == [devs[1]]
    assert admission.pick(devs, set(), 2, "distributed") is None


def test_resource_the_plugin_does_not_serve_is_out_of_resource() -> None:
    """Kubelet predicate admission: a resource the node does not have -> OutOf<resource>."""
    node, _ = settle(make_node("T4", 1), default_policy())
    d = run(make_pod(containers={"main": {"nvidia.com/gpu.shared": "1"}}), node)
    assert d is not None and d.rejected and d.reason == "OutOfnvidia.com/gpu.shared"
    assert d.message == "Node didn't have enough resource: nvidia.com/gpu.shared, requested: 1, used: 0, capacity: 0"


def test_pods_without_gpus_are_left_alone() -> None:
    node, _ = settle(make_node("T4", 1), default_policy())
    assert run(make_pod(containers={"main": {"cpu": "1"}}), node) is None


def test_whole_gpus_are_distinct_per_pod() -> None:
    """Without sharing, each pod gets its own GPU; a 2-GPU request lists both UUIDs in NVIDIA_VISIBLE_DEVICES."""
    node, _ = settle(make_node("A100-SXM4-80GB", 4), default_policy())
    d = run(make_pod(containers={"main": {"nvidia.com/gpu": "2"}}), node)
    assert d is not None and not d.rejected
    visible = json.loads(d.annotations[names.POD_ENV])["main"]["NVIDIA_VISIBLE_DEVICES"].split(",")
    assert len(set(visible)) == 2


def test_dra_claims_give_the_container_the_allocated_device() -> None:
    """§7: an allocated claim is prepared: the container referencing it gets the device's UUID."""
    node, _ = settle(make_node("A100-SXM4-80GB", 4), default_policy())

    class FakeClient:
        async def get(self, path: str) -> dict:
            assert path.endswith("/resourceclaims/pod-gpu-abc")
            return {"status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node["metadata"]["name"], "device": "gpu-2"}]}}}}

    pod = make_pod(containers={})
    pod["spec"]["containers"] = [{"name": "main", "resources": {"claims": [{"name": "gpu"}]}}]
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    pod["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "pod-gpu-abc"}]
    d = asyncio.run(admission.admit(pod, seam.Context(node=node, pods_on_node=[], client=FakeClient())))
    assert d is not None and not d.rejected
    item = json.loads(d.annotations[names.POD_DEVICES])["main"][0]
    assert item["id"] == "gpu-2" and item["uuid"].startswith("GPU-")


# --- the checkpoint, not the annotations ---------------------------------------------------------------------------

def whole_gpu_node() -> dict:
    node, _ = settle(make_node("A100-SXM4-80GB", 4), default_policy())
    return node


def device_ids(d: seam.Decision | None) -> list[str]:
    assert d is not None and not d.rejected, d
    return [i["id"] for i in json.loads(d.annotations[names.POD_DEVICES])["main"]]


def test_a_forged_devices_annotation_does_not_take_another_pods_gpus() -> None:
    """Issue 15: a tenant wrote ``gpulab.dev/devices`` on their own (GPU-less) pod naming every GPU of the node,
    and the next GPU pod there failed admission (UnexpectedAdmissionError). The kubelet decides from its own
    checkpoint: the forged annotation changes nothing."""
    node = whole_gpu_node()
    registered, _, _ = admission.registry(node)
    forged = {c: [{"resource": "nvidia.com/gpu", "id": d.id, "uuid": d.uuid}]
              for c, d in zip("abcd", registered["nvidia.com/gpu"])}
    squatter = make_pod("squatter", containers={"main": {"cpu": "100m"}})
    squatter["metadata"]["annotations"] = {names.POD_DEVICES: json.dumps(forged)}
    d = run(make_pod("victim", containers={"main": {"nvidia.com/gpu": "4"}}), node, [squatter])
    assert len(device_ids(d)) == 4


def test_the_checkpoint_file_survives_a_restart_without_double_allocation(tmp_path: Path) -> None:
    """Like the kubelet's kubelet_internal_checkpoint: a restarted agent reads what it handed out before."""
    node = whole_gpu_node()
    path = tmp_path / "kubelet" / "device-checkpoint.json"
    first = make_pod("first", containers={"main": {"nvidia.com/gpu": "2"}})
    held = device_ids(run(first, node, [], checkpoint.DeviceCheckpoint(path)))
    assert path.stat().st_mode & 0o077 == 0
    restarted = checkpoint.DeviceCheckpoint(path)  # a new process: only the file is left
    second = device_ids(run(make_pod("second", containers={"main": {"nvidia.com/gpu": "2"}}), node, [first],
                            restarted))
    assert not set(held) & set(second)
    third = run(make_pod("third", containers={"main": {"nvidia.com/gpu": "1"}}), node, [first], restarted)
    assert third is not None and third.rejected and "Available: 0" in third.message
    assert device_ids(run(first, node, [], restarted)) == held  # admitted again after a restart: its own GPUs
    assert restarted.release(node["metadata"]["name"], {"second-uid-never-seen"}) != []
    assert checkpoint.DeviceCheckpoint(path).taken(node["metadata"]["name"]) == set()


def test_a_damaged_checkpoint_is_reported_and_starts_empty(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "device-checkpoint.json"
    record = checkpoint.DeviceCheckpoint(path)
    record.record("n", "u1", {"main": [("nvidia.com/gpu", "GPU-1")]})
    path.write_text(path.read_text().replace("GPU-1", "GPU-2"))  # edited by hand: the checksum no longer fits
    with caplog.at_level(logging.WARNING):
        assert checkpoint.DeviceCheckpoint(path).taken("n") == set()
    assert "checksum mismatch" in caplog.text


def test_the_agent_releases_devices_only_once_its_pod_list_is_complete() -> None:
    """During the first list after a restart the agent's cache is partial: releasing then would free the
    devices of pods it has not seen yet."""
    node = whole_gpu_node()
    name = node["metadata"]["name"]
    record = checkpoint.DeviceCheckpoint()
    record.record(name, "running-uid", {"main": [("nvidia.com/gpu", "x")]})
    agent = pod_agent.PodAgent(None, [admission.admit], record)  # type: ignore[arg-type]
    pod = make_pod("new", containers={"main": {"nvidia.com/gpu": "1"}})
    pod["spec"]["nodeName"] = name
    asyncio.run(agent._admit(pod, node))  # noqa: SLF001 - the admission step on its own
    assert "x" in record.taken(name)
    agent.pod_informer.synced.set()
    asyncio.run(agent._admit(pod, node))  # noqa: SLF001
    assert "x" not in record.taken(name)


def test_dcgm_counts_gpu_memory_by_the_checkpoint_not_by_annotations() -> None:
    """The DCGM exporter decides which pod runs out of GPU memory: a pod whose owner forges ``gpulab.dev/devices``
    (claiming a GPU it was never given, with a large memory use) must not count on that GPU."""
    from cluster.sim.gpu import dcgm_exporter, world as world_mod

    node = whole_gpu_node()
    name = node["metadata"]["name"]
    record = checkpoint.DeviceCheckpoint()
    victim = make_pod("victim", containers={"main": {"nvidia.com/gpu": "1"}}, node=name)
    d = run(victim, node, [], record)
    victim["metadata"]["annotations"] = {**d.annotations, names.POD_GPU_MEM: "1000"}  # type: ignore[union-attr]
    forger = make_pod("forger", containers={"main": {"cpu": "100m"}}, node=name,
                      annotations={names.POD_DEVICES: victim["metadata"]["annotations"][names.POD_DEVICES],
                                   names.POD_GPU_MEM: "900000"})
    world = world_mod.World()
    world.nodes[name] = node
    for p in (forger, victim):
        world.put_pod("ADDED", p)
    exporter = dcgm_exporter.Exporter(None, world, None, {})  # type: ignore[arg-type]
    uuid = json.loads(d.annotations[names.POD_DEVICES])["main"][0]["uuid"]  # type: ignore[union-attr]
    assert [c.pod for c in exporter._claims(name, record)[uuid]] == ["victim"]  # noqa: SLF001
    assert sorted(c.pod for c in exporter._claims(name, None)[uuid]) == ["forger", "victim"]  # noqa: SLF001 - no checkpoint: annotations
