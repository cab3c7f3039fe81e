"""What the simulated operator, device plugin, GFD and validator make a node show (the stack's pure core).

Each test names the gpu-semantics.md row (or the docs/gpu-stack.md rule) it checks.
"""

from __future__ import annotations

import pytest

from cluster.sim import nodes
from cluster.sim.gpu import faillogs, names, nodeplan, operands, plugin
from gpustack_factories import TS_ANY_10, TS_RENAME_4, default_policy, ext, make_node, settle

pytestmark = pytest.mark.unit
CM = "device-plugin-config"


def test_before_install_nothing_is_advertised_or_labelled() -> None:
    """No ClusterPolicy: a GPU node shows no nvidia.com resources and no NVIDIA labels (seeds: plugin not running)."""
    node, plan = settle(make_node(), None)
    assert ext(node) == {} and plan.operands == {}
    assert not any(k.startswith("nvidia.com/") for k in node["metadata"]["labels"])


def test_operator_labels_nfd_present_and_deploy() -> None:
    """§3 other components: NFD's pci-10de label, gpu.present, deploy labels; mig-manager only on MIG-capable nodes."""
    a100, _ = settle(make_node(), default_policy())
    labels = a100["metadata"]["labels"]
    assert labels[names.NFD_PCI] == "true" and labels[names.GPU_PRESENT] == "true"
    assert labels[names.DEPLOY_PREFIX + "device-plugin"] == "true"
    assert labels[names.DEPLOY_PREFIX + "mig-manager"] == "true"
    assert labels[names.MIG_CONFIG] == "all-disabled"  # §3: operator default on MIG-capable nodes
    t4, _ = settle(make_node("T4", 1), default_policy())
    assert names.DEPLOY_PREFIX + "mig-manager" not in t4["metadata"]["labels"]
    assert names.MIG_CONFIG not in t4["metadata"]["labels"]
    assert t4["metadata"]["labels"]["nvidia.com/mig.capable"] == "false"


def test_admin_false_deploy_label_is_kept_and_disables_the_plugin() -> None:
    """Operator: an explicit nvidia.com/gpu.deploy.device-plugin=false stays, and no GPUs are advertised."""
    node, _ = settle(make_node(labels={names.DEPLOY_PREFIX + "device-plugin": "false"}), default_policy())
    assert node["metadata"]["labels"][names.DEPLOY_PREFIX + "device-plugin"] == "false"
    assert ext(node) == {}


def test_default_policy_advertises_whole_gpus_after_validation() -> None:
    """§2 strategy single without MIG: nvidia.com/gpu = GPUs; the validator gate holds allocatable at 0 until
    CUDA validation passes (docs: validator gate)."""
    node, plan = settle(make_node(), default_policy(), validated=False)
    assert ext(node) == {"nvidia.com/gpu": "4"} and ext(node, "allocatable") == {"nvidia.com/gpu": "0"}
    assert plan.awaiting_validation
    node, _ = settle(node, default_policy())
    assert ext(node, "allocatable") == {"nvidia.com/gpu": "4"}
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert node["metadata"]["labels"]["nvidia.com/mig.strategy"] == "single"


def test_time_slicing_rename_turns_4_gpus_into_16_shared() -> None:
    """§1 replica semantics + renameByDefault: 4 GPUs x 4 = nvidia.com/gpu.shared: 16; plain nvidia.com/gpu goes."""
    pol = default_policy(device_plugin_config=CM, device_plugin_default="timeslice-4")
    node, _ = settle(make_node(), default_policy())
    node, _ = settle(node, pol, {CM: {"timeslice-4": TS_RENAME_4}})
    assert ext(node) == {"nvidia.com/gpu.shared": "16"} == ext(node, "allocatable")
    labels = node["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"  # §3: renamed -> no -SHARED
    assert labels["nvidia.com/gpu.replicas"] == "4" and labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert labels["nvidia.com/gpu.count"] == "4"  # §3: not multiplied by replicas


def test_seed_004_any_key_10_replicas() -> None:
    """seeds/004: key `any`, 10 replicas, ClusterPolicy default `any` -> nvidia.com/gpu at 10 per GPU; §3 -SHARED."""
    pol = default_policy(device_plugin_config="time-slicing-config", device_plugin_default="any")
    node, _ = settle(make_node(), pol, {"time-slicing-config": {"any": TS_ANY_10}})
    assert ext(node) == {"nvidia.com/gpu": "40"} == ext(node, "allocatable")
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-SHARED"
    assert node["metadata"]["labels"]["nvidia.com/gpu.replicas"] == "10"


def test_node_label_selects_the_config_key() -> None:
    """§1 per-node selection: nvidia.com/device-plugin.config=<key> beats the default; no label -> default."""
    pol = default_policy(device_plugin_config=CM, device_plugin_default="plain")
    cms = {CM: {"plain": "version: v1\n", "timeslice-4": TS_RENAME_4}}
    plain, _ = settle(make_node(), pol, cms)
    assert ext(plain) == {"nvidia.com/gpu": "4"}
    shared, _ = settle(make_node(labels={names.DEVICE_PLUGIN_CONFIG: "timeslice-4"}), pol, cms)
    assert ext(shared) == {"nvidia.com/gpu.shared": "16"}


def test_operator_fallback_is_the_empty_config() -> None:
    """§1: no label and no default -> the operator's FALLBACK_STRATEGIES=empty (flags only), even with one key."""
    pol = default_policy(device_plugin_config=CM)
    node, _ = settle(make_node(), pol, {CM: {"timeslice-4": TS_RENAME_4}})
    assert ext(node) == {"nvidia.com/gpu": "4"}


def test_unknown_label_value_keeps_the_previous_config_and_crashes_the_sidecar() -> None:
    """§1: `specified config <x> does not exist`: the sidecar fails, the plugin keeps its previous config."""
    pol = default_policy(device_plugin_config=CM)
    cms = {CM: {"timeslice-4": TS_RENAME_4}}
    node, _ = settle(make_node(labels={names.DEVICE_PLUGIN_CONFIG: "timeslice-4"}), pol, cms)
    node["metadata"]["labels"][names.DEVICE_PLUGIN_CONFIG] = "nope"
    node, plan = settle(node, pol, cms)
    assert ext(node) == {"nvidia.com/gpu.shared": "16"}
    assert plan.operands["device-plugin"] == operands.OperandState(
        operands.CRASH, "config-manager", "specified config nope does not exist")


def test_unknown_label_on_a_fresh_plugin_blocks_it_in_init() -> None:
    """§1: with nothing linked yet, the config-manager init container fails and the plugin never starts."""
    pol = default_policy(device_plugin_config=CM)
    node, plan = settle(make_node(labels={names.DEVICE_PLUGIN_CONFIG: "nope"}), pol, {CM: {"a": TS_RENAME_4}})
    assert ext(node) == {}
    assert plan.operands["device-plugin"].phase == operands.INIT_CRASH


def test_missing_configmap_keeps_the_plugin_from_mounting_its_config() -> None:
    """Operator: a policy naming a ConfigMap that does not exist -> the plugin pod cannot mount its config."""
    node, plan = settle(make_node(), default_policy(device_plugin_config="absent", device_plugin_default="x"))
    assert plan.operands["device-plugin"].phase == operands.CREATING
    assert 'configmap "absent" not found' in plan.operands["device-plugin"].message
    assert ext(node) == {}


def test_replicas_one_crashes_the_plugin_and_allocatable_drops_to_zero() -> None:
    """§1 errors: replicas 1 -> the plugin crash-loops with the real line; the kubelet keeps capacity, allocatable 0."""
    pol = default_policy(device_plugin_config=CM, device_plugin_default="bad")
    bad = TS_RENAME_4.replace("replicas: 4", "replicas: 1")
    node, _ = settle(make_node(), default_policy())
    node, plan = settle(node, pol, {CM: {"bad": bad}})
    st = plan.operands["device-plugin"]
    assert st.phase == operands.CRASH and st.message.endswith("while decoding JSON: number of replicas must be >= 2")
    assert st.message.startswith("error starting plugins: unable to load config: unable to finalize config:")
    assert ext(node) == {"nvidia.com/gpu": "4"} and ext(node, "allocatable") == {"nvidia.com/gpu": "0"}


def test_unknown_keys_are_ignored_silently() -> None:
    """§1 parsing: non-strict; an unknown section (`timeSharing:`) gives no sharing and no error."""
    pol = default_policy(device_plugin_config=CM, device_plugin_default="typo")
    typo = TS_RENAME_4.replace("timeSlicing", "timeSharing")
    node, plan = settle(make_node(), pol, {CM: {"typo": typo}})
    assert plan.operands["device-plugin"].phase == operands.OK
    assert ext(node) == {"nvidia.com/gpu": "4"}
    assert node["metadata"]["labels"]["nvidia.com/gpu.sharing-strategy"] == "none"


def test_cluster_policy_mig_strategy_overrides_the_file() -> None:
    """§1 precedence: MIG_STRATEGY from ClusterPolicy.spec.mig.strategy beats flags.migStrategy in the file."""
    pol = default_policy(device_plugin_config="time-slicing-config", device_plugin_default="any")
    node, _ = settle(make_node(), pol, {"time-slicing-config": {"any": TS_ANY_10}})
    assert node["metadata"]["labels"]["nvidia.com/mig.strategy"] == "single"  # file said none
    unset = default_policy(device_plugin_config="time-slicing-config", device_plugin_default="any", mig_strategy="")
    node, _ = settle(make_node(), unset, {"time-slicing-config": {"any": TS_ANY_10}})
    assert "nvidia.com/mig.strategy" not in node["metadata"]["labels"]


def test_mps_wins_over_time_slicing() -> None:
    """§1: both sections present -> MPS wins (no error); GFD: sharing-strategy mps, mps.capable true."""
    both = TS_ANY_10 + "  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 3\n"
    both = both.replace("flags:\n  migStrategy: none\n", "flags:\n  migStrategy: none\n  mpsRoot: /run/nvidia/mps\n")
    pol = default_policy(device_plugin_config=CM, device_plugin_default="both")
    node, plan = settle(make_node(), pol, {CM: {"both": both}})
    assert plan.operands["device-plugin"].phase == operands.OK
    assert ext(node) == {"nvidia.com/gpu": "12"}
    assert node["metadata"]["labels"]["nvidia.com/gpu.sharing-strategy"] == "mps"
    assert node["metadata"]["labels"]["nvidia.com/mps.capable"] == "true"


def test_driver_missing_before_and_after_advertising() -> None:
    """docs faults: driver missing -> driver pod crash-loops, the rest wait in Init; never-advertised GPUs stay
    unadvertised; advertised ones keep capacity with allocatable 0 (the kubelet's view of a vanished plugin)."""
    fault = {names.FAULTS: '{"kinds": ["driver-missing"], "unhealthy": []}'}
    fresh, plan = settle(make_node(annotations=fault), default_policy())
    assert ext(fresh) == {}
    assert plan.operands["driver"] == operands.OperandState(operands.CRASH, "nvidia-driver-ctr", operands.DRIVER_MISSING,
                                                            faillogs.driver_missing(nodes.KERNEL_VERSION))
    assert plan.operands["device-plugin"].phase == operands.INIT_WAIT
    running, _ = settle(make_node(), default_policy())
    running["metadata"]["annotations"].update(fault)
    after, _ = settle(running, default_policy())
    assert ext(after) == {"nvidia.com/gpu": "4"} and ext(after, "allocatable") == {"nvidia.com/gpu": "0"}


def test_nouveau_and_toolkit_faults() -> None:
    """docs faults: nouveau bound -> the driver's nouveau error; toolkit misconfigured -> toolkit crash, no GPUs."""
    _, plan = settle(make_node(annotations={names.FAULTS: '{"kinds": ["nouveau-bound"]}'}), default_policy())
    assert plan.operands["driver"].message == operands.NOUVEAU
    assert plan.operands["driver"].lines == faillogs.nouveau_bound()
    node, plan = settle(make_node(annotations={names.FAULTS: '{"kinds": ["toolkit-misconfigured"]}'}), default_policy())
    assert plan.operands["container-toolkit"].phase == operands.CRASH and ext(node) == {}
    assert plan.operands["driver"].phase == operands.OK


def test_unhealthy_gpu_lowers_allocatable_capacity_stays() -> None:
    """§1 health (DP: unhealthy devices are not allocatable): one unhealthy GPU -> capacity 4, allocatable 3."""
    node, _ = settle(make_node(annotations={names.FAULTS: '{"kinds": [], "unhealthy": [2]}'}), default_policy())
    assert ext(node) == {"nvidia.com/gpu": "4"} and ext(node, "allocatable") == {"nvidia.com/gpu": "3"}


def test_cuda_validation_failing_leaves_every_gpu_allocatable() -> None:
    """reference §9: the plugin waits for driver-ready and toolkit-ready only, so a failing CUDA validation
    crash-loops the validator's cuda-validation init container while the node keeps capacity 4, allocatable 4."""
    node, plan = settle(make_node(annotations={names.FAULTS: '{"kinds": ["cuda-validation-failing"]}'}), default_policy())
    assert ext(node) == {"nvidia.com/gpu": "4"} and ext(node, "allocatable") == {"nvidia.com/gpu": "4"}
    assert plan.operands["operator-validator"] == operands.OperandState(operands.INIT_CRASH, "cuda-validation", operands.CUDA)
    assert plan.operands["device-plugin"].phase == operands.OK and not plan.awaiting_validation


def test_plugin_validation_failing_stalls_only_the_validator() -> None:
    """reference §9: a failing plugin validation shows at the validator's plugin-validation step; GPUs stay."""
    node, plan = settle(make_node(annotations={names.FAULTS: '{"kinds": ["plugin-validation-failing"]}'}),
                        default_policy())
    assert ext(node, "allocatable") == {"nvidia.com/gpu": "4"}
    assert plan.operands["operator-validator"] == operands.OperandState(
        operands.INIT_CRASH, "plugin-validation", operands.PLUGIN_VALIDATION, faillogs.plugin_validation())


def test_toolkit_fault_keeps_the_plugin_from_starting() -> None:
    """reference §9: the plugin's toolkit-validation init container waits for toolkit-ready: no GPUs at all."""
    node, plan = settle(make_node(annotations={names.FAULTS: '{"kinds": ["toolkit-misconfigured"]}'}),
                        default_policy(), validated=False)
    assert ext(node) == {} and ext(node, "allocatable") == {}
    assert plan.operands["device-plugin"] == operands.OperandState(
        operands.INIT_WAIT, "toolkit-validation", "waiting for the container toolkit")


def test_dra_mode_never_advertises_extended_resources() -> None:
    """docs mode rule: nvidia.com/dra-driver.enabled=true -> a ResourceSlice, no nvidia.com/gpu; GFD still labels."""
    node, _ = settle(make_node(), default_policy())
    node["metadata"]["labels"][names.DRA_ENABLED] = "true"
    node, plan = settle(node, default_policy())
    assert ext(node) == {} and plan.dra_mode and plan.dra_inventory is not None
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    _, unvalidated = settle(node, default_policy(), validated=False)
    assert unvalidated.dra_inventory is None


def test_uninstall_strips_what_the_stack_added_and_keeps_user_labels() -> None:
    """Uninstall: managed labels, resources and records go; nvidia.com/mig.config and the plugin label stay."""
    node, _ = settle(make_node(labels={names.DEVICE_PLUGIN_CONFIG: "x"}), default_policy())
    node["metadata"]["labels"][names.MIG_CONFIG_STATE] = "success"
    node, _ = settle(node, None)
    labels = node["metadata"]["labels"]
    assert ext(node) == {} and ext(node, "allocatable") == {}
    assert {k for k in labels if k.startswith(("nvidia.com/", "feature.node"))} == {names.MIG_CONFIG, names.DEVICE_PLUGIN_CONFIG}
    assert names.DEVICE_REGISTRY not in node["metadata"]["annotations"]


def test_disabled_device_plugin_advertises_nothing_but_gfd_labels() -> None:
    """ClusterPolicy devicePlugin.enabled=false: no extended resources; GFD keeps labelling."""
    node, _ = settle(make_node(), default_policy(device_plugin=False))
    assert ext(node) == {} and node["metadata"]["labels"]["nvidia.com/gpu.count"] == "4"


def test_registry_lists_replica_ids_for_the_allocate_hook() -> None:
    """§1 replica IDs `<uuid>::<i>`, the allocation policy and failRequestsGreaterThanOne reach the kubelet side."""
    import json

    pol = default_policy(device_plugin_config=CM, device_plugin_default="ts")
    node, _ = settle(make_node("T4", 1), pol, {CM: {"ts": TS_RENAME_4}})
    reg = json.loads(node["metadata"]["annotations"][names.DEVICE_REGISTRY])
    ids = [d[0] for d in reg["resources"]["nvidia.com/gpu.shared"]]
    assert len(ids) == 4 and all(i.startswith("GPU-") and i.endswith(f"::{n}") for n, i in enumerate(ids))
    assert reg["singleRequest"] == ["nvidia.com/gpu.shared"] and reg["policy"] == "distributed"


def test_plugin_states() -> None:
    """Plugin running/down/absent mapping used for the kubelet's grace behaviour."""
    pol = default_policy()
    ok = operands.OperandState()
    assert nodeplan.plugin_state(pol, {names.DEPLOY_PREFIX + "device-plugin": "true"}, False, "device-plugin", ok) == plugin.RUNNING
    assert nodeplan.plugin_state(pol, {names.DEPLOY_PREFIX + "device-plugin": names.PAUSED}, False, "device-plugin", ok) == plugin.DOWN
    assert nodeplan.plugin_state(pol, {names.DEPLOY_PREFIX + "device-plugin": "true"}, True, "device-plugin", ok) == plugin.ABSENT


def test_operator_supplies_the_mps_root() -> None:
    """§1 MPS needs --mps-root; the operator passes MPS_ROOT from devicePlugin.mps.root (default /run/nvidia/mps),
    so an MPS file without flags.mpsRoot runs; with the root emptied the plugin refuses to start."""
    mps = "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"
    pol = default_policy(device_plugin_config=CM, device_plugin_default="mps")
    node, plan = settle(make_node(), pol, {CM: {"mps": mps}})
    assert plan.operands["device-plugin"].phase == operands.OK and ext(node) == {"nvidia.com/gpu": "16"}
    _, plan = settle(make_node(), default_policy(device_plugin_config=CM, device_plugin_default="mps", mps_root=""),
                     {CM: {"mps": mps}})
    assert plan.operands["device-plugin"].message.endswith("using MPS requires --mps-root to be specified")


def test_mps_over_48_replicas_is_refused() -> None:
    """§1 MPS limits: at most 48 replicas per GPU with CC >= 7.5 -> `invalid device maximum allowed replicas exceeded`."""
    mps = "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 49\n"
    _, plan = settle(make_node(), default_policy(device_plugin_config=CM, device_plugin_default="m"), {CM: {"m": mps}})
    assert plan.operands["device-plugin"].message.endswith("invalid device maximum allowed replicas exceeded: 49 > 48")


def test_a_plugin_pod_whose_configmap_is_missing_shows_init_0_of_2() -> None:
    """A volume that cannot mount stops the operator's plugin pod before its two init containers: the kubelet
    reports every container waiting with PodInitializing (kubelet ``convertToAPIContainerStatuses``), so kubectl
    prints ``Init:0/2``, not ``ContainerCreating`` (GPU Operator v26.7.0 ``assets/state-device-plugin``)."""
    from cluster.sim.gpu import manifests

    template = manifests.daemonset("device-plugin")["spec"]["template"]
    inits = [c["name"] for c in template["spec"]["initContainers"]]
    assert len(inits) == 2
    pod = {"apiVersion": "v1", "kind": "Pod", "spec": {**template["spec"], "nodeName": "a100-0"},
           "metadata": {**template["metadata"], "name": "nvidia-device-plugin-daemonset-x", "namespace": names.NAMESPACE,
                        "uid": "u-1"}}
    node, plan = settle(make_node(), default_policy(device_plugin_config="absent", device_plugin_default="x"))
    st = plan.operands["device-plugin"]
    status = operands.pod_status(pod, node, st)
    assert status["phase"] == "Pending"
    assert [c["state"] for c in status["initContainerStatuses"]] == [{"waiting": {"reason": "PodInitializing"}}] * 2
    assert all(c["state"] == {"waiting": {"reason": "PodInitializing"}} for c in status["containerStatuses"])
    initialized = next(c for c in status["conditions"] if c["type"] == "Initialized")
    assert initialized["status"] == "False" and initialized["message"] == f"containers with incomplete status: [{' '.join(inits)}]"
    assert operands.matches({**pod, "status": status}, st)
