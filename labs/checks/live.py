"""Checks on the cluster's outcome: pods (``pod``), nodes (``node``) and any object (``object``).

They read through a ``ClusterView``: the live API server while a learner works, or the record in an evidence
bundle when grading offline. A failed check says what the cluster shows instead (a Pending pod's latest
scheduler message, a node's capacity next to its allocatable), because that is what the learner must read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from labs import evidence, paths, view
from labs.checks import common
from labs.spec import Outcome, Problems

PHASES = ("Pending", "Running", "Succeeded", "Failed")
_PROBLEM_EVENTS = ("FailedScheduling", "FailedCreate", "UnexpectedAdmissionError", "BackOff", "GPUOutOfMemory",
                   "Preempted", "FailedMount", "OutOfnvidia.com/gpu")


def _missing(exc: view.MissingEvidence) -> Outcome:
    return Outcome(False, f"the evidence bundle has no record of {exc.key}; submit again from the lab "
                          "(lab.submit() or `gpulab lab submit`)")


def _events(v: view.ClusterView, namespace: str) -> list[dict[str, Any]]:
    return view.items(v, f"/api/v1/namespaces/{namespace}/events")


def _latest_problem(events: list[dict[str, Any]], name: str) -> str:
    mine = [e for e in events if e.get("involvedObject", {}).get("name") == name
            and (e.get("type") == "Warning" or e.get("reason") in _PROBLEM_EVENTS)]
    if not mine:
        return ""
    last = max(mine, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    return f"{last.get('reason', '')}: {' '.join(str(last.get('message', '')).split())}"


@dataclass(frozen=True)
class EventExpect:
    reason: str
    contains: str


@dataclass(frozen=True)
class PodRule:
    """Pods (one by name, or all matching a label selector) are in ``phase``, on allowed nodes, with events."""

    namespace: str
    name: str
    selector: str
    phase: str
    count: int | None
    nodes: tuple[str, ...]
    reason: str
    event: EventExpect | None
    cluster = True

    @classmethod
    def parse(cls, p: Problems, where: str, raw: dict[str, Any], _ctx: object) -> PodRule:
        p.unknown(where, raw, ("namespace", "name", "selector", "phase", "count", "nodeIn", "reason", "event"))
        ns = common.text(p, f"{where}.namespace", raw.get("namespace"))
        name = common.text(p, f"{where}.name", raw.get("name"), required=False)
        selector = raw.get("selector", "")
        if not isinstance(selector, str):
            p.add(f"{where}.selector", "must be a label selector string")
            selector = ""
        if bool(name) == ("selector" in raw):
            p.add(where, "give either name or selector")
        phase = raw.get("phase", "")
        if phase and phase not in PHASES:
            p.add(f"{where}.phase", f"must be one of {', '.join(PHASES)}")
        count = raw.get("count")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0 or name):
            p.add(f"{where}.count", "must be a whole number, and only with selector")
            count = None
        nodes = common.strings(p, f"{where}.nodeIn", raw["nodeIn"]) if "nodeIn" in raw else ()
        reason = common.text(p, f"{where}.reason", raw.get("reason"), required=False)
        event = None
        if "event" in raw:
            ev = common.mapping(p, f"{where}.event", raw["event"])
            p.unknown(f"{where}.event", ev, ("reason", "contains"))
            event = EventExpect(common.text(p, f"{where}.event.reason", ev.get("reason")),
                                str(ev.get("contains", "")))
        return cls(ns, name, selector, phase, count, nodes, reason, event)

    def reads(self) -> Sequence[tuple[str, Mapping[str, str]]]:
        base = f"/api/v1/namespaces/{self.namespace}/pods"
        pods = (f"{base}/{self.name}", {}) if self.name else (base, {"labelSelector": self.selector})
        return (pods, (f"/api/v1/namespaces/{self.namespace}/events", {}))

    def _label(self) -> str:
        return f"pod {self.namespace}/{self.name}" if self.name else \
            f"pods in {self.namespace}" + (f" with {self.selector}" if self.selector else "")

    def evaluate(self, ev: evidence.Evidence) -> Outcome:
        assert ev.view is not None
        try:
            if self.name:
                found = ev.view.get(*self.reads()[0])
                pods = [found] if found else []
            else:
                pods = view.items(ev.view, *self.reads()[0])
            pods = [p for p in pods if not p.get("metadata", {}).get("deletionTimestamp")]
            events = _events(ev.view, self.namespace) if (self.event or pods) else []
        except view.MissingEvidence as exc:
            return _missing(exc)
        if not pods:
            return Outcome(self.count == 0, f"{self._label()}: none exist")
        if self.count is not None and len(pods) != self.count:
            names = ", ".join(sorted(p["metadata"]["name"] for p in pods))
            return Outcome(False, f"{self._label()}: {len(pods)} exist ({names}), expected {self.count}")
        for pod in sorted(pods, key=lambda p: str(p["metadata"].get("name"))):
            problem = self._pod_problem(pod, events)
            if problem:
                return Outcome(False, problem)
        where = sorted({str(p.get("spec", {}).get("nodeName") or "-") for p in pods})
        what = self.phase or "present"
        return Outcome(True, f"{self._label()}: {what}" + (f" on {', '.join(where)}" if where != ["-"] else ""))

    def _pod_problem(self, pod: dict[str, Any], events: list[dict[str, Any]]) -> str:
        name = str(pod["metadata"].get("name"))
        label = f"pod {self.namespace}/{name}"
        status = pod.get("status", {})
        phase, node = str(status.get("phase", "Pending")), str(pod.get("spec", {}).get("nodeName") or "")
        latest = _latest_problem(events, name)
        detail = f" ({latest})" if latest else (f" ({status.get('reason')}: {status.get('message')})"
                                                if status.get("reason") else "")
        if self.phase and phase != self.phase:
            return f"{label} is {phase}{' on ' + node if node else ''}, not {self.phase}{detail}"
        if self.nodes and node not in self.nodes:
            return f"{label} runs on {node or 'no node'}, not on {' or '.join(self.nodes)}"
        if self.reason and status.get("reason") != self.reason:
            return f"{label} has reason {status.get('reason') or 'none'}, not {self.reason}{detail}"
        if self.event and not any(
                e.get("involvedObject", {}).get("name") == name and e.get("reason") == self.event.reason
                and paths.Expect(paths.parse("message"), "contains", self.event.contains).test(e)[0]
                for e in events):
            return f"{label} has no {self.event.reason} event saying {self.event.contains!r}{detail}"
        return ""


@dataclass(frozen=True)
class NodeRule:
    """A node advertises the given capacity/allocatable and carries (or lacks) the given labels."""

    name: str
    capacity: Mapping[str, str]
    allocatable: Mapping[str, str]
    labels: Mapping[str, str | None]
    cluster = True

    @classmethod
    def parse(cls, p: Problems, where: str, raw: dict[str, Any], _ctx: object) -> NodeRule:
        p.unknown(where, raw, ("name", "capacity", "allocatable", "labels"))
        name = common.text(p, f"{where}.name", raw.get("name"))
        sections: dict[str, dict[str, Any]] = {}
        for section in ("capacity", "allocatable", "labels"):
            sections[section] = common.mapping(p, f"{where}.{section}", raw.get(section, {}))
            for key, value in sections[section].items():
                if value is None and section == "labels":
                    continue
                if paths.scalar(value) is None:
                    p.add(f"{where}.{section}.{key}", "must be a string or number" +
                          (" (or null: the label must be absent)" if section == "labels" else ""))
        if not any(sections.values()):
            p.add(where, "give at least one of capacity, allocatable, labels")
        return cls(name, {k: str(paths.scalar(v)) for k, v in sections["capacity"].items()},
                   {k: str(paths.scalar(v)) for k, v in sections["allocatable"].items()},
                   {k: (None if v is None else str(paths.scalar(v))) for k, v in sections["labels"].items()})

    def reads(self) -> Sequence[tuple[str, Mapping[str, str]]]:
        return ((f"/api/v1/nodes/{self.name}", {}),)

    def evaluate(self, ev: evidence.Evidence) -> Outcome:
        assert ev.view is not None
        try:
            node = ev.view.get(*self.reads()[0])
        except view.MissingEvidence as exc:
            return _missing(exc)
        if node is None:
            return Outcome(False, f"node {self.name} does not exist")
        status, labels = node.get("status", {}), node.get("metadata", {}).get("labels") or {}
        for section, wanted in (("capacity", self.capacity), ("allocatable", self.allocatable)):
            have = status.get(section, {})
            for res, want in sorted(wanted.items()):
                if paths.scalar(have.get(res, "0")) != want:
                    other = "allocatable" if section == "capacity" else "capacity"
                    return Outcome(False, f"node {self.name} has {section} {res}: {have.get(res, 0)} "
                                          f"(expected {want}; {other} {status.get(other, {}).get(res, 0)})")
        for key, value in sorted(self.labels.items()):
            if labels.get(key) != value:
                shown = f"{key}={labels[key]}" if key in labels else f"no {key} label"
                return Outcome(False, f"node {self.name} has {shown}" +
                               (f" (expected {value})" if value is not None else " (it should be removed)"))
        return Outcome(True, f"node {self.name}: as expected")


@dataclass(frozen=True)
class ObjectRule:
    """The object at an API path exists (or not) and satisfies every expectation."""

    path: str
    title: str
    exists: bool
    expect: tuple[paths.Expect, ...]
    cluster = True

    @classmethod
    def parse(cls, p: Problems, where: str, raw: dict[str, Any], _ctx: object) -> ObjectRule:
        p.unknown(where, raw, ("path", "title", "exists", "expect"))
        path = common.text(p, f"{where}.path", raw.get("path"))
        if path and not path.startswith(("/api/", "/apis/")):
            p.add(f"{where}.path", "must be an API path starting with /api/ or /apis/")
        exists = raw.get("exists", True)
        if not isinstance(exists, bool):
            p.add(f"{where}.exists", "must be true or false")
        expect = common.expectations(p, f"{where}.expect", raw["expect"]) if "expect" in raw else ()
        if not exists and expect:
            p.add(f"{where}.expect", "cannot be combined with exists: false")
        title = common.text(p, f"{where}.title", raw.get("title"), required=False) or path
        return cls(path, title, bool(exists), expect)

    def reads(self) -> Sequence[tuple[str, Mapping[str, str]]]:
        return ((self.path, {}),)

    def evaluate(self, ev: evidence.Evidence) -> Outcome:
        assert ev.view is not None
        try:
            obj = ev.view.get(self.path)
        except view.MissingEvidence as exc:
            return _missing(exc)
        if obj is None:
            return Outcome(not self.exists, f"{self.title} does not exist")
        if not self.exists:
            return Outcome(False, f"{self.title} still exists")
        for exp in self.expect:
            ok, found = exp.test(obj)
            if not ok:
                return Outcome(False, f"{self.title}: {exp.describe()}, but it is {found}")
        return Outcome(True, f"{self.title}: as expected")
