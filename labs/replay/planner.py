"""Planning, the replay's second stage: the learner's files and the bundle's actions, validated against what the
lab allows, budgeted, and put in the order of the lab's own solve steps. Plain data in, a ``Plan`` out; no cluster.

What may be replayed is confined to the lab: a label only on the (node, key) pairs the lab's scope or solve steps
touch, a ClusterPolicy field only among the scope's ``policy`` fields, a fault only on the scope's fault nodes, the
operator only in labs whose solution installs it. A manifest's object must live in one of the lab's namespaces
(applied as the unprivileged replay user) or be one of the scope's named ``objects`` (applied by the grader).
Anything else becomes a note for the learner, never an act.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cluster import gpustack
from graders import Severity, source
from graders.manifests import as_map
from graders.view import dig
from labs import kubeapply, predict, steps
from labs.checks.live import PredictionRule
from labs.replay import allowed
from labs.spec import LabSpec

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")
MAX_POLICY_BYTES = 16 * 1024
# What one replay may create, so that one submission cannot flood the grader's cluster for the next: objects
# applied, and pods the applied workloads ask for (a Pod 1, a Deployment or ReplicaSet its replicas, a Job the
# larger of its parallelism and completions). The labs' own solutions need at most 10 pods and 12 objects.
MAX_REPLAY_OBJECTS = 64
MAX_REPLAY_PODS = 64


@dataclass(frozen=True)
class Act:
    """One thing the replay does: ``kind`` is apply, label, policy, fault, operator, restart or wait."""

    kind: str
    describe: str
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    acts: tuple[Act, ...]
    notes: tuple[str, ...]  # what was not replayed, and why (shown to the learner)


# One validator per action kind: the act to replay, or the note that says why it is not replayed.
Validator = Callable[[LabSpec, Mapping[str, Any], str], "Act | str"]


def _label(spec: LabSpec, a: Mapping[str, Any], where: str) -> Act | str:
    node, key, value = a.get("node"), a.get("key"), a.get("value")
    if (node, key) not in allowed.allowed_labels(spec):
        return f"{where}: lab {spec.id} does not let you label {node}'s {key!s}; not replayed"
    if value is not None and not (isinstance(value, str) and _LABEL_VALUE.match(value)):
        return f"{where}: {value!r} is not a label value; not replayed"
    return Act("label", f"label {node} {key}={value}", {"node": node, "key": key, "value": value})


def _policy(spec: LabSpec, a: Mapping[str, Any], where: str) -> Act | str:
    dotted, value = a.get("field"), a.get("value")
    if dotted not in allowed.allowed_policy_fields(spec):
        return f"{where}: lab {spec.id} does not let you change ClusterPolicy field {dotted!s}; not replayed"
    if len(json.dumps(value)) > MAX_POLICY_BYTES:
        return f"{where}: the value of {dotted} is larger than {MAX_POLICY_BYTES} bytes; not replayed"
    return Act("policy", f"ClusterPolicy {dotted}={json.dumps(value)}", {"field": dotted, "value": value})


def _fault(spec: LabSpec, a: Mapping[str, Any], where: str) -> Act | str:
    node, kind, gpu = a.get("node"), a.get("kind"), a.get("gpu")
    if node not in spec.scope.faults or kind not in gpustack.FAULT_KINDS or not (
            gpu is None or (isinstance(gpu, int) and not isinstance(gpu, bool) and 0 <= gpu < 64)):
        return f"{where}: lab {spec.id} does not let you set fault {kind!s} on {node!s}; not replayed"
    # the GPU is part of the name: two broken GPUs of one node are two actions, not a repeat
    present = a.get("present", True) is not False
    on_gpu = "" if gpu is None else f" GPU {gpu}"
    return Act("fault", f"fault {kind} {'on' if present else 'cleared on'} {node}{on_gpu}",
               {"node": node, "kind": kind, "gpu": gpu, "present": present})


def _operator(spec: LabSpec, a: Mapping[str, Any], where: str) -> Act | str:
    installed = a.get("installed")
    if not allowed.operator_allowed(spec) or not isinstance(installed, bool):
        return f"{where}: lab {spec.id} does not let you install or remove the GPU Operator; not replayed"
    return Act("operator", "operator " + ("installed" if installed else "absent"), {"installed": installed})


def _restart(spec: LabSpec, a: Mapping[str, Any], where: str) -> Act | str:
    daemonset = a.get("daemonset")
    if daemonset not in allowed.allowed_restarts(spec):
        return f"{where}: lab {spec.id} does not let you restart daemonset {daemonset!s}; not replayed"
    return Act("restart", f"rollout restart daemonset/{daemonset}", {"daemonset": daemonset})


VALIDATORS: dict[str, Validator] = {"label": _label, "policy": _policy, "fault": _fault, "operator": _operator,
                                    "restart": _restart}


def validate_actions(spec: LabSpec, actions: Sequence[Mapping[str, Any]]) -> tuple[list[Act], list[str]]:
    """The bundle's actions this lab allows, as acts (a repeat once); a note for every one refused."""
    ok: list[Act] = []
    notes: list[str] = []
    seen: set[str] = set()
    for i, a in enumerate(actions):
        kind = a.get("action")
        where = f"action {i + 1} ({kind})"
        check = VALIDATORS.get(kind) if isinstance(kind, str) else None
        got = check(spec, a, where) if check else f"{where}: unknown action; not replayed"
        if isinstance(got, str):
            notes.append(got)
        elif got.describe not in seen:
            seen.add(got.describe)
            ok.append(got)
    return ok, notes


def confine(spec: LabSpec, obj: Mapping[str, Any]) -> tuple[str, str]:
    """("learner" | "grader" | "", reason): who may apply this object in the replay, or why nobody may."""
    kind, api_version = str(obj.get("kind") or "?"), str(obj.get("apiVersion") or "")
    meta = as_map(obj.get("metadata"))
    name, ns = str(meta.get("name") or "?"), meta.get("namespace")
    group = allowed.group(api_version)
    for ref in spec.scope.objects:
        ref_key = (ref.kind, ref.name, allowed.group(ref.api_version), ref.namespace or None)
        if ref_key == (kind, name, group, ns or None):
            return "grader", ""
    if kind in allowed.NAMESPACED_KINDS and allowed.group(allowed.NAMESPACED_KINDS[kind]) == group:
        if (ns or "default") in spec.scope.namespaces:
            return "learner", ""
        return "", (f"{kind} {name} is in namespace {ns or 'default'}; lab {spec.id} works in "
                    f"{', '.join(spec.scope.namespaces) or 'no namespace of its own'}")
    return "", f"lab {spec.id} does not let you create a {kind} ({api_version or 'no apiVersion'}) named {name}"


def plan(spec: LabSpec, files: Mapping[str, bytes], actions: Sequence[Mapping[str, Any]]) -> Plan:
    """The learner's files and actions in the order of the lab's solve steps (the lab's own waits between)."""
    todo, notes = validate_actions(spec, actions)
    acts: list[Act] = []
    used: set[int] = set()

    def take(match: Any) -> None:
        for i, act in enumerate(todo):
            if i not in used and match(act):
                used.add(i)
                acts.append(act)

    budget = _Budget()
    for step in spec.solve:
        if isinstance(step, steps.Apply):
            name = step.file.split("/", 1)[-1]
            if name in spec.files:
                acts.extend(_apply_acts(spec, name, files.get(name), notes, budget))
        elif isinstance(step, steps.Label):
            take(lambda a, s=step: a.kind == "label" and (a.data["node"], a.data["key"]) == (s.node, s.key))
        elif isinstance(step, steps.Policy):
            wanted = set(allowed.leaf_fields(step.patch))
            take(lambda a, w=wanted: a.kind == "policy" and a.data["field"] in w)
        elif isinstance(step, steps.Operator):
            take(lambda a: a.kind == "operator")
        elif isinstance(step, steps.Fault):
            take(lambda a, s=step: a.kind == "fault" and a.data["node"] == s.node)
        elif isinstance(step, steps.Restart):
            # Where the solution restarts (after the fix it loads): a bundle records that a restart happened,
            # not when, so a restart is replayed at the one point where it can take effect.
            take(lambda a, s=step: a.kind == "restart" and a.data["daemonset"] == s.daemonset)
        elif isinstance(step, steps.Wait):
            acts.append(Act("wait", step.describe(), {"step": step}))
    # Knobs the lab allows but its solution leaves alone go first: the learner turned them before the rest.
    first = [a for i, a in enumerate(todo) if i not in used]
    # The handed-in predictions are stamped before anything is redone: offline, their order cannot be judged. Only
    # the keys the lab asks for are stamped, so a learner's file cannot make the grader create other objects.
    stamps = [Act("apply", f"stamp prediction {o['metadata']['name']}", {"object": o, "as": "learner"})
              for o in predict.replay_stamps(files.get(predict.FILE), PredictionRule.stamps_of(spec.checks))]
    return Plan(tuple(stamps + first + acts), tuple(notes))


@dataclass
class _Budget:
    """What the acts planned so far create (``MAX_REPLAY_OBJECTS``, ``MAX_REPLAY_PODS``)."""

    objects: int = 0
    pods: int = 0


def pods_asked(obj: Mapping[str, Any]) -> int:
    """How many pods applying ``obj`` makes the controllers create (0 for a kind that makes none)."""
    kind, spec = obj.get("kind"), as_map(obj.get("spec"))

    def count(key: str) -> int:
        value = spec.get(key, 1)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1

    if kind == "Pod":
        return 1
    if kind in ("Deployment", "ReplicaSet"):
        return count("replicas") if "replicas" in spec else 1
    if kind == "Job":
        return max(count("parallelism"), count("completions"))
    return 0


def _without_finalizers(obj: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """``obj`` without finalizers on it or on its pod template: a replayed object must go when the next reset
    deletes it (a finalizer nobody removes keeps it, and its name, for the next submission)."""
    out = json.loads(json.dumps(obj))
    dropped = False
    for meta in (as_map(out.get("metadata")), as_map(dig(out, "spec", "template", "metadata"))):
        if meta.pop("finalizers", None) is not None:
            dropped = True
    return out, dropped


def _apply_acts(spec: LabSpec, name: str, data: bytes | None, notes: list[str], budget: _Budget) -> list[Act]:
    if data is None:
        notes.append(f"{name}: not in your submission; nothing applied")
        return []
    parsed = source.parse_bytes(data, name)
    bad = [f for f in parsed.findings if f.severity is Severity.ERROR]
    if bad:
        notes.append(f"{name}: line {bad[0].line}: {bad[0].message}; not applied")
        return []
    out = []
    for doc in parsed.documents:
        objs = doc.data.get("items") if isinstance(doc.data, dict) and doc.data.get("kind") == "List" else [doc.data]
        for obj in objs if isinstance(objs, list) else []:
            if obj is None:
                continue
            if not isinstance(obj, dict):
                notes.append(f"{name}: a document that is not a Kubernetes object; not applied")
                continue
            who, why = confine(spec, obj)
            if not who:
                notes.append(f"{name}: {why}; not applied")
                continue
            ref, pods = kubeapply.ref_of(obj), pods_asked(obj)
            if budget.objects + 1 > MAX_REPLAY_OBJECTS:
                notes.append(f"{name}: {ref}: the replay applies at most {MAX_REPLAY_OBJECTS} objects; not applied")
                continue
            if budget.pods + pods > MAX_REPLAY_PODS:
                notes.append(f"{name}: {ref} asks for {pods} pods and the replay creates at most {MAX_REPLAY_PODS} "
                             f"for a submission ({budget.pods} asked for already); not applied")
                continue
            budget.objects, budget.pods = budget.objects + 1, budget.pods + pods
            obj, dropped = _without_finalizers(obj)
            if dropped:
                notes.append(f"{name}: {ref}: finalizers are not replayed (nothing in the lab removes them); "
                             "applied without them")
            out.append(Act("apply", f"apply {ref} from {name}", {"object": obj, "as": who}))
    return out
