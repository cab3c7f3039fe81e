"""``explain_pod``: why is this pod not running, node by node, in plain words with the section to study.

The explainer reads the pod, its latest FailedScheduling event (``graders.schedmsg``), the nodes and every
pod and claim the view holds. It judges each node itself (``graders.nodefit``, ``graders.dra_fit``) and
compares its verdicts with the scheduler's counts, saying when the cluster has changed since the scheduler
last tried. Node-side refusals (``UnexpectedAdmissionError``, ``OutOf<resource>``, GPU out of memory) and
quota refusals (``exceeded quota``, from the pod's owner's FailedCreate events) are explained from their
messages. It explains; it never places pods. Wording is in ``graders.explain_messages``.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from graders import dra_fit, live, nodefit, schedmsg
from graders.explain_messages import Point, say
from graders.manifests import as_list, as_str
from graders.view import ClusterView, Obj, dig

_DEVICES_UNAVAILABLE = re.compile(r"requested number of devices unavailable for (\S+?)\.? Requested: (\d+), Available: (\d+)")
_SHARED_LIMIT = re.compile(r'invalid allocation request for "([^"]+)".*?found (\d+)')
_QUOTA = re.compile(r"exceeded quota: ([^,]+), requested: (.*?), used: (.*?), limited: (.*?)$")
_MUST_SPECIFY = re.compile(r"failed quota: ([^:]+): must specify (.+)$")


@dataclass(frozen=True)
class NodeVerdict:
    node: str
    pool: str
    fits: bool
    reasons: tuple[Point, ...]  # every filter that rejects the node, the scheduler's first
    scheduler: tuple[str, ...]  # the phrases we expect the scheduler counted for this node


@dataclass(frozen=True)
class Explanation:
    namespace: str
    pod: str
    state: str  # unschedulable | waiting | gated | starting | running | succeeded | failed | quota | not-found
    phase: str
    node: str
    summary: Point
    evidence: str  # the message explained (scheduler, kubelet or API server), verbatim
    nodes: tuple[NodeVerdict, ...]
    scheduler_counts: tuple[tuple[str, int], ...]
    our_counts: tuple[tuple[str, int], ...]
    agrees: bool | None  # None where there was nothing to compare
    notes: tuple[Point, ...]

    def to_dict(self) -> dict[str, Any]:
        def point(p: Point) -> dict[str, Any]:
            return {"text": p.text, "section": p.section, "certain": p.certain}
        return {
            "namespace": self.namespace, "pod": self.pod, "state": self.state, "phase": self.phase,
            "node": self.node, "summary": point(self.summary), "evidence": self.evidence,
            "nodes": [{"node": v.node, "pool": v.pool, "fits": v.fits, "scheduler": list(v.scheduler),
                       "reasons": [point(r) for r in v.reasons]} for v in self.nodes],
            "schedulerCounts": dict(self.scheduler_counts), "ourCounts": dict(self.our_counts),
            "agrees": self.agrees, "notes": [point(n) for n in self.notes],
        }


def explain_pod(view: ClusterView, namespace: str, name: str) -> Explanation:
    """Explain one pod from what ``view`` shows (a live cluster or an evidence bundle)."""
    pod = view.pod(namespace, name)
    base = dict(namespace=namespace, pod=name)
    if pod is None:
        return _absent(view, namespace, name)
    phase, node = live.phase_of(pod), as_str(dig(pod, "spec", "nodeName"))
    pool = live.pool_of(view, node) if node else "-"
    if phase == "Failed":
        return _failed(pod, namespace, name, node)
    if phase == "Succeeded":
        return _simple(namespace, name, "succeeded", phase, node, say("state/succeeded", node=node, **base))
    if node:
        state = "running" if phase == "Running" else "starting"
        detail = live.pod_detail(pod)
        summary = say(f"state/{state}", node=node, pool=pool, detail=f": {detail.strip(' ()')}" if detail else "", **base)
        return _simple(namespace, name, state, phase, node, summary)
    gates = [as_str(dig(g, "name")) for g in as_list(dig(pod, "spec", "schedulingGates"))]
    if gates:
        return _simple(namespace, name, "gated", phase, "", say("state/gated", gates=", ".join(gates), **base))
    return _pending(view, pod, namespace, name)


def _simple(namespace: str, name: str, state: str, phase: str, node: str, summary: Point, evidence: str = "",
            notes: Iterable[Point] = ()) -> Explanation:
    return Explanation(namespace, name, state, phase, node, summary, evidence, (), (), (), None, tuple(notes))


# -- Pending: per-node reasons ------------------------------------------------------------------------------

def _pending(view: ClusterView, pod: Obj, namespace: str, name: str) -> Explanation:
    event = live.latest_event(view, namespace, name, "FailedScheduling")
    text = as_str(event.get("message")) if event else ""
    parsed = schedmsg.parse(text) if text else None
    dra = dra_fit.prepare(view, pod)
    nodes = view.nodes()
    fits = nodefit.evaluate(pod, nodes, view.pods(None), dra.reasons if dra else None)
    verdicts = tuple(_verdict(f) for f in fits)
    ours = Counter(r for v in verdicts for r in v.scheduler)
    theirs = Counter({_norm(r): c for r, c in parsed.reasons}) if parsed else Counter()
    notes: list[Point] = []
    agrees: bool | None = None
    if parsed and parsed.prefilter:
        notes.append(_prefilter(parsed.prefilter))
    elif parsed:
        agrees = ours == theirs and parsed.total == len(nodes)
        notes.append(say("check/agrees", counts=_counts(theirs)) if agrees else
                     say("check/differs", theirs=_counts(theirs), ours=_counts(ours)))
    if dra and dra.missing_classes:
        notes.append(say("pod/dra-class-missing", classes=", ".join(sorted(set(dra.missing_classes)))))
    if parsed:
        notes.extend(f for f in (_fits_now(v) for v in verdicts) if f)
        notes.extend(_preemption(parsed))
    state = "unschedulable" if parsed else "waiting"
    summary = say(f"state/{state}", namespace=namespace, pod=name, total=len(nodes))
    return Explanation(namespace, name, state, live.phase_of(pod), "", summary, text, verdicts,
                       tuple(sorted(theirs.items())), tuple(sorted(ours.items())), agrees, tuple(notes))


def _norm(reason: str) -> str:
    return schedmsg.TAINTS if schedmsg.is_taint_reason(reason) else reason


def _counts(counts: Counter[str]) -> str:
    return ", ".join(f"{n} × “{r}”" for r, n in sorted(counts.items())) or "nothing"


def _fits_now(verdict: NodeVerdict) -> Point | None:
    return say("check/fits-now", node=verdict.node) if verdict.fits else None


def _prefilter(message: str) -> Point:
    if "resourceclaim" in message.lower() or "resource claim" in message.lower():
        return say("pod/dra-waiting", message=message)
    return say("check/prefilter", message=message)


def _preemption(parsed: schedmsg.SchedulerMessage) -> list[Point]:
    pre = parsed.preemption
    if pre is None:
        return []
    if pre.count("No preemption victims found for incoming pod"):
        return [say("preempt/no-victims")]
    if pre.count("Preemption is not helpful for scheduling"):
        return [say("preempt/not-helpful")]
    return []


def _verdict(fit: nodefit.NodeFit) -> NodeVerdict:
    return NodeVerdict(fit.node, fit.pool, fit.fits, tuple(_reason_point(r) for r in fit.reasons),
                       tuple(sorted({r.scheduler for r in fit.primary})))


def _reason_point(reason: nodefit.Reason) -> Point:
    facts = dict(reason.facts)
    code = reason.code
    if code == "unschedulable":
        return say("node/cordoned")
    if code in ("selector", "selector-missing"):
        gfd = facts.get("key", "").startswith("nvidia.com/")
        return say(f"node/{code}{'-gfd' if gfd else ''}", **facts)
    if code == "insufficient":
        return say(_insufficient_key(facts), **facts)
    if code.startswith("dra-"):
        return dataclasses.replace(say(f"node/{code}", **facts), certain=reason.certain)
    return say(f"node/{code}", **facts)


def _insufficient_key(facts: dict[str, str]) -> str:
    resource = facts.get("resource", "")
    if facts.get("kind") == "native":
        return "node/native-busy"
    if facts.get("mig_state") in ("failed", "pending"):
        return f"node/gpu-mig-{facts['mig_state']}"
    if facts.get("capacity", "0") in ("", "0") and facts.get("allocatable") == "0":
        return "node/gpu-none" if facts.get("kind") == "gpu" else "node/extended-busy"
    if facts.get("allocatable") == "0":
        return "node/gpu-not-allocatable"
    if resource.startswith("nvidia.com/mig-"):
        return "node/gpu-mig-busy"
    if resource.endswith(".shared"):
        return "node/gpu-shared-busy"
    return "node/gpu-busy" if facts.get("kind") == "gpu" else "node/extended-busy"


# -- Failed: refused by the node ----------------------------------------------------------------------------

def _failed(pod: Obj, namespace: str, name: str, node: str) -> Explanation:
    reason, message = as_str(dig(pod, "status", "reason")), as_str(dig(pod, "status", "message"))
    exited = {} if reason else _exit_fields(pod)  # no kubelet refusal: a container's own exit failed the pod
    notes = [say("exit/nonzero", namespace=namespace, pod=name, node=node or "-", **exited) if exited
             else explain_refusal(reason, message, node)]
    summary = say("state/failed", namespace=namespace, pod=name, node=node or "-", reason=reason or "Failed",
                  message=message or "no message")
    return _simple(namespace, name, "failed", "Failed", node, summary, message, notes)


def _exit_fields(pod: Obj) -> dict[str, str]:
    """The first container that ended with a non-zero exit code: its name, code and reason."""
    for cs in as_list(dig(pod, "status", "containerStatuses")):
        term = dig(cs, "state", "terminated") or dig(cs, "lastState", "terminated")
        code = dig(term, "exitCode") if term else None
        if isinstance(code, int) and code != 0:
            return {"container": as_str(dig(cs, "name")), "code": str(code), "reason": as_str(dig(term, "reason"))}
    return {}


def explain_refusal(reason: str, message: str, node: str = "-") -> Point:
    """Plain words for a kubelet admission failure (pod ``status.reason`` and ``status.message``)."""
    if m := _DEVICES_UNAVAILABLE.search(message):
        return say("admit/devices-unavailable", node=node, resource=m.group(1), requested=m.group(2), available=m.group(3))
    if m := _SHARED_LIMIT.search(message):
        return say("admit/shared-limit", resource=m.group(1), requested=m.group(2))
    if reason.startswith("OutOf"):
        return say("admit/out-of-resource", node=node, resource=reason.removeprefix("OutOf"))
    return say("admit/other", reason=reason or "Failed", message=message or "no message")


# -- absent: refused by a quota -----------------------------------------------------------------------------

def explain_quota(message: str) -> Point:
    """Plain words for an API server quota refusal (``... is forbidden: exceeded quota: ...``)."""
    if m := _QUOTA.search(message):
        return say("quota/exceeded", quota=m.group(1), requested=m.group(2), used=m.group(3), limited=m.group(4))
    if m := _MUST_SPECIFY.search(message):
        return say("quota/must-specify", quota=m.group(1), resources=m.group(2), message=message)
    return say("quota/other", message=message)


def _absent(view: ClusterView, namespace: str, name: str) -> Explanation:
    for event in reversed(view.events(namespace)):
        text = as_str(event.get("message"))
        owner = as_str(dig(event, "involvedObject", "name"))
        if as_str(event.get("reason")) != "FailedCreate" or "quota" not in text:
            continue
        if owner == name or owner.startswith(f"{name}-") or name.startswith(f"{owner}-") or f'"{name}"' in text:
            kind = as_str(dig(event, "involvedObject", "kind")) or "Its owner"
            notes = (explain_quota(text),)
            summary = say("quota/owner", owner=f"{kind} {owner}", pod=name, namespace=namespace)
            return _simple(namespace, name, "quota", "", "", summary, text, notes)
    return _simple(namespace, name, "not-found", "", "", say("state/not-found", namespace=namespace, pod=name))


def explain_message(text: str) -> tuple[Point, ...]:
    """Plain words for a message on its own (no cluster): scheduler, quota or admission text."""
    parsed = schedmsg.parse(text)
    if parsed is not None:
        points = [_prefilter(parsed.prefilter)] if parsed.prefilter else [_count_point(r, n) for r, n in parsed.reasons]
        return tuple(points + _preemption(parsed))
    if "quota" in text and "forbidden" in text:
        return (explain_quota(text),)
    if "Allocate failed" in text or "UnexpectedAdmissionError" in text:
        return (explain_refusal("UnexpectedAdmissionError", text),)
    return ()


def _count_point(reason: str, count: int) -> Point:
    """What one ``<count> <reason>`` of a FailedScheduling message means, without looking at the nodes."""
    if schedmsg.is_taint_reason(reason):
        return say("count/taints", count=count)
    if reason.startswith(schedmsg.INSUFFICIENT):
        resource = reason.removeprefix(schedmsg.INSUFFICIENT)
        key = "count/insufficient-gpu" if resource.startswith("nvidia.com/") else "count/insufficient"
        return say(key, count=count, resource=resource)
    keys = {schedmsg.AFFINITY: "count/affinity", schedmsg.UNSCHEDULABLE: "count/unschedulable",
            schedmsg.TOO_MANY_PODS: "count/too-many-pods", schedmsg.DRA_CANNOT_ALLOCATE: "count/dra",
            schedmsg.DRA_NOT_ON_NODE: "count/dra-elsewhere"}
    return say(keys.get(reason, "count/other"), count=count, reason=reason)
