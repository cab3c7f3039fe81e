"""The simulated MIG manager's decisions and what a node advertises after it applied a layout (§2-§4)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cluster.gpu import mig
from cluster.sim.gpu import hoststate, manifests, migmanager, names, policy as policy_mod
from gpustack_factories import default_policy, ext, make_node, make_pod, settle, with_layout

pytestmark = pytest.mark.unit
FILE = manifests.mig_configmap()["data"][names.MIG_CONFIG_KEY]
IMPOSSIBLE = """version: v1
mig-configs:
  too-big:
  - devices: all
    mig-enabled: true
    mig-devices:
      "3g.40gb": 2
      "1g.10gb": 1
"""


def named(**changes: Any) -> policy_mod.Policy:
    """A policy whose ``migManager.config.name`` names a ConfigMap: the manager reads that file."""
    return default_policy(mig_config="custom-mig-config", **changes)


def labelled(config: str, model: str = "A100-SXM4-80GB", gpus: int = 4, **labels: str) -> dict:
    node, _ = settle(make_node(model, gpus), default_policy())
    node["metadata"]["labels"].update({names.MIG_CONFIG: config, **labels})
    return node


def applied(config: str, strategy: str = "mixed", model: str = "A100-SXM4-80GB") -> dict:
    node = labelled(config, model)
    d = migmanager.decide(node, default_policy(mig_strategy=strategy), FILE)
    assert d.action == migmanager.APPLY and d.result is not None and d.result.ok, d
    node = with_layout(node, d.result.layouts)
    node, _ = settle(node, default_policy(mig_strategy=strategy))
    return node


def test_unknown_config_name_fails_at_once() -> None:
    """§3 mig.config.state: `failed` if the name is not in the file (assert --valid-config), no pending."""
    d = migmanager.decide(labelled("all-9g.99gb"), default_policy(), FILE)
    assert d.action == migmanager.FAILED and d.reason == "selected mig-config not present: all-9g.99gb"


def test_already_applied_config_succeeds_at_once() -> None:
    """§3: `success` immediately when the config is already applied (all-disabled on a fresh node)."""
    d = migmanager.decide(labelled("all-disabled"), default_policy(), FILE)
    assert d.action == migmanager.SUCCESS


def test_a_new_layout_goes_through_pending() -> None:
    """§3: a real change -> pending, then apply; recorded success/failed stops further work."""
    node = labelled("all-1g.10gb")
    assert migmanager.decide(node, default_policy(), FILE).action == migmanager.APPLY
    node["metadata"]["labels"][names.MIG_CONFIG_STATE] = "success"
    node["metadata"]["annotations"][names.MIG_APPLIED] = "all-1g.10gb"
    assert migmanager.decide(node, default_policy(), FILE).action == migmanager.NONE


def test_impossible_layout_fails_with_a_reason() -> None:
    """§4 fit: 3g.40gb x2 + 1g.10gb does not fit an 8-slice GPU -> apply fails with the placement reason."""
    d = migmanager.decide(labelled("too-big"), named(), IMPOSSIBLE)
    assert d.action == migmanager.APPLY and d.result is not None and not d.result.ok
    assert "does not fit on NVIDIA A100-SXM4-80GB" in d.reason


def test_broken_file_fails() -> None:
    """§4 strict parser: an unknown field in the mig-parted file -> failed with the parser's words."""
    d = migmanager.decide(labelled("x"), named(), "version: v1\nmig-configs:\n  x:\n  - devices: all\n    mig-enabled: false\n    colour: red\n")
    assert d.action == migmanager.FAILED and "unexpected field: colour" in d.reason


def test_t4_is_not_mig_capable() -> None:
    """§4/§3: a T4 has no MIG manager; a mig.config label there does nothing."""
    assert migmanager.decide(labelled("all-1g.10gb", "T4", 1), default_policy(), FILE).action == migmanager.NONE


def test_all_1g_10gb_mixed_gives_7_per_gpu_and_no_whole_gpus() -> None:
    """§2 mixed + §4 defaults: all-1g.10gb on A100-80GB -> nvidia.com/mig-1g.10gb 7 per GPU; nvidia.com/gpu gone;
    parents labelled gpu.replicas=0."""
    node = applied("all-1g.10gb")
    assert ext(node) == {"nvidia.com/mig-1g.10gb": "28"}
    labels = node["metadata"]["labels"]
    assert labels["nvidia.com/mig-1g.10gb.count"] == "28" and labels["nvidia.com/gpu.replicas"] == "0"
    assert labels["nvidia.com/mig-1g.10gb.product"] == "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"


def test_all_balanced_gives_2_1_1_per_gpu() -> None:
    """§4 defaults: all-balanced on A100-80GB = 1g.10gb x2 + 2g.20gb x1 + 3g.40gb x1 per GPU."""
    node = applied("all-balanced")
    assert ext(node) == {"nvidia.com/mig-1g.10gb": "8", "nvidia.com/mig-2g.20gb": "4", "nvidia.com/mig-3g.40gb": "4"}


def test_single_strategy_counts_mig_devices_as_gpus() -> None:
    """§2 single: nvidia.com/gpu = #MIG devices; gpu.product gets -MIG-<profile>."""
    node = applied("all-1g.10gb", strategy="single")
    assert ext(node) == {"nvidia.com/gpu": "28"}
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"


def test_single_strategy_with_mixed_profiles_crashes_the_plugin() -> None:
    """§2 single: more than one MIG device type -> the plugin fails (allocatable 0); GFD labels MIG-INVALID."""
    node = applied("all-balanced", strategy="single")
    assert ext(node, "allocatable") == {"nvidia.com/gpu": "0"}
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-MIG-INVALID"


def test_time_sliced_mig_1g_10gb_gives_28_per_gpu() -> None:
    """§1: mixed-strategy MIG resources can be time-sliced: 1g.10gb x 4 replicas = 28 allocations per GPU."""
    cfg = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/mig-1g.10gb\n      replicas: 4\n"
    node = applied("all-1g.10gb")
    pol = default_policy(mig_strategy="mixed", device_plugin_config="cm", device_plugin_default="ts")
    node, _ = settle(node, pol, {"cm": {"ts": cfg}})
    assert ext(node) == {"nvidia.com/mig-1g.10gb": str(28 * 4)}
    assert node["metadata"]["labels"]["nvidia.com/mig-1g.10gb.replicas"] == "4"


def test_mps_with_mig_is_rejected() -> None:
    """§1: MPS sharing with MIG devices -> `sharing using MPS is not supported for MIG devices`."""
    cfg = ("version: v1\nflags:\n  mpsRoot: /run/nvidia/mps\nsharing:\n  mps:\n    resources:\n"
           "    - name: nvidia.com/gpu\n      replicas: 2\n")
    node = applied("all-1g.10gb", strategy="single")
    pol = default_policy(mig_strategy="single", device_plugin_config="cm", device_plugin_default="mps")
    _, plan = settle(node, pol, {"cm": {"mps": cfg}})
    assert plan.operands["device-plugin"].message.endswith("sharing using MPS is not supported for MIG devices")


def test_pause_and_restore_deploy_labels() -> None:
    """§3: during pending the plugin, GFD, dcgm and dcgm-exporter deploy labels are paused-for-mig-change, and so
    is the GPU-client label third-party DaemonSets opt in with (GPU Operator v26.7 sets it; mig-parted v0.15)."""
    node, _ = settle(make_node(), default_policy())
    paused = migmanager.paused_labels(node["metadata"]["labels"])
    assert set(paused) == {names.DEPLOY_PREFIX + o
                           for o in ("device-plugin", "gpu-feature-discovery", "dcgm", "dcgm-exporter", "client")}
    assert set(paused.values()) == {names.PAUSED}
    node["metadata"]["labels"].update(paused)
    assert migmanager.restored_labels(node["metadata"]["labels"]) == {k: "true" for k in paused}
    _, plan = settle(node, default_policy())
    assert plan.operands  # the operator keeps the paused labels while the MIG manager works
    assert node["metadata"]["labels"][names.DEPLOY_PREFIX + "device-plugin"] == names.PAUSED


def holder(uuid: str, phase: str = "Running", namespace: str = "t") -> dict:
    pod = make_pod(annotations={names.POD_DEVICES: json.dumps({"main": [{"resource": "r", "id": "x", "uuid": uuid}]})},
                   phase=phase)
    pod["metadata"]["namespace"] = namespace
    return pod


def test_held_instances_come_from_the_devices_allocate_recorded() -> None:
    """§9: what a workload holds is read from its recorded devices; finished pods and operands hold nothing."""
    node = applied("all-1g.10gb")
    inv = hoststate.inventory_of(node)
    assert inv is not None
    gpu1 = inv.gpus[1]
    pods = [holder(gpu1.mig_devices[2].uuid), holder(inv.gpus[0].mig_devices[0].uuid, phase="Succeeded"),
            holder(inv.gpus[3].mig_devices[0].uuid, namespace=names.NAMESPACE)]
    assert migmanager.held_instances(pods, inv.gpus) == {1: {2}}


def test_a_busy_gpu_refuses_and_keeps_what_was_destroyed() -> None:
    """§9: GPUs that already match are skipped, GPUs before the busy one change, destroying stops at the busy
    instance (those destroyed stay destroyed), GPUs after it are not touched, and the reason names the GPU."""
    node = applied("all-1g.10gb")
    inv = hoststate.inventory_of(node)
    assert inv is not None
    target = mig.apply("all-3g.40gb", mig.parse(FILE), inv.gpus).layouts
    outcome = migmanager.apply_per_gpu(target, inv.gpus, {1: {4}})
    assert outcome.reason == "GPU 1: error destroying GPU instance 1g.10gb at placement 4:1: In use by another client"
    after = {l.index: l for l in outcome.layouts}
    assert after[0] == target[0]
    assert len(after[1].placements) == 5 and after[1].mig_enabled  # instances 5 and 6 destroyed, 0-4 left
    assert after[2] == mig.current_layout(inv.gpus[2]) and after[3] == mig.current_layout(inv.gpus[3])


def test_a_whole_gpu_in_use_refuses_the_mig_mode_change() -> None:
    """§9: enabling MIG needs a GPU reset, which the driver refuses while a process holds the GPU."""
    node = labelled("all-1g.10gb")
    inv = hoststate.inventory_of(node)
    assert inv is not None
    target = mig.apply("all-1g.10gb", mig.parse(FILE), inv.gpus).layouts
    outcome = migmanager.apply_per_gpu(target, inv.gpus, {0: {None}})
    assert outcome.reason == "GPU 0: error setting MIG mode: In use by another client"
    assert all(not l.mig_enabled for l in outcome.layouts)
    assert migmanager.apply_per_gpu(target, inv.gpus, {}).layouts == target


def test_after_a_failure_only_a_label_change_or_a_new_manager_pod_tries_again() -> None:
    """§9 (``MP cmd/nvidia-mig-manager/main.go``): a failed config is not retried by the same manager pod."""
    node = labelled("all-1g.10gb", **{names.MIG_CONFIG_STATE: "failed"})
    node["metadata"]["annotations"][names.MIG_FAILURE] = migmanager.failure_annotation(
        "all-1g.10gb", "busy", "mm-1", migmanager.source(node, default_policy()))
    assert migmanager.decide(node, default_policy(), FILE, "mm-1").action == migmanager.NONE
    assert migmanager.decide(node, default_policy(), FILE, "mm-2").action == migmanager.APPLY


def test_a_failure_is_tried_again_once_mig_manager_config_names_another_file() -> None:
    """The operator rolls the mig-manager DaemonSet when ``migManager.config`` changes (its config volume), so a
    label that failed against the old file is applied again from the new one; the same file keeps the failure."""
    node = labelled("all-1g.10gb", **{names.MIG_CONFIG_STATE: "failed"})
    node["metadata"]["annotations"][names.MIG_FAILURE] = migmanager.failure_annotation(
        "all-1g.10gb", "selected mig-config not present: all-1g.10gb", "mm-1", "old-mig-config")
    assert migmanager.decide(node, default_policy(mig_config="old-mig-config"), FILE, "mm-1").action == migmanager.NONE
    assert migmanager.decide(node, default_policy(), FILE, "mm-1").action == migmanager.APPLY


def test_a_failure_for_a_missing_configmap_is_tried_again_once_it_exists() -> None:
    """A real mig-manager pod whose config volume is missing waits instead of running; created, it applies."""
    node = labelled("all-1g.10gb", **{names.MIG_CONFIG_STATE: "failed"})
    missing = migmanager.decide(node, named(), None, "mm-1")
    assert missing.action == migmanager.FAILED
    assert missing.reason == 'configmap "custom-mig-config" not found in namespace gpu-operator'
    node["metadata"]["annotations"][names.MIG_FAILURE] = migmanager.failure_annotation(
        "all-1g.10gb", missing.reason, "mm-1", "custom-mig-config")
    assert migmanager.decide(node, named(), None, "mm-1").action == migmanager.NONE
    assert migmanager.decide(node, named(), FILE, "mm-1").action == migmanager.APPLY


def test_the_default_policy_names_no_configmap_and_the_manager_generates_its_file() -> None:
    """GPU Operator v26.7.0's chart renders ``migManager.config`` without ``name``; MIG manager v0.14+ then
    generates its layouts from the GPUs (``setupMigConfig``): no ConfigMap is read, none can be missing, and
    the file is the node's ``<node>-mig-config``."""
    assert manifests.cluster_policy()["spec"]["migManager"]["config"] == {"default": "all-disabled"}
    assert default_policy().mig_config == ""
    node = labelled("all-1g.10gb")
    d = migmanager.decide(node, default_policy(), None)
    assert d.action == migmanager.APPLY and d.result is not None and d.result.ok
    assert d.file == f"{node['metadata']['name']}-mig-config"
    assert migmanager.decide(labelled("too-big"), default_policy(), IMPOSSIBLE).reason == \
        "selected mig-config not present: too-big"  # the default ConfigMap's text is not what it reads


def test_a_named_configmap_replaces_the_generated_file() -> None:
    """With ``migManager.config.name`` set the manager reads that ConfigMap (``CONFIG_FILE``) and nothing else."""
    d = migmanager.decide(labelled("too-big"), named(), IMPOSSIBLE)
    assert d.file == "custom-mig-config" and d.action == migmanager.APPLY
    assert migmanager.decide(labelled("all-1g.10gb"), named(), IMPOSSIBLE).reason == \
        "selected mig-config not present: all-1g.10gb"


def test_gpu_clients_are_daemonset_pods_that_select_the_client_label() -> None:
    """waitForPodsToBeDeleted (mig-parted v0.15) waits for DaemonSet pods selecting nvidia.com/gpu.deploy.client,
    by nodeSelector or required node affinity; a bare pod, or a DaemonSet pod that does not select it, is not one."""
    key = names.DEPLOY_PREFIX + names.CLIENT
    owned = {"ownerReferences": [{"kind": "DaemonSet", "name": "agent"}]}
    by_selector = {"metadata": owned, "spec": {"nodeSelector": {key: "true"}}}
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": ["true"]}]}
    by_affinity = {"metadata": owned, "spec": {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}}}
    assert migmanager.is_gpu_client(by_selector) and migmanager.is_gpu_client(by_affinity)
    assert not migmanager.is_gpu_client({"metadata": {}, "spec": {"nodeSelector": {key: "true"}}})
    assert not migmanager.is_gpu_client({"metadata": owned, "spec": {"nodeSelector": {"other": "true"}}})


def test_held_instances_read_the_checkpoint_not_a_forged_annotation() -> None:
    """Issue 15: a pod's gpulab.dev/devices annotation is writable by its owner. With the kubelet's checkpoint,
    what a pod holds comes from there: a forged annotation neither blocks a change nor hides a holder."""
    node = applied("all-1g.10gb")
    inv = hoststate.inventory_of(node)
    assert inv is not None
    forged = holder(inv.gpus[2].mig_devices[0].uuid)  # claims GPU 2 in its annotation, holds nothing
    real = holder("GPU-not-in-annotation")
    real["metadata"]["uid"] = "real-uid"
    by_checkpoint = {"real-uid": [inv.gpus[1].mig_devices[3].uuid]}
    held = migmanager.held_instances([forged, real], inv.gpus,
                                     lambda p: by_checkpoint.get(p["metadata"].get("uid", ""), []))
    assert held == {1: {3}}
