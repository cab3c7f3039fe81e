"""Replay grading: the grader's own cluster redoes what the learner did, and the checks read that cluster.

A learner's evidence bundle says what the learner's cluster showed; anyone can write such a file, so its
``cluster`` section is only the learner's claim (shown beside the result, never scored). What grading trusts is
what it can redo: the learner's manifests and the bundle's ``actions`` (node labels, ClusterPolicy fields, GPU
faults, the operator). ``replay`` puts the lab back to its start on a cluster the grader owns, applies them in
the order of the lab's own solve steps (so that, as in the lab, the workers are placed before the fifth one
arrives), waits the way those steps wait, and leaves the outcome to the real scheduler and the simulated
GPU stack.

What may be replayed is confined to the lab: a label only on the (node, key) pairs the lab's scope or solve
steps touch, a ClusterPolicy field only among the scope's ``policy`` fields, a fault only on the scope's fault
nodes, the operator only in labs whose solution installs it. A manifest's object must live in one of the
lab's namespaces (applied as the unprivileged ``gpulab:replay`` user, whose RBAC role covers workload kinds
there and nothing else) or be one of the scope's named ``objects`` (applied by the grader after this check).
Anything else is not applied and is reported as a note. This module must not trust anything in a bundle
beyond its manifests and actions.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster import errors
from cluster.backends import guard
from cluster.kube import restmapper
from cluster.kube.client import Client
from cluster import gpustack
from cluster.gpustack import names
from graders import LiveView, Severity, source
from graders.view import as_map, dig
from labs import evidence, kubeapply, scope as scope_mod, steps
from labs.spec import LabSpec

log = logging.getLogger(__name__)

REPLAY_USER = "gpulab:replay"
REPLAY_GROUP = "gpulab:replayers"
REPLAY_ROLE = "gpulab-replay"
# Workload kinds a learner creates in the lab's namespaces, by apiVersion (the replay role's RBAC resources
# come from the server's discovery).
NAMESPACED_KINDS: dict[str, str] = {
    "Pod": "v1", "ConfigMap": "v1", "ResourceQuota": "v1", "LimitRange": "v1", "Service": "v1",
    "Deployment": "apps/v1", "ReplicaSet": "apps/v1", "Job": "batch/v1", "ResourceClaim": "resource.k8s.io/v1",
    "ResourceClaimTemplate": "resource.k8s.io/v1",
    "ServiceMonitor": "monitoring.coreos.com/v1", "PrometheusRule": "monitoring.coreos.com/v1",
}
WAIT_CAP_S = 20.0  # a replayed wait never takes longer than this, whatever the lab's own timeout
# A wait also ends when nothing it watches has changed for this long: the simulated stack reconciles a node
# within about 0.3 s of a label or config change (measured on the 2-core machine), so a learner's config that
# has not produced the outcome after a quiet second will not produce it.
QUIET_S = 1.0
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")
MAX_POLICY_BYTES = 16 * 1024
# What one replay may create, so that one submission cannot flood the grader's cluster for the next: objects
# applied, and pods the applied workloads ask for (a Pod 1, a Deployment or ReplicaSet its replicas, a Job the
# larger of its parallelism and completions). The labs' own solutions need at most 10 pods and 12 objects.
MAX_REPLAY_OBJECTS = 64
MAX_REPLAY_PODS = 64
# Pod Security level the lab namespaces of the grader's cluster enforce: no lab needs a privileged or host
# pod, and a submitted one is refused there (the learner's own cluster is theirs to run as they like).
POD_SECURITY = {"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/enforce-version": "latest"}
# How long a reset may take to see the lab's namespaces empty before the grader's cluster counts as broken.
RESET_EMPTY_S = 60.0


# --- recording (at submit, on the learner's cluster) ---------------------------------------------------------


def allowed_labels(spec: LabSpec) -> set[tuple[str, str]]:
    out = {(node, key) for node, keys in spec.scope.node_labels.items() for key in keys}
    out |= {(s.node, s.key) for s in spec.solve if isinstance(s, steps.Label)}
    return out


def allowed_policy_fields(spec: LabSpec) -> tuple[str, ...]:
    found = list(spec.scope.policy)
    for s in spec.solve:
        if isinstance(s, steps.Policy):
            found.extend(f for f in _leaf_fields(s.patch) if f not in found)
    return tuple(found)


def _leaf_fields(patch: Mapping[str, Any]) -> list[str]:
    """``{devicePlugin: {config: {...}}}`` -> ``["devicePlugin.config"]`` (two levels: the scope's granularity)."""
    out: list[str] = []
    for top, value in patch.items():
        if isinstance(value, Mapping):
            out.extend(f"{top}.{sub}" for sub in value)
        else:
            out.append(str(top))
    return out


def operator_allowed(spec: LabSpec) -> bool:
    return any(isinstance(s, steps.Operator) for s in spec.solve)


def allowed_restarts(spec: LabSpec) -> set[str]:
    """The operator DaemonSets the lab's solution restarts (``kubectl rollout restart``): the learner may too."""
    return {s.daemonset for s in spec.solve if isinstance(s, steps.Restart)}


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
        actions.append({"action": "label", "node": node, "key": key, "value": value if isinstance(value, str) else None})
    fields = allowed_policy_fields(spec)
    if fields and gpustack.policy_state(client) is not None:
        current = as_map(client.get(steps.POLICY_PATH).get("spec"))
        for dotted in fields:
            actions.append({"action": "policy", "field": dotted, "value": scope_mod._dig(current, dotted.split("."))})
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
            for dotted in _leaf_fields(step.patch):
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


# --- the plan ------------------------------------------------------------------------------------------------


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


def validate_actions(spec: LabSpec, actions: Sequence[Mapping[str, Any]]) -> tuple[list[Act], list[str]]:
    """The bundle's actions this lab allows, as acts; a note for every one refused."""
    labels, fields, ok, notes = allowed_labels(spec), allowed_policy_fields(spec), [], []
    seen: set[str] = set()
    for i, a in enumerate(actions):
        kind = a.get("action")
        where = f"action {i + 1} ({kind})"
        if kind == "label":
            node, key, value = a.get("node"), a.get("key"), a.get("value")
            if (node, key) not in labels:
                notes.append(f"{where}: lab {spec.id} does not let you label {node}'s {key!s}; not replayed")
            elif value is not None and not (isinstance(value, str) and _LABEL_VALUE.match(value)):
                notes.append(f"{where}: {value!r} is not a label value; not replayed")
            else:
                ok.append(Act("label", f"label {node} {key}={value}", {"node": node, "key": key, "value": value}))
        elif kind == "policy":
            dotted, value = a.get("field"), a.get("value")
            if dotted not in fields:
                notes.append(f"{where}: lab {spec.id} does not let you change ClusterPolicy field {dotted!s}; "
                             "not replayed")
            elif len(json.dumps(value)) > MAX_POLICY_BYTES:
                notes.append(f"{where}: the value of {dotted} is larger than {MAX_POLICY_BYTES} bytes; not replayed")
            else:
                ok.append(Act("policy", f"ClusterPolicy {dotted}={json.dumps(value)}", {"field": dotted, "value": value}))
        elif kind == "fault":
            node, fk, gpu = a.get("node"), a.get("kind"), a.get("gpu")
            if node not in spec.scope.faults or fk not in gpustack.FAULT_KINDS or not (
                    gpu is None or (isinstance(gpu, int) and not isinstance(gpu, bool) and 0 <= gpu < 64)):
                notes.append(f"{where}: lab {spec.id} does not let you set fault {fk!s} on {node!s}; not replayed")
            else:
                # the GPU is part of the name: two broken GPUs of one node are two actions, not a repeat
                present = a.get("present", True) is not False
                ok.append(Act("fault", f"fault {fk} {'on' if present else 'cleared on'} {node}"
                              + ("" if gpu is None else f" GPU {gpu}"),
                              {"node": node, "kind": fk, "gpu": gpu, "present": present}))
        elif kind == "operator":
            installed = a.get("installed")
            if not operator_allowed(spec) or not isinstance(installed, bool):
                notes.append(f"{where}: lab {spec.id} does not let you install or remove the GPU Operator; "
                             "not replayed")
            else:
                ok.append(Act("operator", "operator " + ("installed" if installed else "absent"),
                              {"installed": installed}))
        elif kind == "restart":
            daemonset = a.get("daemonset")
            if daemonset not in allowed_restarts(spec):
                notes.append(f"{where}: lab {spec.id} does not let you restart daemonset {daemonset!s}; not replayed")
            else:
                ok.append(Act("restart", f"rollout restart daemonset/{daemonset}", {"daemonset": daemonset}))
        else:
            notes.append(f"{where}: unknown action; not replayed")
            continue
        if ok and ok[-1].describe in seen:
            ok.pop()
        elif ok:
            seen.add(ok[-1].describe)
    return ok, notes


def confine(spec: LabSpec, obj: Mapping[str, Any]) -> tuple[str, str]:
    """("learner" | "grader" | "", reason): who may apply this object in the replay, or why nobody may."""
    kind, api_version = str(obj.get("kind") or "?"), str(obj.get("apiVersion") or "")
    meta = as_map(obj.get("metadata"))
    name, ns = str(meta.get("name") or "?"), meta.get("namespace")
    group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
    for ref in spec.scope.objects:
        ref_group = ref.api_version.rsplit("/", 1)[0] if "/" in ref.api_version else ""
        if (ref.kind, ref.name, ref_group, ref.namespace or None) == (kind, name, group, ns or None):
            return "grader", ""
    if kind in NAMESPACED_KINDS and _group(NAMESPACED_KINDS[kind]) == group:
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
            wanted = set(_leaf_fields(step.patch))
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
    return Plan(tuple(first + acts), tuple(notes))


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


# --- running it ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Replayed:
    notes: tuple[str, ...]  # refusals by the apiserver, and what the plan left out
    elapsed_s: float


def _group(api_version: str) -> str:
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def ensure_rbac(client: Client, namespaces: Sequence[str], crd_files: Sequence[Path] = ()) -> None:
    """The replay user's role: workload kinds in the lab's namespaces, nothing cluster-wide. A kind from a CRD
    the lab's setup has just installed is named as that CRD names it (discovery may not serve it yet); a kind
    neither served nor defined there cannot be created anyway and is left out."""
    rules: dict[str, list[str]] = {}
    defined = restmapper.crd_kinds(crd_files)
    for kind, api_version in NAMESPACED_KINDS.items():
        found = defined.get(api_version, {}).get(kind) or client.mapper.lookup(api_version, kind)
        if found is not None:
            rules.setdefault(_group(api_version), []).append(found.resource)
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": REPLAY_ROLE},
            "rules": [{"apiGroups": [g], "resources": sorted(r), "verbs": ["get", "list", "watch", "create", "update",
                                                                          "patch", "delete"]} for g, r in rules.items()]}
    client.apply(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{REPLAY_ROLE}", role)
    for ns in namespaces:
        binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": REPLAY_ROLE, "namespace": ns},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": REPLAY_ROLE},
                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": REPLAY_GROUP}]}
        client.apply(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings/{REPLAY_ROLE}", binding)


def reset(client: Client, spec: LabSpec) -> None:
    """The lab at its start, as ``gpulab lab start`` leaves it (scope to start values, then the setup steps).

    A lab namespace still being deleted (the lab was stopped) is waited for: the grader's cluster is ours."""
    deadline = time.monotonic() + WAIT_CAP_S * 3
    for ns in spec.scope.namespaces:
        while time.monotonic() < deadline:
            try:
                if dig(client.get(f"/api/v1/namespaces/{ns}"), "status", "phase") != "Terminating":
                    break
            except errors.NotFound:
                break
            time.sleep(0.3)
    _release(client, spec)
    scope_mod.normalize(client, spec.scope)
    _wait_empty(client, spec, RESET_EMPTY_S)
    for ns in spec.scope.namespaces:
        client.patch(f"/api/v1/namespaces/{ns}", {"metadata": {"labels": POD_SECURITY}})
    from labs import grading

    # The grader's cluster is the grader's own (GraderCluster's, or the admin kubeconfig of a gpulab cluster
    # passed with --replay-on); anything else counts as someone else's, and the setup steps refuse there.
    owner = guard.owner(client.kubeconfig) if client.kubeconfig is not None else guard.Owner(guard.ATTACH)
    ctx = steps.StepContext(client, spec.directory, grading.fleet_facts(spec.fleet), owner)
    for step in spec.setup:
        step.run(ctx)
    ensure_rbac(client, spec.scope.namespaces, sorted((spec.directory / "setup").glob("*.y*ml")))


def _leftovers(client: Client, spec: LabSpec) -> list[tuple[str, dict[str, Any]]]:
    """Every object of the kinds a lab may create still in the lab's namespaces (Events aside: deleting
    objects makes more), with its REST collection."""
    out = []
    for ns in spec.scope.namespaces:
        if not client.exists(f"/api/v1/namespaces/{ns}"):
            continue
        for api_version, kind in scope_mod.NAMESPACED:
            if kind == "Event":
                continue
            path = client.mapper.path(api_version, kind, namespace=ns)
            out += [(path, o) for o in client.get(path).get("items", [])
                    if not (kind == "ConfigMap" and dig(o, "metadata", "name") in scope_mod.KEEP_CONFIGMAPS)]
    return out


def _release(client: Client, spec: LabSpec, *, delete: bool = False) -> None:
    """Take every finalizer off what the last submission left in the lab's namespaces, so the reset's deletes
    finish (an object held by a finalizer would keep its name, its pods or its quota for the next submission);
    with ``delete``, delete what is left at once as well (a pod a controller made while the reset deleted its
    owner, which the garbage collector would delete with the pod's own grace period)."""
    for path, obj in _leftovers(client, spec):
        where = f"{path}/{dig(obj, 'metadata', 'name')}"
        if dig(obj, "metadata", "finalizers"):
            try:
                client.patch(where, {"metadata": {"finalizers": None}})
            except errors.NotFound:
                continue
        if delete:
            kubeapply.delete(client, where)


def _wait_empty(client: Client, spec: LabSpec, timeout: float) -> None:
    """Until nothing of the last submission is left in the lab's namespaces (the garbage collector removes what
    the deleted workloads owned), releasing finalizers set meanwhile; a reset that cannot get there stops the
    grading rather than grade the next submission on someone else's objects."""
    deadline = time.monotonic() + timeout
    while True:
        left = _leftovers(client, spec)
        if not left:
            return
        if time.monotonic() >= deadline:
            shown = ", ".join(f"{p.rsplit('/', 1)[-1]}/{dig(o, 'metadata', 'name')}" for p, o in left[:5])
            raise errors.ClusterError(f"the grader's cluster could not be reset for lab {spec.id}: {len(left)} "
                                      f"objects of an earlier submission are still there ({shown})",
                                      hint="grade again; if it persists, remove the grader's cluster "
                                           "(gpulab class grade starts a new one)")
        _release(client, spec, delete=True)
        time.sleep(0.2)


def run(client: Client, spec: LabSpec, the_plan: Plan) -> Replayed:
    """Reset the lab on the grader's cluster and do every act of ``the_plan``; refusals become notes."""
    started = time.monotonic()
    reset(client, spec)
    notes = list(the_plan.notes)
    learner = Client(client.conn, impersonate=(REPLAY_USER, (REPLAY_GROUP,)))
    try:
        for act in the_plan.acts:
            log.debug("replay %s: %s", spec.id, act.describe)
            notes.extend(_do(client, learner, spec, act))
        _settle_pods(client, spec, WAIT_CAP_S)
    finally:
        learner.close()
    return Replayed(tuple(notes), time.monotonic() - started)


def _do(admin: Client, learner: Client, spec: LabSpec, act: Act) -> list[str]:
    d = act.data
    if act.kind == "apply":
        got = kubeapply.apply_one(learner if d["as"] == "learner" else admin, dict(d["object"]))
        return [] if got.ok else [f"{got.ref}: the API server refused it: {got.message}"]
    if act.kind == "label":
        admin.patch(f"/api/v1/nodes/{d['node']}", {"metadata": {"labels": {d["key"]: d["value"]}}})
    elif act.kind == "policy":
        if gpustack.policy_state(admin) is None:
            return [f"{act.describe}: the GPU Operator is not installed; not replayed"]
        keys = str(d["field"]).split(".")
        ops: list[dict[str, Any]] = [{"op": "add", "path": "/spec/" + "/".join(keys[:i]), "value": {}}
                                     for i in range(1, len(keys))
                                     if not isinstance(scope_mod._dig(admin.get(steps.POLICY_PATH).get("spec", {}),
                                                                      keys[:i]), dict)]
        pointer = "/spec/" + "/".join(keys)
        current = scope_mod._dig(admin.get(steps.POLICY_PATH).get("spec", {}), keys)
        if d["value"] is None:
            if current is not None:
                ops.append({"op": "remove", "path": pointer})
        else:
            ops.append({"op": "add", "path": pointer, "value": d["value"]})
        if ops:
            try:
                admin.patch(steps.POLICY_PATH, ops, "application/json-patch+json")
            except errors.ApiError as exc:
                return [f"{act.describe}: the API server refused it: {exc.api_message}"]
    elif act.kind == "fault":
        try:
            gpustack.set_fault(admin, d["node"], d["kind"], d["gpu"], bool(d.get("present", True)))
        except errors.ConfigError as exc:
            return [f"{act.describe}: {'; '.join(exc.problems)}"]
    elif act.kind == "operator":
        steps.ensure_operator(admin, bool(d["installed"]))
    elif act.kind == "restart":
        try:
            gpustack.restart_daemonset(admin, str(d["daemonset"]))
        except errors.ConfigError as exc:
            return [f"{act.describe}: {'; '.join(exc.problems)}"]
    elif act.kind == "wait":
        _settle(admin, spec, d["step"])
    return []


def _fingerprint(client: Client, spec: LabSpec) -> str:
    """What a wait watches, without volatile fields: the lab's pods and every node's labels and resources."""
    pods = []
    for ns in spec.scope.namespaces:
        for p in client.get(f"/api/v1/namespaces/{ns}/pods").get("items", []):
            conds = [(c.get("type"), c.get("status"), c.get("reason")) for c in dig(p, "status", "conditions") or []]
            pods.append((ns, dig(p, "metadata", "name"), dig(p, "spec", "nodeName"), dig(p, "status", "phase"), conds))
    nodes = []
    for n in client.get("/api/v1/nodes").get("items", []):
        labels = {k: v for k, v in as_map(dig(n, "metadata", "labels")).items() if k != names.GFD_TIMESTAMP}
        notes = {k: v for k, v in as_map(dig(n, "metadata", "annotations")).items() if k.startswith("gpulab.dev/")
                 and k != "gpulab.dev/heartbeat"}
        nodes.append((dig(n, "metadata", "name"), labels, notes, dig(n, "status", "allocatable"),
                      dig(n, "status", "capacity")))
    events = sorted({(dig(e, "involvedObject", "name"), e.get("reason"), e.get("message"))
                     for ns in spec.scope.namespaces
                     for e in client.get(f"/api/v1/namespaces/{ns}/events").get("items", [])}, key=str)
    return json.dumps([sorted(pods, key=str), nodes, events], sort_keys=True, default=str)


def outcome_fingerprint(client: Client, spec: LabSpec) -> str:
    """``_fingerprint`` and the GPU Operator's pods (an operand's pods still going or coming after the replay
    changed the operator): what may still change a check's result after the last act."""
    try:
        operands = client.get(f"/api/v1/namespaces/{names.NAMESPACE}/pods").get("items", [])
    except errors.NotFound:
        operands = []
    pods = sorted((str(dig(p, "metadata", "name")), dig(p, "spec", "nodeName"), dig(p, "status", "phase"),
                   bool(dig(p, "metadata", "deletionTimestamp"))) for p in operands)
    return _fingerprint(client, spec) + json.dumps(pods, default=str)


def still_changing(client: Client) -> bool:
    """A change under way that may be quiet for a while yet has an outcome still coming: a MIG manager at work, or
    the GPU Operator's namespace or pods being deleted (an operator removal does not wait for the namespace
    controller, which takes a few seconds to delete what is in it)."""
    if mig_pending(client):
        return True
    try:
        if dig(client.get(f"/api/v1/namespaces/{names.NAMESPACE}"), "metadata", "deletionTimestamp"):
            return True
    except errors.NotFound:
        return False
    return any(dig(p, "metadata", "deletionTimestamp")
               for p in client.get(f"/api/v1/namespaces/{names.NAMESPACE}/pods").get("items", []))


def _settle(client: Client, spec: LabSpec, step: steps.Wait) -> None:
    """The lab's wait, for the learner's work: it ends when the rule passes; for a pod wait, also when the
    scheduler has decided about every pod of the lab (a pod it found no place for will not get one by waiting);
    when nothing has changed for ``QUIET_S`` (the learner's config will not get there); or after ``WAIT_CAP_S``.
    It never fails: the checks judge the outcome."""
    from labs import grading
    from labs.checks import live as live_checks

    ev = evidence.Evidence({}, (), grading.fleet_facts(spec.fleet), LiveView(client))
    deadline = time.monotonic() + min(step.timeout, WAIT_CAP_S)
    last, quiet_since = "", time.monotonic()
    # A wait for pods to be gone (count 0) is not over when the scheduler has decided: they are still leaving.
    pod_wait = isinstance(step.rule, live_checks.PodRule) and step.rule.count != 0
    while time.monotonic() < deadline:
        if step.rule.evaluate(ev).passed:
            return
        if pod_wait and _decided(client, spec):
            return
        now = _fingerprint(client, spec)
        if now != last:
            last, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= QUIET_S and not mig_pending(client):
            return
        time.sleep(0.1)


def mig_pending(client: Client) -> bool:
    """A MIG manager at work (state ``pending``) is quiet while it resets GPUs, yet its outcome is still coming."""
    return any(as_map(dig(n, "metadata", "labels")).get(names.MIG_CONFIG_STATE) == "pending"
               for n in client.get("/api/v1/nodes").get("items", []))


def _settle_pods(client: Client, spec: LabSpec, cap: float) -> None:
    """After the last act: wait until the scheduler has decided about every pod of the lab (bound and started,
    or unschedulable with its FailedScheduling event recorded), twice in a row, so the checks read an outcome."""
    deadline = time.monotonic() + cap
    in_a_row = 0
    while time.monotonic() < deadline:
        in_a_row = in_a_row + 1 if _decided(client, spec, events=True) else 0
        if in_a_row >= 2:
            return
        time.sleep(0.1)


def _decided(client: Client, spec: LabSpec, *, events: bool = False) -> bool:
    """Every workload of the lab has its pods, and the scheduler has decided about each pod (and, with
    ``events``, recorded why for those it could not place)."""
    for ns in spec.scope.namespaces:
        for group, plural in (("apps/v1", "deployments"), ("apps/v1", "replicasets")):
            for w in client.get(f"/apis/{group}/namespaces/{ns}/{plural}").get("items", []):
                want = dig(w, "spec", "replicas")
                if (dig(w, "status", "observedGeneration") or 0) < (dig(w, "metadata", "generation") or 0) or \
                        (dig(w, "status", "replicas") or 0) < (1 if want is None else want):
                    return False
        for job in client.get(f"/apis/batch/v1/namespaces/{ns}/jobs").get("items", []):
            st = as_map(job.get("status"))
            if not any(st.get(k) for k in ("active", "succeeded", "failed", "ready")):
                return False
        waiting: set[str] = set()
        for p in client.get(f"/api/v1/namespaces/{ns}/pods").get("items", []):
            reasons = {c.get("reason") for c in dig(p, "status", "conditions") or [] if c.get("type") == "PodScheduled"
                       and c.get("status") == "False"}
            if "Unschedulable" in reasons:
                waiting.add(str(dig(p, "metadata", "name")))
            elif "SchedulingGated" in reasons:
                continue
            elif not dig(p, "spec", "nodeName") or dig(p, "status", "phase") in (None, "", "Pending"):
                return False
        if events and waiting:
            told = {dig(e, "involvedObject", "name") for e in client.get(f"/api/v1/namespaces/{ns}/events").get("items", [])
                    if e.get("reason") == "FailedScheduling"}
            if waiting - told:
                return False
    return True
