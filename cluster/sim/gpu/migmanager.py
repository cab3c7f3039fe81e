"""The MIG manager's decisions for one node (``MP pkg/mig/reconfigure/reconfigure.go``, reference sections 3, 9).

Given the ``nvidia.com/mig.config`` label, the mig-parted file and the GPUs' current layout, decide: nothing to
do, ``failed`` at once (the name is not in the file, the file is broken), ``success`` at once (already applied),
or a real reconfiguration (``pending``, pause the operator's GPU clients, apply GPU by GPU, then ``success`` or
``failed`` with the reason). The MIG manager never touches user pods: a GPU still held by a workload makes the
driver refuse the change (``apply_per_gpu``). The stack runs the steps and the delay. Plain data.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cluster import errors
from cluster.gpu import inventory, mig
from cluster.sim.gpu import hoststate, names, policy as policy_mod

NONE, SUCCESS, FAILED, APPLY = "none", "success", "failed", "apply"
APPLY_SECONDS = 1.5  # a GPU reset and instance creation take a moment on a real node


@dataclass(frozen=True)
class Decision:
    action: str
    config: str = ""
    reason: str = ""
    result: mig.ApplyResult | None = None
    file: str = ""  # the mig-parted ConfigMap the decision read


def failure(node: Mapping[str, Any]) -> tuple[str, str]:
    """(config, reason) of the last failed reconfiguration, or ("", "")."""
    config, reason, _ = _failure(node)
    return config, reason


def _failure(node: Mapping[str, Any]) -> tuple[str, str, str]:
    config, reason, pod, _ = _failure_record(node)
    return config, reason, pod


def _failure_record(node: Mapping[str, Any]) -> tuple[str, str, str, str]:
    try:
        raw = json.loads(hoststate.node_annotations(node).get(names.MIG_FAILURE, "{}"))
        return (str(raw.get("config", "")), str(raw.get("reason", "")), str(raw.get("pod", "")),
                str(raw.get("file", "")))
    except (ValueError, AttributeError):
        return "", "", "", ""


def finished(node: Mapping[str, Any], config: str) -> bool:
    """The manager is done with ``config`` on this node: applied, or failed for that config (a success or failure
    left from an earlier config does not count: the manager has not taken the new label up yet)."""
    state = hoststate.node_labels(node).get(names.MIG_CONFIG_STATE)
    if state == "success":
        return hoststate.node_annotations(node).get(names.MIG_APPLIED) == config
    return state == "failed" and _failure_record(node)[0] == config


def failure_annotation(config: str, reason: str, pod: str = "", file: str = "") -> str:
    """The failure record; ``pod`` is the mig-manager pod that failed (a new one tries the label again) and
    ``file`` the ConfigMap it read: when ``migManager.config`` names another one, the operator rolls the
    mig-manager DaemonSet (its config volume changed), and the new pod applies the label again."""
    return json.dumps({"config": config, "reason": reason, "pod": pod, "file": file}, sort_keys=True)


def _same(layouts: tuple[mig.GpuLayout, ...], gpus: tuple[inventory.GpuInfo, ...]) -> bool:
    now = {g.index: mig.current_layout(g) for g in gpus}
    return all(_same_layout(now[l.index], l) for l in layouts)


@functools.lru_cache(maxsize=16)
def _parse(text: str, source: str) -> tuple[mig.MigPartedConfig | None, str]:
    """The mig-parted file, parsed once per distinct text (every node's reconcile reads the same file)."""
    try:
        return mig.parse(text, source=f"configmap {source}"), ""
    except errors.ConfigError as exc:
        return None, "; ".join(exc.problems)


def source(node: Mapping[str, Any], pol: policy_mod.Policy) -> str:
    """Where the manager reads its mig-parted file: the ConfigMap ``migManager.config.name`` names, or, with no
    name, the file it generates from the node's GPUs and stores as the ConfigMap ``<node>-mig-config``
    (MIG manager v0.14+, ``MP cmd/nvidia-mig-manager/main.go`` ``setupMigConfig``, ``createNodeConfigMap``)."""
    return pol.mig_config or f"{(node.get('metadata') or {}).get('name', '')}-mig-config"


def generated_file(node: Mapping[str, Any]) -> str | None:
    """The mig-parted file MIG manager v0.14+ generates from the node's GPUs when no ConfigMap is named
    (``MP pkg/mig/builder``: all-disabled, all-enabled, all-balanced and one all-<profile> layout per profile).
    gpulab writes the named layouts of the operator's default ConfigMap for the node's model, which are those
    layouts; the default ConfigMap is only the manager's fallback when no MIG profile is discovered (mounted as
    ``config-default.yaml``, ``DEFAULT_CONFIG_FILE``; GPU Operator v26.7.0 ``controllers/object_controls.go``)."""
    model = hoststate.hardware(node).model
    return None if model is None or not model.mig_capable else mig.default_config_yaml([model])


def decide(node: Mapping[str, Any], pol: policy_mod.Policy | None, file_text: str | None,
           manager_pod: str | None = None) -> Decision:
    """``file_text`` is the text of the ConfigMap ``migManager.config.name`` names (ignored when it names none:
    the manager then generates its file, ``generated_file``). ``manager_pod`` is the node's mig-manager pod
    now: after a failure, the manager waits for the label to change (``MP cmd/nvidia-mig-manager/main.go``),
    and a new manager pod applies the current label again."""
    hw = hoststate.hardware(node)
    labels = hoststate.node_labels(node)
    wanted = labels.get(names.MIG_CONFIG)
    if pol is None or not pol.mig_manager or hw.model is None or not hw.model.mig_capable or not wanted:
        return Decision(NONE)
    state = labels.get(names.MIG_CONFIG_STATE)
    applied = hoststate.node_annotations(node).get(names.MIG_APPLIED)
    if state == "success" and applied == wanted:
        return Decision(NONE)
    file = source(node, pol)
    if not pol.mig_config:
        file_text = generated_file(node)
    failed_config, failed_reason, failed_pod, failed_file = _failure_record(node)
    # A missing ConfigMap never starts a real manager pod (its config volume waits), so once it exists the
    # label is applied; a different file means a rolled DaemonSet and a new pod.
    file_appeared = file_text is not None and failed_reason == _missing(file)
    if state == "failed" and failed_config == wanted and (manager_pod is None or failed_pod in ("", manager_pod)) \
            and failed_file == file and not file_appeared:
        return Decision(NONE)
    inv = hoststate.inventory_of(node, with_faults=False)
    assert inv is not None
    if file_text is None:
        return Decision(FAILED, wanted, _missing(file), file=file)
    spec, problem = _parse(file_text, file)
    if spec is None:
        return Decision(FAILED, wanted, "error parsing config file: " + problem, file=file)
    if wanted not in spec.configs:
        return Decision(FAILED, wanted, f"selected mig-config not present: {wanted}", file=file)
    result = mig.apply(wanted, spec, inv.gpus)
    if result.ok and _same(result.layouts, inv.gpus):
        return Decision(SUCCESS, wanted, result=result, file=file)
    return Decision(APPLY, wanted, result.reason or "", result, file=file)


def _missing(configmap: str) -> str:
    return f'configmap "{configmap}" not found in namespace {names.NAMESPACE}'


def paused_labels(node_labels: Mapping[str, str]) -> dict[str, str]:
    """Deploy labels of the GPU clients set to ``paused-for-mig-change`` (only those that are ``true``)."""
    return {names.DEPLOY_PREFIX + op: names.PAUSED for op in names.PAUSED_DURING_MIG
            if node_labels.get(names.DEPLOY_PREFIX + op) == "true"}


def is_gpu_client(pod: Mapping[str, Any]) -> bool:
    """A pod of a DaemonSet that opted in to pausing (``waitForPodsToBeDeleted`` in mig-parted v0.15 waits for
    these too): it selects the ``nvidia.com/gpu.deploy.client`` label by nodeSelector or required node affinity."""
    key = names.DEPLOY_PREFIX + names.CLIENT
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    if not any(isinstance(o, Mapping) and o.get("kind") == "DaemonSet" for o in meta.get("ownerReferences") or []):
        return False
    if key in (spec.get("nodeSelector") or {}):
        return True
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    return any(isinstance(e, Mapping) and e.get("key") == key
               for term in required.get("nodeSelectorTerms") or [] if isinstance(term, Mapping)
               for e in term.get("matchExpressions") or [])


def restored_labels(node_labels: Mapping[str, str]) -> dict[str, str]:
    return {k: "true" for k, v in node_labels.items() if k.startswith(names.DEPLOY_PREFIX) and v == names.PAUSED}


def held_instances(pods: Iterable[Mapping[str, Any]], gpus: Iterable[inventory.GpuInfo],
                   devices_of: Callable[[Mapping[str, Any]], Iterable[str]] | None = None) -> dict[int, set[int | None]]:
    """GPU index -> what live workload pods hold on it: MIG instances by creation position, ``None`` for the whole
    GPU. ``devices_of(pod)`` gives the device UUIDs a pod holds: the stack reads them from the kubelet's device
    checkpoint (nothing a pod's owner can write); without one, from the allocation shown on the pod
    (``gpulab.dev/devices``, the only record on a cluster whose kubelets gpulab does not play)."""
    where: dict[str, tuple[int, int | None]] = {}
    for g in gpus:
        where[g.uuid] = (g.index, None)
        where.update({m.uuid: (g.index, i) for i, m in enumerate(g.mig_devices)})
    held: dict[int, set[int | None]] = {}
    for pod in pods:
        if pod.get("metadata", {}).get("namespace") == names.NAMESPACE:
            continue
        if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for uuid in (devices_of or _shown_devices)(pod):
            hit = where.get(str(uuid))
            if hit is not None:
                held.setdefault(hit[0], set()).add(hit[1])
    return held


def _shown_devices(pod: Mapping[str, Any]) -> list[str]:
    try:
        recorded = json.loads((pod.get("metadata", {}).get("annotations") or {}).get(names.POD_DEVICES, "{}"))
    except ValueError:
        return []
    return [str(d.get("uuid", "")) for devices in (recorded.values() if isinstance(recorded, dict) else ())
            for d in (devices if isinstance(devices, list) else ()) if isinstance(d, dict)]


@dataclass(frozen=True)
class Outcome:
    """Every GPU's layout after an apply attempt, and the driver's refusal if one GPU was busy."""

    layouts: tuple[mig.GpuLayout, ...]
    reason: str | None = None
    gpu: int | None = None  # the GPU the driver refused
    busy: inventory.Placement | None = None  # the instance in use there; None with ``gpu``: a MIG-mode change
    target: tuple[str, ...] = ()  # the refused GPU's target profiles (mig-parted tries their orderings)


def apply_per_gpu(target: tuple[mig.GpuLayout, ...], gpus: tuple[inventory.GpuInfo, ...],
                  held: Mapping[int, set[int | None]]) -> Outcome:
    """``nvidia-mig-parted apply`` GPU by GPU: a GPU whose layout already matches is skipped; a GPU a workload
    still holds makes the driver refuse ("In use by another client") and the apply stops there.

    A MIG-mode change needs a GPU reset, refused outright on a busy GPU. A new layout on a MIG-enabled GPU first
    destroys its instances (here in reverse creation order, our choice); destroying stops at the first busy one,
    and the instances already destroyed stay destroyed.
    """
    out = {g.index: mig.current_layout(g) for g in gpus}
    for want in sorted(target, key=lambda l: l.index):
        now = out.get(want.index)
        if now is None or _same_layout(now, want):
            continue
        busy = held.get(want.index, set())
        if busy and (now.mig_enabled != want.mig_enabled or None in busy):
            return Outcome(_ordered(out), f"GPU {want.index}: error setting MIG mode: In use by another client",
                           want.index)
        if busy:
            kept = list(now.placements)
            while kept and len(kept) - 1 not in busy:
                kept.pop()
            out[want.index] = mig.GpuLayout(want.index, True, tuple(kept))
            p = kept[-1]
            return Outcome(_ordered(out), f"GPU {want.index}: error destroying GPU instance {p.profile} at "
                                          f"placement {p.start}:{p.size}: In use by another client",
                           want.index, p, tuple(q.profile for q in want.placements))
        out[want.index] = want
    return Outcome(_ordered(out))


def _ordered(layouts: Mapping[int, mig.GpuLayout]) -> tuple[mig.GpuLayout, ...]:
    return tuple(layouts[i] for i in sorted(layouts))


def _same_layout(a: mig.GpuLayout, b: mig.GpuLayout) -> bool:
    return a.mig_enabled == b.mig_enabled and sorted(a.placements, key=repr) == sorted(b.placements, key=repr)
