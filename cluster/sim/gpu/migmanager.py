"""The MIG manager's decisions for one node (``MP pkg/mig/reconfigure/reconfigure.go``, reference section 3).

Given the ``nvidia.com/mig.config`` label, the mig-parted file and the GPUs' current layout, decide: nothing to
do, ``failed`` at once (the name is not in the file, the file is broken), ``success`` at once (already applied),
or a real reconfiguration (``pending``, evict GPU pods, pause the GPU clients, apply, then ``success`` or
``failed`` with the reason). The stack runs the steps and the delay. Plain data.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
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


def failure(node: Mapping[str, Any]) -> tuple[str, str]:
    """(config, reason) of the last failed reconfiguration, or ("", "")."""
    try:
        raw = json.loads(hoststate.node_annotations(node).get(names.MIG_FAILURE, "{}"))
        return str(raw.get("config", "")), str(raw.get("reason", ""))
    except (ValueError, AttributeError):
        return "", ""


def failure_annotation(config: str, reason: str) -> str:
    return json.dumps({"config": config, "reason": reason}, sort_keys=True)


def _same(layouts: tuple[mig.GpuLayout, ...], gpus: tuple[inventory.GpuInfo, ...]) -> bool:
    now = {g.index: mig.current_layout(g) for g in gpus}
    return all(
        now[l.index].mig_enabled == l.mig_enabled and sorted(now[l.index].placements, key=repr) == sorted(l.placements, key=repr)
        for l in layouts
    )


@functools.lru_cache(maxsize=16)
def _parse(text: str, source: str) -> tuple[mig.MigPartedConfig | None, str]:
    """The mig-parted file, parsed once per distinct text (every node's reconcile reads the same file)."""
    try:
        return mig.parse(text, source=f"configmap {source}"), ""
    except errors.ConfigError as exc:
        return None, "; ".join(exc.problems)


def decide(node: Mapping[str, Any], pol: policy_mod.Policy | None, file_text: str | None) -> Decision:
    hw = hoststate.hardware(node)
    labels = hoststate.node_labels(node)
    wanted = labels.get(names.MIG_CONFIG)
    if pol is None or not pol.mig_manager or hw.model is None or not hw.model.mig_capable or not wanted:
        return Decision(NONE)
    state = labels.get(names.MIG_CONFIG_STATE)
    applied = hoststate.node_annotations(node).get(names.MIG_APPLIED)
    if state == "success" and applied == wanted:
        return Decision(NONE)
    if state == "failed" and failure(node)[0] == wanted:
        return Decision(NONE)
    inv = hoststate.inventory_of(node, with_faults=False)
    assert inv is not None
    if file_text is None:
        return Decision(FAILED, wanted, f'configmap "{pol.mig_config}" not found in namespace {names.NAMESPACE}')
    spec, problem = _parse(file_text, pol.mig_config)
    if spec is None:
        return Decision(FAILED, wanted, "error parsing config file: " + problem)
    if wanted not in spec.configs:
        return Decision(FAILED, wanted, f"selected mig-config not present: {wanted}")
    result = mig.apply(wanted, spec, inv.gpus)
    if result.ok and _same(result.layouts, inv.gpus):
        return Decision(SUCCESS, wanted, result=result)
    return Decision(APPLY, wanted, result.reason or "", result)


def paused_labels(node_labels: Mapping[str, str]) -> dict[str, str]:
    """Deploy labels of the GPU clients set to ``paused-for-mig-change`` (only those that are ``true``)."""
    return {names.DEPLOY_PREFIX + op: names.PAUSED for op in names.PAUSED_DURING_MIG
            if node_labels.get(names.DEPLOY_PREFIX + op) == "true"}


def restored_labels(node_labels: Mapping[str, str]) -> dict[str, str]:
    return {k: "true" for k, v in node_labels.items() if k.startswith(names.DEPLOY_PREFIX) and v == names.PAUSED}


def is_gpu_pod(pod: Mapping[str, Any]) -> bool:
    """A workload pod holding GPUs (an extended ``nvidia.com/*`` resource or a resource claim)."""
    if pod.get("metadata", {}).get("namespace") == names.NAMESPACE:
        return False
    spec = pod.get("spec", {})
    if spec.get("resourceClaims"):
        return True
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        res = c.get("resources", {})
        if any(k.startswith("nvidia.com/") for k in {**res.get("limits", {}), **res.get("requests", {})}):
            return True
    return False
