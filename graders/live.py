"""Outcome checks on cluster state: node resources and labels, pod phase and placement, scheduler events,
kubelet admission failures, DRA claim allocations and quota usage.

Each check is a function of a ``ClusterView`` that returns one frozen ``Check`` (id, passed, points, message,
hint). On a live view a check may wait: it polls until it passes or ``wait`` seconds are over, and then says
"Timed out after N s waiting for ..." with what it saw last. On a bundle it looks once. A learner's missing
object is a failed check, never an exception; only our own failures (an unreachable API server) raise.
Wording comes from ``graders.live_messages``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from cluster import poll, quantity
from graders import findings, live_messages, messages, view as view_mod
from graders.manifests import as_list, as_map, as_str
from graders.view import ClusterView, Obj, dig

POOL_LABEL = "gpulab.dev/pool"
POLL_INTERVAL = 0.25
MAX_WAIT = 600.0


@dataclass(frozen=True)
class Outcome:
    """What one look at the cluster showed."""

    passed: bool
    said: messages.Said


def _out(passed: bool, key: str, /, **fields: object) -> Outcome:
    return Outcome(passed, live_messages.say(key, **fields))


def settle(view: ClusterView, wait: float, what: str, probe: Callable[[], Outcome]) -> Outcome:
    """Look once; on a live view keep looking until the probe passes or ``wait`` seconds are over."""
    wait = max(0.0, min(float(wait), MAX_WAIT))
    outcome = poll.until(_scoped(probe), lambda _: _scoped(probe), lambda o: o.passed or not view.live, wait=wait,
                         interval=POLL_INTERVAL)
    if outcome.passed or not view.live or wait <= 0:
        return outcome
    timed_out = live_messages.say("wait/timed-out", wait=f"{wait:g}", what=what, last=outcome.said.message)
    return Outcome(False, messages.Said(timed_out.rule, timed_out.severity, outcome.said.section,
                                             timed_out.message, outcome.said.hint))


def _scoped(probe: Callable[[], Outcome]) -> Outcome:
    try:
        return probe()
    except view_mod.OutOfScope as exc:
        return _out(False, "scope/missing", namespace=exc.namespace)


def to_check(outcome: Outcome, id: str, points: float) -> findings.Check:
    return findings.Check(id=id, passed=outcome.passed, points=points if points >= 0 else 0.0,
                          message=outcome.said.message, hint="" if outcome.passed else outcome.said.hint)


# -- nodes ------------------------------------------------------------------------------------------------

def node_resource(view: ClusterView, node: str, resource: str, *, equals: int | str | None = None,
                  at_least: int | str | None = None, field: str = "allocatable", wait: float = 0.0,
                  id: str | None = None, points: float = 1.0) -> findings.Check:
    """Node ``status.<field>[resource]`` equals (or is at least) a quantity; a missing resource counts as 0."""
    want = equals if equals is not None else at_least
    expect = f"{'at least ' if equals is None else ''}{want}"

    def probe() -> Outcome:
        obj = view.node(node)
        if obj is None:
            return _out(False, "node/missing", node=node)
        raw = dig(obj, "status", field, resource)
        value = _qty(raw if raw is not None else 0)
        target = _qty(want if want is not None else 0)
        ok = value is not None and target is not None and (value == target if equals is not None else value >= target)
        key = "node-resource/ok" if ok else ("node-resource/wrong" if "/" in resource else "node-resource/wrong-native")
        shown = quantity.display(raw) if raw is not None else "nothing"
        return _out(ok, key, node=node, field=field, resource=resource, value=shown, expect=expect)

    return to_check(settle(view, wait, f"node {node} {field} {resource} to be {expect}", probe),
                    id or f"node-resource:{node}:{resource}", points)


def _qty(raw: object) -> Fraction | None:
    try:
        return quantity.parse(raw).value
    except quantity.QuantityError:
        return None


def node_label(view: ClusterView, node: str, key: str, value: str | None = None, *, wait: float = 0.0,
               id: str | None = None, points: float = 1.0) -> findings.Check:
    """Node carries label ``key`` (with ``value`` when given)."""

    def probe() -> Outcome:
        obj = view.node(node)
        if obj is None:
            return _out(False, "node/missing", node=node)
        labels = as_map(dig(obj, "metadata", "labels"))
        if key not in labels:
            return _out(False, "node-label/missing", node=node, key=key)
        found = as_str(labels[key])
        if value is not None and found != value:
            return _out(False, "node-label/wrong", node=node, key=key, value=found, expect=value)
        return _out(True, "node-label/ok", node=node, key=key, value=found)

    what = f"node {node} label {key}" + (f"={value}" if value is not None else "")
    return to_check(settle(view, wait, what, probe), id or f"node-label:{node}:{key}", points)


# -- pods -------------------------------------------------------------------------------------------------

def pod_detail(pod: Obj) -> str:
    """A short parenthesised reason for a pod's phase: ``" (Unschedulable)"``, ``" (CrashLoopBackOff)"``."""
    reason = as_str(dig(pod, "status", "reason"))
    if not reason:
        for cond in as_list(dig(pod, "status", "conditions")):
            if as_str(dig(cond, "type")) == "PodScheduled" and as_str(dig(cond, "status")) == "False":
                reason = as_str(dig(cond, "reason"))
    if not reason:
        for group in ("initContainerStatuses", "containerStatuses"):
            for status in as_list(dig(pod, "status", group)):
                waiting = as_str(dig(status, "state", "waiting", "reason"))
                terminated = as_str(dig(status, "state", "terminated", "reason"))
                reason = reason or waiting or (terminated if terminated not in ("", "Completed") else "")
    return f" ({reason})" if reason else ""


def phase_of(pod: Obj) -> str:
    return as_str(dig(pod, "status", "phase")) or "Pending"


def pod_phase(view: ClusterView, namespace: str, pod: str, phase: str = "Running", *, wait: float = 0.0,
              id: str | None = None, points: float = 1.0) -> findings.Check:
    """The pod exists and is in ``phase`` (Pending, Running, Succeeded, Failed)."""

    def probe() -> Outcome:
        obj = view.pod(namespace, pod)
        if obj is None:
            return _out(False, "pod/missing", namespace=namespace, pod=pod)
        found = phase_of(obj)
        if found == phase:
            return _out(True, "pod-phase/ok", namespace=namespace, pod=pod, phase=found)
        return _out(False, "pod-phase/wrong", namespace=namespace, pod=pod, phase=found, detail=pod_detail(obj),
                    expect=phase)

    return to_check(settle(view, wait, f"pod {namespace}/{pod} to be {phase}", probe),
                    id or f"pod-phase:{namespace}/{pod}", points)


def pool_of(view: ClusterView, node: str) -> str:
    obj = view.node(node)
    return as_str(dig(obj, "metadata", "labels", POOL_LABEL)) or "-"


def pod_node(view: ClusterView, namespace: str, pod: str, *, node: str | None = None, pool: str | None = None,
             wait: float = 0.0, id: str | None = None, points: float = 1.0) -> findings.Check:
    """The pod was placed on ``node`` and/or a node of ``pool`` (label ``gpulab.dev/pool``); neither = any node."""
    parts = ([f"node `{node}`"] if node else []) + ([f"a node of pool `{pool}`"] if pool else [])
    expect = " and ".join(parts) or "any node"

    def probe() -> Outcome:
        obj = view.pod(namespace, pod)
        if obj is None:
            return _out(False, "pod/missing", namespace=namespace, pod=pod)
        placed = as_str(dig(obj, "spec", "nodeName"))
        if not placed:
            return _out(False, "pod-node/unscheduled", namespace=namespace, pod=pod, expect=expect)
        found_pool = pool_of(view, placed)
        ok = (node is None or placed == node) and (pool is None or found_pool == pool)
        return _out(ok, "pod-node/ok" if ok else "pod-node/wrong", namespace=namespace, pod=pod, node=placed,
                    pool=found_pool, expect=expect)

    return to_check(settle(view, wait, f"pod {namespace}/{pod} to be placed on {expect}", probe),
                    id or f"pod-node:{namespace}/{pod}", points)


# -- events and admission -------------------------------------------------------------------------------

def latest_event(view: ClusterView, namespace: str, involved: str, reason: str, kind: str = "Pod") -> Obj | None:
    matching = [e for e in view.events(namespace, involved)
                if as_str(e.get("reason")) == reason and as_str(dig(e, "involvedObject", "name")) == involved
                and as_str(dig(e, "involvedObject", "kind")) in (kind, "")]
    return matching[-1] if matching else None


def _quoted(fragments: Sequence[str]) -> str:
    return ", ".join(f"“{f}”" for f in fragments)


def scheduling_failed(view: ClusterView, namespace: str, pod: str, contains: Sequence[str] = (), *,
                      wait: float = 0.0, id: str | None = None, points: float = 1.0) -> findings.Check:
    """The scheduler's latest FailedScheduling event for the pod contains every fragment in ``contains``."""
    fragments = tuple(contains)

    def probe() -> Outcome:
        obj = view.pod(namespace, pod)
        if obj is None:
            return _out(False, "pod/missing", namespace=namespace, pod=pod)
        event = latest_event(view, namespace, pod, "FailedScheduling")
        if event is None:
            state = phase_of(obj) + pod_detail(obj)
            return _out(False, "sched-event/none", namespace=namespace, pod=pod, state=state)
        text = as_str(event.get("message"))
        missing = [f for f in fragments if f not in text]
        if missing:
            return _out(False, "sched-event/other", namespace=namespace, pod=pod, missing=_quoted(missing), event=text)
        return _out(True, "sched-event/ok", namespace=namespace, pod=pod, event=text)

    what = f"a FailedScheduling event for {namespace}/{pod}" + (f" mentioning {_quoted(fragments)}" if fragments else "")
    return to_check(settle(view, wait, what, probe), id or f"scheduling-failed:{namespace}/{pod}", points)


def admission_failed(view: ClusterView, namespace: str, pod: str, reason: str = "UnexpectedAdmissionError",
                     contains: Sequence[str] = (), *, wait: float = 0.0, id: str | None = None,
                     points: float = 1.0) -> findings.Check:
    """The node refused the pod: phase Failed with ``status.reason == reason`` and the message fragments."""
    fragments = tuple(contains)

    def probe() -> Outcome:
        obj = view.pod(namespace, pod)
        if obj is None:
            return _out(False, "pod/missing", namespace=namespace, pod=pod)
        found = as_str(dig(obj, "status", "reason"))
        detail = as_str(dig(obj, "status", "message"))
        if phase_of(obj) != "Failed":
            return _out(False, "admission/not-failed", namespace=namespace, pod=pod, phase=phase_of(obj),
                        detail=pod_detail(obj), expect=reason)
        if found != reason or any(f not in detail for f in fragments):
            expect = reason + (f" mentioning {_quoted(fragments)}" if fragments else "")
            return _out(False, "admission/other", namespace=namespace, pod=pod, reason=found or "no reason",
                        detail=detail, expect=expect)
        return _out(True, "admission/ok", namespace=namespace, pod=pod, reason=found, detail=detail)

    return to_check(settle(view, wait, f"pod {namespace}/{pod} to fail with {reason}", probe),
                    id or f"admission-failed:{namespace}/{pod}", points)


# -- DRA claims -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Allocation:
    """Where a claim's devices came from."""

    node: str
    devices: tuple[tuple[str, str, str], ...]  # (driver, pool, device)

    def describe(self) -> str:
        if not self.devices:
            return "no devices"
        return ", ".join(f"`{d}` ({drv}, pool `{p}`)" for drv, p, d in self.devices)


def allocation_of(claim: Obj) -> Allocation | None:
    alloc = dig(claim, "status", "allocation")
    if not isinstance(alloc, dict):
        return None
    results = [r for r in as_list(dig(alloc, "devices", "results")) if isinstance(r, dict)]
    devices = tuple((as_str(r.get("driver")), as_str(r.get("pool")), as_str(r.get("device"))) for r in results)
    node = ""
    for term in as_list(dig(alloc, "nodeSelector", "nodeSelectorTerms")):
        for field in as_list(dig(term, "matchFields")):
            if as_str(dig(field, "key")) == "metadata.name" and as_list(dig(field, "values")):
                node = as_str(as_list(dig(field, "values"))[0])
    if not node and devices:
        node = devices[0][1]  # node-local drivers name their pool after the node
    return Allocation(node, devices)


def claim_names_of_pod(pod: Obj) -> dict[str, str]:
    """Pod claim name -> ResourceClaim name (from the pod's status, else a direct ``resourceClaimName``)."""
    out: dict[str, str] = {}
    for entry in as_list(dig(pod, "spec", "resourceClaims")):
        if as_str(dig(entry, "resourceClaimName")):
            out[as_str(dig(entry, "name"))] = as_str(dig(entry, "resourceClaimName"))
    for entry in as_list(dig(pod, "status", "resourceClaimStatuses")):
        if as_str(dig(entry, "resourceClaimName")):
            out[as_str(dig(entry, "name"))] = as_str(dig(entry, "resourceClaimName"))
    return out


def claim_allocated(view: ClusterView, namespace: str, *, claim: str | None = None, pod: str | None = None,
                    pod_claim: str | None = None, node: str | None = None, pool: str | None = None,
                    device: str | None = None, driver: str | None = None, count: int | None = None,
                    wait: float = 0.0, id: str | None = None, points: float = 1.0) -> findings.Check:
    """A ResourceClaim (named, or the pod's claim ``pod_claim``) is allocated, optionally on ``node``/``pool``,
    with ``device``/``driver`` among its results and ``count`` devices in all."""
    label = f"`{claim}`" if claim else f"of pod `{pod}`" + (f" (`{pod_claim}`)" if pod_claim else "")

    def probe() -> Outcome:
        name = claim or _claim_for_pod(view, namespace, pod or "", pod_claim)
        obj = next((c for c in view.resource_claims(namespace) if view_mod.name_of(c) == name), None) if name else None
        if obj is None:
            return _out(False, "claim/missing", namespace=namespace, claim=label)
        alloc = allocation_of(obj)
        if alloc is None:
            return _out(False, "claim/unallocated", namespace=namespace, claim=name)
        wrong = _claim_mismatch(view, alloc, node, pool, device, driver, count)
        fields = dict(namespace=namespace, claim=name, devices=alloc.describe(), node=alloc.node or "-")
        return _out(not wrong, "claim/wrong" if wrong else "claim/ok", expect=wrong, **fields)

    return to_check(settle(view, wait, f"ResourceClaim {label} in {namespace} to be allocated", probe),
                    id or f"claim-allocated:{namespace}/{claim or pod}", points)


def _claim_for_pod(view: ClusterView, namespace: str, pod: str, pod_claim: str | None) -> str:
    obj = view.pod(namespace, pod)
    names = claim_names_of_pod(obj) if obj else {}
    if pod_claim is not None:
        return names.get(pod_claim, "")
    return names[sorted(names)[0]] if names else ""


def _claim_mismatch(view: ClusterView, alloc: Allocation, node: str | None, pool: str | None, device: str | None,
                    driver: str | None, count: int | None) -> str:
    wrong = []
    if node is not None and alloc.node != node:
        wrong.append(f"node `{node}`")
    if pool is not None and pool_of(view, alloc.node) != pool:
        wrong.append(f"a node of pool `{pool}`")
    if device is not None and all(d != device for _, _, d in alloc.devices):
        wrong.append(f"device `{device}`")
    if driver is not None and all(drv != driver for drv, _, _ in alloc.devices):
        wrong.append(f"driver `{driver}`")
    if count is not None and len(alloc.devices) != count:
        wrong.append(f"{count} device(s)")
    return " and ".join(wrong)


# -- quota ------------------------------------------------------------------------------------------------

def quota_usage(view: ClusterView, namespace: str, quota: str, resource: str = "requests.nvidia.com/gpu", *,
                used: int | str | None = None, hard: int | str | None = None, wait: float = 0.0,
                id: str | None = None, points: float = 1.0) -> findings.Check:
    """ResourceQuota ``quota`` tracks ``resource``; its ``status.used`` and ``spec.hard`` equal the given values.

    A hard limit counts once it is in force: the controller manager's quota controller copies ``spec.hard`` into
    ``status.hard``, and the API server's ResourceQuota admission enforces ``status.hard``
    (k8s.io/apiserver pkg/admission/plugin/resourcequota/controller.go), so until then the old limit still
    refuses pods."""

    def probe() -> Outcome:
        obj = next((q for q in view.resource_quotas(namespace) if view_mod.name_of(q) == quota), None)
        if obj is None:
            return _out(False, "quota/missing", namespace=namespace, quota=f"`{quota}`")
        hard_map = as_map(dig(obj, "spec", "hard"))
        if resource not in hard_map:
            tracked = ", ".join(f"`{k}`" for k in sorted(hard_map)) or "nothing"
            return _out(False, "quota/no-resource", namespace=namespace, quota=quota, resource=resource, tracked=tracked)
        found_used = dig(obj, "status", "used", resource)
        found_used = found_used if found_used is not None else "0"
        found_hard = hard_map[resource]
        wrong = []
        if used is not None and _qty(found_used) != _qty(used):
            wrong.append(f"used {used}")
        if hard is not None and _qty(found_hard) != _qty(hard):
            wrong.append(f"hard limit {hard}")
        fields = dict(namespace=namespace, quota=quota, resource=resource, used=quantity.display(found_used),
                      hard=quantity.display(found_hard))
        in_force = dig(obj, "status", "hard", resource)
        if not wrong and hard is not None and (in_force is None or _qty(in_force) != _qty(found_hard)):
            return _out(False, "quota/not-in-force", enforced=quantity.display(in_force) if in_force else "none",
                        **fields)
        return _out(not wrong, "quota/wrong" if wrong else "quota/ok", expect=" and ".join(wrong), **fields)

    return to_check(settle(view, wait, f"ResourceQuota {namespace}/{quota} {resource}", probe),
                    id or f"quota:{namespace}/{quota}:{resource}", points)
