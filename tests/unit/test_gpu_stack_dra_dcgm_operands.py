"""DRA slices (§7), DCGM metrics and shared-memory OOM, operand pod statuses and the ClusterPolicy objects."""

from __future__ import annotations

import json

import pytest

from cluster.gpu import dra_attributes
from cluster.sim import pod_agent
from cluster.sim.gpu import dcgm, dcgm_exporter, dra, hoststate, manifests, migmanager, names, operands, policy
from gpustack_factories import default_policy, make_node, settle, with_layout

pytestmark = pytest.mark.unit


# --- DRA (§7) ----------------------------------------------------------------------------------------------------


def test_full_gpu_devices_use_the_real_driver_names() -> None:
    """§7: devices gpu-<minor>, type gpu, productName/architecture/brand/versions, memory in bytes; no index."""
    inv = hoststate.inventory_of(make_node())
    assert inv is not None
    devs = dra.devices(inv)
    assert [d["name"] for d in devs] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    a = devs[0]["attributes"]
    assert a["type"] == {"string": "gpu"} and a["productName"] == {"string": "NVIDIA A100-SXM4-80GB"}
    assert a["cudaComputeCapability"] == {"version": "8.0.0"} and a["architecture"] == {"string": "Ampere"}
    assert "index" not in a and "minor" not in a
    assert devs[0]["capacity"] == {"memory": {"value": "81920Mi"}}
    schema = dra_attributes.NVIDIA
    for d in devs:
        for name in d["attributes"]:
            assert name in schema.attributes or name.startswith(dra_attributes.STANDARD_DOMAIN + "/")
        assert all(schema.has_capacity(c) for c in d["capacity"])


def test_mig_devices_are_published_instead_of_their_parent() -> None:
    """§7 MIG: gpu-<minor>-mig-<profile without dots>-<giProfileId>-<start>, parentUUID, memorySlice<i>."""
    node = make_node()
    node["metadata"]["labels"][names.MIG_CONFIG] = "all-balanced"
    d = migmanager.decide(node, default_policy(), manifests.mig_configmap()["data"][names.MIG_CONFIG_KEY])
    assert d.result is not None
    inv = hoststate.inventory_of(with_layout(node, d.result.layouts))
    assert inv is not None
    devs = dra.devices(inv)
    assert len(devs) == 16 and not any(x["name"] == "gpu-0" for x in devs)
    three = next(x for x in devs if x["name"].startswith("gpu-0-mig-3g40gb-9-"))
    assert three["attributes"]["profile"] == {"string": "3g.40gb"}
    assert three["attributes"]["parentUUID"]["string"] == inv.gpus[0].uuid
    slices = sorted(k for k in three["capacity"] if k.startswith("memorySlice"))
    assert len(slices) == 4
    assert all(dra_attributes.NVIDIA.has_capacity(c) for c in three["capacity"])


def test_unhealthy_gpus_are_withdrawn_and_classes_select_by_type() -> None:
    """docs: an unhealthy GPU leaves the slice; DeviceClasses gpu.nvidia.com / mig.nvidia.com select type."""
    inv = hoststate.inventory_of(make_node(annotations={names.FAULTS: '{"unhealthy": [1]}'}))
    assert inv is not None and [d["name"] for d in dra.devices(inv)] == ["gpu-0", "gpu-2", "gpu-3"]
    classes = {c["metadata"]["name"]: c["spec"]["selectors"][0]["cel"]["expression"] for c in dra.device_classes()}
    assert classes["gpu.nvidia.com"].endswith("type == 'gpu'") and classes["mig.nvidia.com"].endswith("type == 'mig'")
    s = dra.resource_slice("n1", "uid", inv, 3)
    assert s["spec"]["pool"] == {"name": "n1", "generation": 3, "resourceSliceCount": 1}
    assert s["spec"]["nodeName"] == "n1" and s["spec"]["driver"] == "gpu.nvidia.com"
    # a generated name, as the ResourceSlice controller of k8s.io/dynamic-resource-allocation creates it
    assert s["metadata"]["generateName"] == "n1-gpu.nvidia.com-" and "name" not in s["metadata"]


# --- DCGM ----------------------------------------------------------------------------------------------------------


def claim(pod: str, mem: int, util: float = 10.0) -> dcgm.Claim:
    return dcgm.Claim(f"uid-{pod}", "ns", pod, "main", util, mem)


def test_the_pod_that_pushes_a_shared_gpu_over_is_the_one_that_fails() -> None:
    """docs GPU memory: claims are served in order; the claim that does not fit is the OOM victim."""
    fits, over = dcgm.admitted([claim("a", 6000), claim("b", 6000), claim("c", 6000), claim("d", 1000)], 15360)
    assert [c.pod for c in fits] == ["a", "b", "d"] and [c.pod for c in over] == ["c"]


def test_series_carry_dcgm_labels_and_combined_use() -> None:
    """Metrics: one row per pod on the GPU with the GPU's combined util (capped at 100) and memory."""
    dev = dcgm.Device("t4-0", 0, "GPU-x", "GPU-x", "Tesla T4", "T4", 15360)
    s = dcgm.sample(dev, [claim("a", 4000, 70), claim("b", 2000, 50)])
    rows = dcgm.series(s)
    util = [r for r in rows if r[0] == "DCGM_FI_DEV_GPU_UTIL"]
    assert [r[2] for r in util] == [100.0, 100.0] and {r[1]["pod"] for r in util} == {"a", "b"}
    used = next(r for r in rows if r[0] == "DCGM_FI_DEV_FB_USED")
    free = next(r for r in rows if r[0] == "DCGM_FI_DEV_FB_FREE")
    assert used[2] == 6000 and free[2] == 15360 - 6000
    assert {"gpu", "UUID", "modelName", "Hostname", "namespace", "pod", "container"} <= set(used[1])
    idle = dcgm.series(dcgm.sample(dev, []))
    assert {r[1]["pod"] for r in idle} == {""}


def test_oom_status_depends_on_restart_policy() -> None:
    """docs GPU memory: the process exits 1 (reason Error). restartPolicy Never -> Failed, with no pod reason (no
    real component writes one); Always -> CrashLoopBackOff. A termination message only when the container's policy
    falls back to its log."""
    pod = {"metadata": {"name": "p"}, "spec": {"restartPolicy": "Never"},
           "status": {"containerStatuses": [{"name": "main", "restartCount": 0, "state": {"running": {}}}]}}
    st = dcgm_exporter.oom_status(pod, "main", "")
    terminated = st["containerStatuses"][0]["state"]["terminated"]
    assert st["phase"] == "Failed" and "reason" not in st and "message" not in st
    assert terminated["exitCode"] == 1 and terminated["reason"] == "Error" and "message" not in terminated
    st = dcgm_exporter.oom_status(pod, "main", dcgm.OOM_LOG_LINE)
    assert st["containerStatuses"][0]["state"]["terminated"]["message"] == "CUDA error: out of memory"
    pod["spec"]["restartPolicy"] = "Always"
    st = dcgm_exporter.oom_status(pod, "main", "")
    assert "phase" not in st and st["containerStatuses"][0]["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert st["containerStatuses"][0]["lastState"]["terminated"]["reason"] == "Error"


def test_pod_load_and_devices_from_annotations() -> None:
    pod = {"metadata": {"annotations": {names.POD_GPU_UTIL: "150", names.POD_GPU_MEM: "2048",
                                        names.POD_DEVICES: json.dumps({"c": [{"resource": "r", "id": "U::0", "uuid": "U"}]})}}}
    assert dcgm.pod_load(pod) == (100.0, 2048) and dcgm.pod_devices(pod) == {"U": "c"}


# --- operand pods --------------------------------------------------------------------------------------------------


def operand_pod(operand: str) -> dict:
    ds = manifests.daemonset(operand)
    return {"metadata": {"name": f"{ds['metadata']['name']}-abcde", "namespace": names.NAMESPACE, "uid": "u1",
                         "labels": ds["spec"]["template"]["metadata"]["labels"]},
            "spec": {**ds["spec"]["template"]["spec"], "nodeName": "n"}, "status": {}}


def test_crashing_operand_shows_crashloopbackoff_and_no_termination_message() -> None:
    """A failing component: container waiting CrashLoopBackOff, lastState terminated (exit 1, Error) naming the
    instance that failed, and no message: the operator's DaemonSets keep the default terminationMessagePolicy."""
    pod = operand_pod("device-plugin")
    st = operands.OperandState(operands.CRASH, "nvidia-device-plugin", "error starting plugins: boom")
    status = operands.pod_status(pod, None, st)
    cs = next(c for c in status["containerStatuses"] if c["name"] == "nvidia-device-plugin")
    assert cs["state"]["waiting"]["reason"] == "CrashLoopBackOff" and cs["restartCount"] == 1
    term = cs["lastState"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (1, "Error") and "message" not in term
    assert term["containerID"] == pod_agent.runtime_id(pod["metadata"]["uid"], "nvidia-device-plugin", 0)
    assert operands.matches({**pod, "status": status}, st)
    assert not operands.matches({**pod, "status": status}, operands.OperandState())


def test_a_given_termination_message_is_reported() -> None:
    """With a message (a container whose policy falls back to its log), the failed instance carries it."""
    st = operands.OperandState(operands.CRASH, "nvidia-device-plugin", "boom")
    status = operands.pod_status(operand_pod("device-plugin"), None, st, "the log's tail")
    cs = next(c for c in status["containerStatuses"] if c["name"] == "nvidia-device-plugin")
    assert cs["lastState"]["terminated"]["message"] == "the log's tail"


def test_waiting_operand_is_stuck_in_init() -> None:
    """Operands after a failed prerequisite wait in an init container (kubectl: Init:0/N)."""
    pod = operand_pod("operator-validator")
    st = operands.OperandState(operands.INIT_CRASH, "cuda-validation", operands.CUDA)
    status = operands.pod_status(pod, None, st)
    inits = status["initContainerStatuses"]
    assert status["phase"] == "Pending" and [("terminated" in c["state"]) for c in inits] == [True, True, False, False]
    assert inits[2]["state"]["waiting"]["reason"] == "CrashLoopBackOff" and "message" not in inits[2]["lastState"]["terminated"]
    assert operands.operand_of(pod) == "operator-validator"


def test_no_operand_sets_a_termination_message_policy() -> None:
    """GPU Operator v26.7.0's assets/state-*/0500_daemonset.yaml set no terminationMessagePolicy (the API server's
    default, File): the simulated DaemonSets and the CUDA validation pod set none either."""
    objects = [manifests.daemonset(op) for op in (*names.OPERANDS, "dra-kubelet-plugin")]
    specs = [o["spec"]["template"]["spec"] for o in objects] + [manifests.cuda_workload_pod("a100-0")["spec"]]
    containers = [c for spec in specs for c in spec.get("initContainers", []) + spec["containers"]]
    assert containers and not [c["name"] for c in containers if "terminationMessagePolicy" in c]


# --- policy and CRD ------------------------------------------------------------------------------------------------


def test_default_policy_is_the_helm_default() -> None:
    """§1: the Helm default mig.strategy is single; migManager.config.default all-disabled; operands enabled."""
    pol = policy.from_object(manifests.cluster_policy())
    assert pol is not None and pol.mig_strategy == "single" and pol.mig_config_default == "all-disabled"
    assert all(pol.enabled(op) for op in names.OPERANDS)
    patched = policy.from_object({"spec": {"devicePlugin": {"enabled": False, "config": {"name": "c", "default": "any"}}}})
    assert patched is not None and (patched.device_plugin, patched.device_plugin_config, patched.device_plugin_default) == (False, "c", "any")
    assert patched.mig_strategy == ""  # unset: the file decides (§1 precedence)


def test_crd_schema_has_the_fields_the_labs_use() -> None:
    spec = manifests.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert spec["mig"]["properties"]["strategy"]["enum"] == ["none", "single", "mixed"]
    assert set(spec["devicePlugin"]["properties"]["config"]["properties"]) == {"name", "default"}
    assert {"gfd", "dcgmExporter", "validator", "driver", "toolkit", "migManager"} <= set(spec)


def test_default_mig_configmap_has_the_operator_names() -> None:
    """§4 default named configs: all-disabled, all-enabled, all-1g.10gb, all-balanced ... for every capable model."""
    text = manifests.mig_configmap()["data"][names.MIG_CONFIG_KEY]
    for name in ("all-disabled", "all-enabled", "all-1g.10gb", "all-1g.5gb", "all-balanced", "all-1g.6gb"):
        assert f"  {name}:" in text
    node, _ = settle(make_node("A30-24GB", 1), default_policy())
    assert node["metadata"]["labels"]["nvidia.com/mig.capable"] == "true"
