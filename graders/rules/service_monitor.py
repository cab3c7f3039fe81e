"""Rule ``service-monitor``: a ServiceMonitor finds the GPU Operator's dcgm-exporter Service (the PrometheusRule
checks of ``prometheus-rule`` live here too, beside the facts they share).

The dcgm-exporter Service is the operator's own (``OP assets/state-dcgm-exporter/0400_service.yaml``): in the
operator's namespace, labelled ``app: nvidia-dcgm-exporter``, one port named ``gpu-metrics`` (9400); the
operator's own ServiceMonitor (``0500_service_monitor.yaml``) scrapes that port on ``/metrics``. A
ServiceMonitor names the port by name and, without a ``namespaceSelector``, looks only in its own namespace
(prometheus-operator ``Documentation/api-reference/api.md``, ServiceMonitorSpec). Expressions are read with
``graders.promql``; kube-state-metrics sanitises resource names into label values (``nvidia.com/gpu`` becomes
``nvidia_com_gpu``: ``KSM internal/store/utils.go``, ``toResourceUnitValue``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from graders import findings, manifests, promql, source
from graders.rules import base

RULE_ID = "service-monitor"
OPERATOR_NAMESPACE = "gpu-operator"
DCGM_LABELS = {"app": "nvidia-dcgm-exporter", "app.kubernetes.io/component": "nvidia-dcgm-exporter"}
DCGM_PORT = "gpu-metrics"
_DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")
_NODE_METRICS = ("kube_node_status_allocatable", "kube_node_status_capacity")


def sanitise(name: str) -> str:
    """A resource name as kube-state-metrics writes it into the ``resource`` label."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _selects_dcgm(spec: dict[str, object]) -> bool | None:
    """Whether the selector picks the dcgm-exporter Service; None when it is not meant for it at all."""
    sel = manifests.as_map(spec.get("selector"))
    labels = {str(k): str(v) for k, v in manifests.as_map(sel.get("matchLabels")).items()}
    meant = any("dcgm" in v for v in labels.values()) or any(
        "dcgm" in str(v) for e in manifests.as_list(sel.get("matchExpressions")) for v in
        manifests.as_list(manifests.as_map(e).get("values")))
    if not meant:
        return None
    return all(DCGM_LABELS.get(k) == v for k, v in labels.items())


def check(doc: source.Document, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    if manifests.classify(doc) is not manifests.DocType.OBJECT:
        return
    if manifests.kind(doc) == "ServiceMonitor":
        yield from _service_monitor(doc)


def check_rules(doc: source.Document, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    if manifests.classify(doc) is manifests.DocType.OBJECT and manifests.kind(doc) == "PrometheusRule":
        yield from _prometheus_rule(doc)


def _service_monitor(doc: source.Document) -> Iterator[findings.Finding]:
    data = manifests.as_map(doc.data)
    spec = manifests.as_map(data.get("spec"))
    picks = _selects_dcgm(spec)
    if picks is None:
        return
    sel = manifests.as_map(manifests.as_map(spec.get("selector")).get("matchLabels"))
    if not picks:
        yield base.emit(doc, ("spec", "selector"), "service-monitor/selector-misses",
                        selector=", ".join(f"{k}={v}" for k, v in sel.items()),
                        labels=", ".join(f"{k}={v}" for k, v in DCGM_LABELS.items()))
    namespace = manifests.as_str(manifests.as_map(data.get("metadata")).get("namespace"))
    ns_sel = manifests.as_map(spec.get("namespaceSelector"))
    names = [str(n) for n in manifests.as_list(ns_sel.get("matchNames"))]
    if namespace != OPERATOR_NAMESPACE and ns_sel.get("any") is not True and OPERATOR_NAMESPACE not in names:
        yield base.emit(doc, ("spec", "namespaceSelector") if ns_sel else ("spec",), "service-monitor/namespace-misses",
                        namespace=namespace or "(the namespace it is applied to)", target=OPERATOR_NAMESPACE)
    for i, raw in enumerate(manifests.as_list(spec.get("endpoints"))):
        ep = manifests.as_map(raw)
        port = ep.get("port")
        if port is None and "targetPort" not in ep:
            yield base.emit(doc, ("spec", "endpoints", i), "service-monitor/no-port")
        elif port is not None and port != DCGM_PORT:
            yield base.emit(doc, ("spec", "endpoints", i, "port"), "service-monitor/wrong-port", port=str(port))
        path = ep.get("path")
        if path is not None and path != "/metrics":
            yield base.emit(doc, ("spec", "endpoints", i, "path"), "service-monitor/wrong-path", path=str(path))


def _prometheus_rule(doc: source.Document) -> Iterator[findings.Finding]:
    spec = manifests.as_map(manifests.as_map(doc.data).get("spec"))
    for g, group in enumerate(manifests.as_list(spec.get("groups"))):
        for r, raw in enumerate(manifests.as_list(manifests.as_map(group).get("rules"))):
            rule = manifests.as_map(raw)
            where: source.YPath = ("spec", "groups", g, "rules", r)
            name = str(rule.get("alert") or rule.get("record") or f"#{r + 1}")
            expr = rule.get("expr")
            if expr is None or (isinstance(expr, str) and not expr.strip()):
                yield base.emit(doc, where, "prometheus-rule/no-expr", rule=name)
                continue
            if "for" in rule and not _DURATION.match(str(rule["for"])):
                yield base.emit(doc, (*where, "for"), "prometheus-rule/bad-for", rule=name, value=str(rule["for"]))
            try:
                tree = promql.parse(str(expr))
            except promql.PromQLError as exc:
                yield base.emit(doc, (*where, "expr"), "prometheus-rule/unparsable", rule=name, error=exc.message)
                continue
            yield from _selectors(doc, (*where, "expr"), name, "alert" in rule, promql.selectors(tree))


def _selectors(doc: source.Document, where: source.YPath, name: str, alert: bool,
               sels: list[promql.Selector]) -> Iterator[findings.Finding]:
    for sel in sels:
        if sel.metric not in _NODE_METRICS:
            continue
        for m in sel.matchers:
            if m.label == "resource" and m.op == "=" and sanitise(m.value) != m.value:
                yield base.emit(doc, where, "prometheus-rule/resource-name", rule=name, value=m.value,
                                sanitised=sanitise(m.value))
    metrics = {s.metric for s in sels}
    if alert and "kube_node_status_capacity" in metrics and "kube_node_status_allocatable" not in metrics:
        yield base.emit(doc, where, "prometheus-rule/capacity-only", rule=name)
