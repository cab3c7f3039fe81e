"""Executing, the replay's third stage: the lab reset on the grader's cluster, then every act of a ``Plan`` done
there, one executor per act kind; what the API server refuses becomes a note for the learner."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cluster import errors, gpustack
from cluster.kube.client import Client
from labs import kubeapply, scope as scope_mod, steps
from labs.replay import reset as reset_mod, settle
from labs.replay.planner import Act, Plan
from labs.spec import LabSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Replayed:
    notes: tuple[str, ...]  # refusals by the apiserver, and what the plan left out
    elapsed_s: float


def run(client: Client, spec: LabSpec, the_plan: Plan) -> Replayed:
    """Reset the lab on the grader's cluster and do every act of ``the_plan``; refusals become notes."""
    started = time.monotonic()
    reset_mod.reset(client, spec)
    notes = list(the_plan.notes)
    learner = Client(client.conn, impersonate=(reset_mod.REPLAY_USER, (reset_mod.REPLAY_GROUP,)))
    try:
        for act in the_plan.acts:
            log.debug("replay %s: %s", spec.id, act.describe)
            notes.extend(EXECUTORS[act.kind](client, learner, spec, act))
        settle.pods(client, spec, settle.WAIT_CAP_S)
    finally:
        learner.close()
    return Replayed(tuple(notes), time.monotonic() - started)


# One executor per act kind: (the grader's admin client, the replay user's client, the lab, the act) -> notes.
Executor = Callable[[Client, Client, LabSpec, Act], list[str]]


def _apply(admin: Client, learner: Client, spec: LabSpec, act: Act) -> list[str]:
    got = kubeapply.apply_one(learner if act.data["as"] == "learner" else admin, dict(act.data["object"]))
    return [] if got.ok else [f"{got.ref}: the API server refused it: {got.message}"]


def _label(admin: Client, learner: Client, spec: LabSpec, act: Act) -> list[str]:
    d = act.data
    admin.patch(f"/api/v1/nodes/{d['node']}", {"metadata": {"labels": {d["key"]: d["value"]}}})
    return []


def _policy(admin: Client, learner: Client, spec: LabSpec, act: Act) -> list[str]:
    d = act.data
    if gpustack.policy_state(admin) is None:
        return [f"{act.describe}: the GPU Operator is not installed; not replayed"]
    keys = str(d["field"]).split(".")
    current_spec = admin.get(gpustack.names.POLICY).get("spec", {})
    ops: list[dict[str, Any]] = [{"op": "add", "path": "/spec/" + "/".join(keys[:i]), "value": {}}
                                 for i in range(1, len(keys))
                                 if not isinstance(scope_mod.at_keys(current_spec, keys[:i]), dict)]
    pointer = "/spec/" + "/".join(keys)
    current = scope_mod.at_keys(current_spec, keys)
    if d["value"] is None:
        if current is not None:
            ops.append({"op": "remove", "path": pointer})
    else:
        ops.append({"op": "add", "path": pointer, "value": d["value"]})
    if ops:
        try:
            admin.patch(gpustack.names.POLICY, ops, "application/json-patch+json")
        except errors.ApiError as exc:
            return [f"{act.describe}: the API server refused it: {exc.api_message}"]
    return []


def _fault(admin: Client, learner: Client, spec: LabSpec, act: Act) -> list[str]:
    d = act.data
    try:
        gpustack.set_fault(admin, d["node"], d["kind"], d["gpu"], bool(d.get("present", True)))
    except errors.ConfigError as exc:
        return [f"{act.describe}: {'; '.join(exc.problems)}"]
    return []


def _operator(admin: Client, learner: Client, spec: LabSpec, act: Act) -> list[str]:
    steps.ensure_operator(admin, bool(act.data["installed"]))
    return []


def _restart(admin: Client, learner: Client, spec: LabSpec, act: Act) -> list[str]:
    try:
        gpustack.restart_daemonset(admin, str(act.data["daemonset"]))
    except errors.ConfigError as exc:
        return [f"{act.describe}: {'; '.join(exc.problems)}"]
    return []


def _wait(admin: Client, learner: Client, spec: LabSpec, act: Act) -> list[str]:
    settle.wait(admin, spec, act.data["step"])
    return []


EXECUTORS: dict[str, Executor] = {"apply": _apply, "label": _label, "policy": _policy, "fault": _fault,
                                  "operator": _operator, "restart": _restart, "wait": _wait}
