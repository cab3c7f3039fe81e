"""Rule ``priority-class``: PriorityClasses are valid and the classes that pods name exist.

A user-defined PriorityClass value may be at most 1000000000; ``preemptionPolicy`` is
``PreemptLowerPriority`` (the default) or ``Never``, spelled exactly; at most one class may be the
``globalDefault``. A pod that names a class the cluster does not have is refused at admission ("no
PriorityClass with name ... was found"); for a Deployment that refusal appears only in the ReplicaSet's
events, so it is easy to miss. The ``system-`` classes always exist.
"""

from __future__ import annotations

from collections.abc import Iterator

from graders import findings, manifests, source
from graders.rules import base

RULE_ID = "priority-class"

HIGHEST_USER_PRIORITY = 1_000_000_000
SYSTEM_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
_POLICIES = ("PreemptLowerPriority", "Never")


def check(doc: source.Document, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    if manifests.classify(doc) is not manifests.DocType.OBJECT:
        return
    if manifests.kind(doc) == "PriorityClass":
        yield from _priority_class(doc, ctx.index)
    for pod in manifests.pod_specs(doc):
        yield from _pod(doc, pod, ctx.index)


def _priority_class(doc: source.Document, index: base.Index) -> Iterator[findings.Finding]:
    data = manifests.as_map(doc.data)
    name = manifests.name(doc)
    value = data.get("value")
    if "value" not in data:
        yield base.emit(doc, (), "priority-class/no-value", name=name)
    elif isinstance(value, bool) or not isinstance(value, int):
        yield base.emit(doc, ("value",), "priority-class/value-not-integer", name=name, value=str(value))
    elif value > HIGHEST_USER_PRIORITY and not name.startswith("system-"):
        error = f"value: Forbidden: maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}"
        yield base.emit(doc, ("value",), "priority-class/value-too-high", name=name, value=value,
                        api=manifests.invalid("PriorityClass", name, [error]))
    if "preemptionPolicy" in data:
        yield from _policy(doc, ("preemptionPolicy",), data.get("preemptionPolicy"), "PriorityClass", name)
    if data.get("globalDefault") is True and index.global_defaults:
        first = index.global_defaults[0]
        if (first[1], first[2]) != (doc.file, doc.locate(("globalDefault",)).line):
            yield base.emit(doc, ("globalDefault",), "priority-class/second-default", name=name, other=first[0])


def _policy(doc: source.Document, path: source.YPath, raw: object, kind: str, name: str) -> Iterator[findings.Finding]:
    if raw in _POLICIES:
        return
    text = raw if isinstance(raw, str) else str(raw)
    api_path = manifests.api_path(path)
    if text == "":
        error = f"{api_path}: Required value"
    else:
        error = (f'{api_path}: Unsupported value: {manifests.go_quote(text)}: supported values: '
                 '"PreemptLowerPriority", "Never"')
    yield base.emit(doc, path, "priority-class/bad-preemption-policy", value=text,
                    api=manifests.invalid(kind, name, [error]))


def _pod(doc: source.Document, pod: manifests.PodSpecAt, index: base.Index) -> Iterator[findings.Finding]:
    wanted = pod.spec.get("priorityClassName")
    if "preemptionPolicy" in pod.spec:
        yield from _policy(doc, pod.path + ("preemptionPolicy",), pod.spec.get("preemptionPolicy"), pod.kind, pod.name)
    if not isinstance(wanted, str) or not wanted or wanted in SYSTEM_CLASSES or wanted in index.priority_classes:
        return
    defined = ", ".join(sorted(index.priority_classes)) or "none"
    pod_name = pod.name if not pod.is_template else f"{pod.name or '<name>'}-<generated>"
    yield base.emit(doc, pod.path + ("priorityClassName",), "priority-class/unknown-class", owner=pod.owner,
                    name=wanted, defined=defined, api=f'pods "{pod_name or "<name>"}" is forbidden: '
                    f"no PriorityClass with name {wanted} was found")
