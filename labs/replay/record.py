"""Recording, the replay's first stage (at submit, on the learner's cluster): what the learner did besides the
files, as the actions an evidence bundle carries; and the actions a lab's own solve steps take (for simulated
learners). Nothing here is trusted at grading: ``planner`` validates every action again."""

from __future__ import annotations

from typing import Any

from cluster import errors, gpustack
from cluster.gpustack import names
from cluster.kube.client import Client
from graders.manifests import as_map
from graders.view import dig
from labs import scope as scope_mod, steps
from labs.replay.allowed import allowed_labels, allowed_policy_fields, allowed_restarts, leaf_fields, operator_allowed
from labs.spec import LabSpec


def _restarted(client: Client, daemonset: str) -> bool:
    """Whether ``kubectl rollout restart`` was run on this DaemonSet since the operator created it (a lab start
    installs the operator afresh, so the pod template carries no ``restartedAt`` until somebody restarts it)."""
    try:
        ds = client.get(f"{names.APPS_PATH}/daemonsets/{daemonset}")
    except errors.NotFound:
        return False
    return bool(as_map(dig(ds, "spec", "template", "metadata", "annotations")).get(gpustack.RESTARTED_AT))


def record_actions(client: Client, spec: LabSpec) -> list[dict[str, Any]]:
    """What the learner did besides the files, read from the learner's cluster: every knob the lab lets the
    learner turn, with its value now (grading replays these; it never reads the outcome from the bundle)."""
    actions: list[dict[str, Any]] = []
    if operator_allowed(spec):
        actions.append({"action": "operator", "installed": gpustack.policy_state(client) is not None})
    for node, key in sorted(allowed_labels(spec)):
        try:
            labels = as_map(dig(client.get(f"/api/v1/nodes/{node}"), "metadata", "labels"))
        except errors.NotFound:
            continue
        value = labels.get(key)
        actions.append({"action": "label", "node": node, "key": key,
                        "value": value if isinstance(value, str) else None})
    fields = allowed_policy_fields(spec)
    if fields and gpustack.policy_state(client) is not None:
        current = as_map(client.get(names.POLICY).get("spec"))
        for dotted in fields:
            actions.append({"action": "policy", "field": dotted,
                            "value": scope_mod.at_keys(current, dotted.split("."))})
    for node in spec.scope.faults:
        try:
            f = gpustack.faults(client.get(f"/api/v1/nodes/{node}"))
        except errors.NotFound:
            continue
        for kind in sorted(f.kinds - {"gpu-unhealthy"}):
            actions.append({"action": "fault", "node": node, "kind": kind, "gpu": None})
        for gpu in sorted(f.unhealthy):
            actions.append({"action": "fault", "node": node, "kind": "gpu-unhealthy", "gpu": gpu})
        # A fault the setup injected and the learner repaired (``gpulab fault clear``) is an action too: the
        # replay starts from the setup, so without it the repaired host would be broken again.
        for step in spec.setup:
            if isinstance(step, steps.Fault) and step.node == node and step.present and step.kind != "gpu-unhealthy" \
                    and step.kind not in f.kinds:
                actions.append({"action": "fault", "node": node, "kind": step.kind, "gpu": None, "present": False})
    for daemonset in sorted(allowed_restarts(spec)):
        if _restarted(client, daemonset):
            actions.append({"action": "restart", "daemonset": daemonset})
    return actions


def solve_actions(spec: LabSpec) -> list[dict[str, Any]]:
    """The actions the lab's own solve steps take, as a bundle records them (for simulated learners)."""
    out: list[dict[str, Any]] = []
    for step in spec.solve:
        if isinstance(step, steps.Label):
            out.append({"action": "label", "node": step.node, "key": step.key, "value": step.value})
        elif isinstance(step, steps.Policy):
            for dotted in leaf_fields(step.patch):
                top, _, sub = dotted.partition(".")
                value = step.patch[top][sub] if sub else step.patch[top]
                out.append({"action": "policy", "field": dotted, "value": value})
        elif isinstance(step, steps.Fault):
            out.append({"action": "fault", "node": step.node, "kind": step.kind, "gpu": step.gpu,
                        **({} if step.present else {"present": False})})
        elif isinstance(step, steps.Operator):
            out.append({"action": "operator", "installed": step.installed})
        elif isinstance(step, steps.Restart):
            out.append({"action": "restart", "daemonset": step.daemonset})
    return out
