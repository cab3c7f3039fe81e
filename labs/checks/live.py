"""Checks on the cluster's outcome: ``pod``, ``node``, ``quota``, ``claim``, ``object`` and ``prediction``.

They read a ``graders.ClusterView``: the live API server while a learner works, or an evidence bundle when
grading offline, and lean on the graders' outcome checks (``graders.live``) for what those already judge, so
that a pod's phase or a quota's usage is described in the same words everywhere. Waiting is the lab
runtime's job (it re-evaluates failing cluster checks); these look once. The lab's hint replaces the
graders' generic one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from dataclasses import dataclass
from typing import Any

from graders import Check, ClusterView, OutOfScope, live
from graders.view import dig
from labs import evidence, paths, predict, selectors
from labs.checks import common
from labs.spec import Outcome, Problems

PHASES = ("Pending", "Running", "Succeeded", "Failed")


def _from(check: Check) -> Outcome:
    return Outcome(check.passed, check.message)


def _view(ev: evidence.Evidence) -> ClusterView:
    assert ev.view is not None, "cluster checks only run with a view"
    return ev.view


def guarded(probe: Callable[[ClusterView], Outcome], ev: evidence.Evidence) -> Outcome:
    try:
        return probe(_view(ev))
    except OutOfScope as exc:
        return Outcome(False, f"{exc.message}; submit again from the lab (lab.submit() or `gpulab lab submit`)")


@dataclass(frozen=True)
class PodRule:
    """Pods (one by name, or all matching a label selector) are in ``phase``, on allowed nodes, with the
    given failure reason or scheduler message."""

    namespace: str
    name: str
    selector: selectors.Selector | None
    phase: str
    count: int | None
    nodes: tuple[str, ...]
    reason: str
    scheduling: tuple[str, ...]
    cluster = True

    @classmethod
    def parse(cls, p: Problems, where: str, raw: dict[str, Any], _ctx: object) -> PodRule:
        p.unknown(where, raw, ("namespace", "name", "selector", "phase", "count", "nodeIn", "reason",
                               "schedulingFailed"))
        ns = common.text(p, f"{where}.namespace", raw.get("namespace"))
        name = common.text(p, f"{where}.name", raw.get("name"), required=False)
        selector = None
        if "selector" in raw:
            try:
                selector = selectors.parse(str(raw["selector"]) if isinstance(raw["selector"], str) else "\0")
            except ValueError as exc:
                p.add(f"{where}.selector", str(exc))
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
        sched = raw.get("schedulingFailed", [])
        scheduling = common.strings(p, f"{where}.schedulingFailed", [sched] if isinstance(sched, str) else sched) \
            if sched else ()
        return cls(ns, name, selector, str(phase), count, nodes, reason, scheduling)

    def _label(self) -> str:
        if self.name:
            return f"pod {self.namespace}/{self.name}"
        return f"pods in {self.namespace}" + (f" with {self.selector.text}" if self.selector and self.selector.text else "")

    def evaluate(self, ev: evidence.Evidence) -> Outcome:
        return guarded(self._probe, ev)

    def _probe(self, view: ClusterView) -> Outcome:
        if self.name:
            names = [self.name]
        else:
            found = [p for p in view.pods(self.namespace) if not p.get("metadata", {}).get("deletionTimestamp")
                     and self.selector is not None and self.selector.matches(p["metadata"].get("labels") or {})]
            names = sorted(p["metadata"]["name"] for p in found)
            if not names:
                return Outcome(self.count == 0, f"{self._label()}: none exist")
            if self.count is not None and len(names) != self.count:
                return Outcome(False, f"{self._label()}: {len(names)} exist ({', '.join(names)}), "
                                      f"expected {self.count}")
        for name in names:
            problem = self._pod_problem(view, name)
            if problem is not None:
                return problem
        placed = sorted({str((view.pod(self.namespace, n) or {}).get("spec", {}).get("nodeName") or "-")
                         for n in names})
        return Outcome(True, f"{self._label()}: {self.phase or 'present'}"
                             + (f" on {', '.join(placed)}" if placed != ["-"] else ""))

    def _pod_problem(self, view: ClusterView, name: str) -> Outcome | None:
        if self.reason:
            failed = live.admission_failed(view, self.namespace, name, self.reason)
            if not failed.passed:
                return _from(failed)
        elif self.phase:
            phase = live.pod_phase(view, self.namespace, name, self.phase)
            if not phase.passed:
                return self._with_event(view, name, _from(phase))
        elif view.pod(self.namespace, name) is None:
            return Outcome(False, f"pod {self.namespace}/{name} does not exist")
        if self.nodes:
            node = str((view.pod(self.namespace, name) or {}).get("spec", {}).get("nodeName") or "")
            if node not in self.nodes:
                return Outcome(False, f"pod {self.namespace}/{name} runs on {node or 'no node'}, "
                                      f"not on {' or '.join(self.nodes)}")
        if self.scheduling:
            sched = live.scheduling_failed(view, self.namespace, name, self.scheduling)
            if not sched.passed:
                return _from(sched)
        return None

    def _with_event(self, view: ClusterView, name: str, outcome: Outcome) -> Outcome:
        """A Pending pod's message gains the scheduler's latest words: that is what the learner must read."""
        event = live.latest_event(view, self.namespace, name, "FailedScheduling")
        if event is None or "Pending" not in outcome.message:
            return outcome
        said = " ".join(str(event.get("message", "")).split())
        return Outcome(False, f"{outcome.message} Latest scheduler message: {said}")


@dataclass(frozen=True)
class NodeRule:
    """A node advertises the given capacity/allocatable and carries (or lacks: null) the given labels."""

    name: str
    capacity: dict[str, str]
    allocatable: dict[str, str]
    labels: dict[str, str | None]
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

    def evaluate(self, ev: evidence.Evidence) -> Outcome:
        return guarded(self._probe, ev)

    def _probe(self, view: ClusterView) -> Outcome:
        for field, wanted in (("capacity", self.capacity), ("allocatable", self.allocatable)):
            for res, value in sorted(wanted.items()):
                got = live.node_resource(view, self.name, res, equals=value, field=field)
                if not got.passed:
                    return _from(got)
        for key, label in sorted(self.labels.items()):
            if label is None:
                node = view.node(self.name) or {}
                if key in (node.get("metadata", {}).get("labels") or {}):
                    return Outcome(False, f"node {self.name} still carries the label {key}")
                continue
            got = live.node_label(view, self.name, key, label)
            if not got.passed:
                return _from(got)
        return Outcome(True, f"node {self.name}: as expected")


@dataclass(frozen=True)
class QuotaRule:
    """A ResourceQuota tracks ``resource`` with the given hard limit and usage (``graders.live.quota_usage``)."""

    namespace: str
    name: str
    resource: str
    used: str | None
    hard: str | None
    cluster = True

    @classmethod
    def parse(cls, p: Problems, where: str, raw: dict[str, Any], _ctx: object) -> QuotaRule:
        p.unknown(where, raw, ("namespace", "name", "resource", "used", "hard"))
        values = {k: paths.scalar(raw[k]) if k in raw else None for k in ("used", "hard")}
        for k in ("used", "hard"):
            if k in raw and values[k] is None:
                p.add(f"{where}.{k}", "must be a number or quantity")
        return cls(common.text(p, f"{where}.namespace", raw.get("namespace")),
                   common.text(p, f"{where}.name", raw.get("name")),
                   common.text(p, f"{where}.resource", raw.get("resource", "requests.nvidia.com/gpu")),
                   values["used"], values["hard"])

    def evaluate(self, ev: evidence.Evidence) -> Outcome:
        return _from(live.quota_usage(_view(ev), self.namespace, self.name, self.resource, used=self.used,
                                      hard=self.hard))


@dataclass(frozen=True)
class ClaimRule:
    """A ResourceClaim is allocated (``graders.live.claim_allocated``), optionally on ``node``, with ``count`` devices.
    The claim is named (``name``), or it is the one pod ``pod`` holds (``podClaim``: the pod's claim entry), which is
    how a claim made from a ResourceClaimTemplate is found: its name is generated."""

    namespace: str
    name: str
    node: str | None
    count: int | None
    pod: str = ""
    pod_claim: str | None = None
    cluster = True

    @classmethod
    def parse(cls, p: Problems, where: str, raw: dict[str, Any], _ctx: object) -> ClaimRule:
        p.unknown(where, raw, ("namespace", "name", "pod", "podClaim", "node", "count"))
        count = raw.get("count")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
            p.add(f"{where}.count", "must be a whole number >= 1")
            count = None
        node = common.text(p, f"{where}.node", raw.get("node"), required=False) or None
        name = common.text(p, f"{where}.name", raw.get("name"), required=False)
        pod = common.text(p, f"{where}.pod", raw.get("pod"), required=False)
        pod_claim = common.text(p, f"{where}.podClaim", raw.get("podClaim"), required=False) or None
        if bool(name) == bool(pod):
            p.add(where, "name the claim (name) or the pod that holds it (pod), not both")
        if pod_claim and not pod:
            p.add(f"{where}.podClaim", "only with pod")
        return cls(common.text(p, f"{where}.namespace", raw.get("namespace")), name, node, count, pod, pod_claim)

    def evaluate(self, ev: evidence.Evidence) -> Outcome:
        return _from(live.claim_allocated(_view(ev), self.namespace, claim=self.name or None, pod=self.pod or None,
                                          pod_claim=self.pod_claim, node=self.node, count=self.count))


_GETTERS: dict[str, Callable[[ClusterView, str, str], Any]] = {
    "ClusterPolicy": lambda v, _ns, _n: v.cluster_policy(),
    "DeviceClass": lambda v, _ns, n: next((o for o in v.device_classes() if o["metadata"]["name"] == n), None),
    "ResourceSlice": lambda v, _ns, n: next((o for o in v.resource_slices() if o["metadata"]["name"] == n), None),
    "ConfigMap": lambda v, ns, n: next((o for o in v.configmaps(ns) if o["metadata"]["name"] == n), None),
}


@dataclass(frozen=True)
class ObjectRule:
    """An object (ClusterPolicy, DeviceClass, ResourceSlice, ConfigMap) exists, or not, and meets every
    expectation. A ResourceSlice is named by its ``node``: a DRA driver creates its slices with ``generateName``
    (a random suffix; ``k8s.io/dynamic-resource-allocation/resourceslice``), so a lab cannot know the name."""

    kind: str
    name: str
    namespace: str
    exists: bool
    expect: tuple[paths.Expect, ...]
    node: str = ""
    cluster = True

    @classmethod
    def parse(cls, p: Problems, where: str, raw: dict[str, Any], _ctx: object) -> ObjectRule:
        p.unknown(where, raw, ("kind", "name", "namespace", "exists", "expect", "node"))
        node = ""
        if isinstance(raw, dict) and raw.get("kind") == "ResourceSlice":
            node = common.text(p, f"{where}.node", raw.get("node"), required=True)
            if "name" in raw:
                p.add(f"{where}.name", "a ResourceSlice's name is generated; name it by node")
            raw = {**raw, "name": node}
        elif isinstance(raw, dict) and "node" in raw:
            p.add(f"{where}.node", "only a ResourceSlice is named by node")
        kind, namespace, name = _ref(p, where, raw)
        exists = raw.get("exists", True)
        if not isinstance(exists, bool):
            p.add(f"{where}.exists", "must be true or false")
        expect = common.expectations(p, f"{where}.expect", raw["expect"]) if "expect" in raw else ()
        if not exists and expect:
            p.add(f"{where}.expect", "cannot be combined with exists: false")
        return cls(kind, "" if node else name, namespace, bool(exists), expect, node)

    def _label(self) -> str:
        if self.node:
            return f"{self.kind} of node {self.node}"
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}".strip() if self.name else self.kind

    def evaluate(self, ev: evidence.Evidence) -> Outcome:
        return guarded(self._probe, ev)

    def _probe(self, view: ClusterView) -> Outcome:
        obj = _node_slice(view, self.node) if self.node else _GETTERS[self.kind](view, self.namespace, self.name)
        if obj is None:
            return Outcome(not self.exists, f"{self._label()} does not exist")
        if not self.exists:
            return Outcome(False, f"{self._label()} still exists")
        for exp in self.expect:
            ok, found = exp.test(obj)
            if not ok:
                return Outcome(False, f"{self._label()}: {exp.describe()}, but it is {found}")
        return Outcome(True, f"{self._label()}: as expected")


def _node_slice(view: ClusterView, node: str) -> Any:
    return next((o for o in view.resource_slices() if (o.get("spec") or {}).get("nodeName") == node), None)


_GETTERS.update({
    "Node": lambda v, _ns, n: v.node(n),
    "Pod": lambda v, ns, n: v.pod(ns, n),
    "ResourceClaim": lambda v, ns, n: next((o for o in v.resource_claims(ns) if o["metadata"]["name"] == n), None),
})
SCORING = ("recorded", "correct")


def _ref(p: Problems, where: str, raw: Any) -> tuple[str, str, str]:
    m = common.mapping(p, where, raw)
    kind = common.text(p, f"{where}.kind", m.get("kind"))
    if kind and kind not in _GETTERS:
        p.add(f"{where}.kind", f"must be one of {', '.join(_GETTERS)}")
    name = common.text(p, f"{where}.name", m.get("name"), required=kind != "ClusterPolicy")
    namespace = common.text(p, f"{where}.namespace", m.get("namespace"),
                            required=kind in ("ConfigMap", "Pod", "ResourceClaim"))
    return kind, namespace, name


def _label(kind: str, namespace: str, name: str) -> str:
    return f"{kind} {namespace + '/' if namespace else ''}{name}".strip()


@dataclass(frozen=True)
class PredictionRule:
    """The learner recorded prediction ``key`` (``labs.predict``) before the ``before`` object existed; the
    message compares it with what ``of`` (an object and a path in it) shows. ``scoring: correct`` awards the
    points only for a right prediction; ``recorded`` (the default) for any prediction made in time, since a
    wrong guess that the cluster then corrects is the point of predicting.

    "In time" is the API server's word, never the learner's: where the view keeps creation times (a cluster),
    the prediction's stamp in ``namespace`` (``labs.predict.stamp``) must hold the file's value and be created no
    later than the ``before`` object. A bundle keeps no times, so there the order is not judged."""

    key: str
    file: str
    of: tuple[str, str, str]
    path: paths.Path
    before: tuple[str, str, str] | None
    scoring: str
    namespace: str = ""  # where the lab's prediction stamps live (its first scope namespace)
    cluster = True

    @classmethod
    def parse(cls, p: Problems, where: str, raw: dict[str, Any], ctx: Any) -> PredictionRule:
        p.unknown(where, raw, ("key", "of", "before", "scoring"))
        key = common.text(p, f"{where}.key", raw.get("key"))
        if predict.FILE not in getattr(ctx, "files", (predict.FILE,)):
            p.add(where, f"a lab with predictions lists {predict.FILE} in spec.files (a starter with no entries)")
        of_raw = common.mapping(p, f"{where}.of", raw.get("of"))
        of = _ref(p, f"{where}.of", {k: v for k, v in of_raw.items() if k != "path"})
        p.unknown(f"{where}.of", of_raw, ("kind", "namespace", "name", "path"))
        path = common.path(p, f"{where}.of.path", of_raw.get("path")) or paths.parse("metadata.name")
        before = _ref(p, f"{where}.before", raw["before"]) if "before" in raw else None
        if before is not None:
            p.unknown(f"{where}.before", common.mapping(p, f"{where}.before", raw["before"]),
                      ("kind", "namespace", "name"))
        scoring = raw.get("scoring", "recorded")
        if scoring not in SCORING:
            p.add(f"{where}.scoring", f"must be one of {', '.join(SCORING)}")
        namespaces = tuple(getattr(ctx, "namespaces", ()))
        if not namespaces:
            p.add(where, "a lab with predictions has a namespace (spec.scope.namespaces): each prediction is stamped "
                         "there, dated by the API server")
        return cls(key, predict.FILE, of, path, before, str(scoring), namespaces[0] if namespaces else "")

    @staticmethod
    def lookup(view: ClusterView, ref: tuple[str, str, str]) -> Any:
        return _GETTERS[ref[0]](view, ref[1], ref[2])

    @staticmethod
    def stamps_of(checks: Iterable[Any]) -> dict[str, str]:
        """Prediction key -> the namespace of its stamp, for the prediction checks among a lab's ``checks``."""
        return {c.rule.key: c.rule.namespace for c in checks if isinstance(c.rule, PredictionRule)}

    def _not_in_time(self, view: ClusterView, mine: predict.Prediction, revealed: datetime) -> str:
        """Why the cluster does not show ``mine`` recorded by ``revealed`` (the reveal's creation), or ""."""
        reveal = f"{_label(*self.before)} showed the answer (created {revealed:%H:%M:%S} UTC)" if self.before else ""
        found = predict.stamped(self.lookup(view, ("ConfigMap", self.namespace, predict.stamp_name(self.key))))
        if found is None:
            return (f"prediction {self.key!r} is not recorded in the cluster, so nothing shows it was made before "
                    f"{reveal}: the time in {self.file} is yours to write and does not count. Record it with "
                    f"lab.predict({self.key!r}, ...) or `gpulab lab predict`, which the API server dates (reset the "
                    "lab to predict again)")
        value, at = found
        if not predict.same(value, mine.value):
            return (f"{self.file} says {mine.value!r} for {self.key!r}, but the cluster's record of your prediction "
                    f"says {value!r}: a prediction changed after it was recorded does not count")
        if at is None or at > revealed:
            when = f"at {at:%H:%M:%S} UTC" if at else "at an unknown time"
            return f"prediction {self.key!r} was recorded {when} (the API server's clock), after {reveal}"
        return ""

    def evaluate(self, ev: evidence.Evidence) -> Outcome:
        return guarded(lambda view: self._probe(view, ev), ev)

    def _probe(self, view: ClusterView, ev: evidence.Evidence) -> Outcome:
        made, problem = predict.read(ev.files.get(self.file))
        if problem:
            return Outcome(False, problem)
        mine = made.get(self.key)
        if mine is None:
            return Outcome(False, f"no prediction {self.key!r} recorded yet: record it before you look, with "
                                  f"lab.predict({self.key!r}, ...) or `gpulab lab predict LAB {self.key} VALUE`")
        if self.before is not None:
            shown = self.lookup(view, self.before)
            created = predict.parse_time(dig(shown, "metadata", "creationTimestamp")) if shown else None
            late = self._not_in_time(view, mine, created) if created is not None else ""
            if late:
                return Outcome(False, late)
        obj = self.lookup(view, self.of)
        if obj is None:
            return Outcome(False, f"{_label(*self.of)} does not exist yet, so prediction {self.key!r} cannot be "
                                  f"compared with the cluster")
        ok, found = paths.Expect(self.path, "equals", mine.value).test(obj)
        verdict = "right" if ok else "not what happened"
        said = f"you predicted {mine.value!r} for {self.key!r}; {_label(*self.of)} shows {found}: {verdict}"
        return Outcome(ok or self.scoring == "recorded", said)
