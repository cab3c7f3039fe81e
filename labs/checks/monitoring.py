"""Checks on monitoring objects against the cluster: ``scrape`` and ``alert``.

``scrape`` follows the learner's ServiceMonitor the way the Prometheus Operator does (its namespaces, its label
selector, the endpoint's port *name* and path) to the dcgm-exporter Service the lab set up, then scrapes the
simulated exporter there and looks for a metric. ``alert`` evaluates the learner's alert expression
(``graders.promql``) over the series kube-state-metrics would export for the cluster's nodes right now
(``kube_node_status_capacity`` / ``kube_node_status_allocatable``, labels ``node``, ``resource``, ``unit``:
KSM ``internal/store/node.go`` and ``internal/store/utils.go``), and compares the nodes it fires for.

Both read the learner's file and the cluster; a scrape needs the live cluster (the grader's, when replayed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from cluster import quantity
from cluster.kube import http
from graders import ClusterView, promql
from graders.rules import service_monitor
from graders.manifests import as_list, as_map, as_str
from graders.view import dig
from labs import evidence
from labs.checks import common, live
from labs.spec import Outcome, Problems

EXPORTER_CONFIGMAP = ("gpu-operator", "gpulab-dcgm-exporter")
_UNITS = {"cpu": "core", "memory": "byte", "ephemeral-storage": "byte", "storage": "byte"}


def _objects(ev: evidence.Evidence, file: str, kind: str) -> list[dict[str, Any]]:
    parsed = ev.parsed(file)
    if parsed is None:
        return []
    return [d.data for d in parsed.documents if isinstance(d.data, dict) and d.data.get("kind") == kind]


def _named(ev: evidence.Evidence, file: str, kind: str, name: str) -> dict[str, Any] | None:
    return next((o for o in _objects(ev, file, kind) if dig(o, "metadata", "name") == name), None)


@dataclass(frozen=True)
class ScrapeRule:
    """The ServiceMonitor ``name`` in ``file`` selects the Service in ``service`` (a lab file) on a named port,
    and a scrape of the exporter behind it returns ``metric``."""

    file: str
    name: str
    service: dict[str, Any]
    metric: str
    cluster = True

    @classmethod
    def parse(cls, p: Problems, where: str, raw: dict[str, Any], ctx: Any) -> ScrapeRule:
        p.unknown(where, raw, ("file", "name", "service", "metric"))
        file = common.text(p, f"{where}.file", raw.get("file"))
        if file and file not in getattr(ctx, "files", (file,)):
            p.add(f"{where}.file", f"{file} is not one of the lab's files")
        svc_file = common.text(p, f"{where}.service", raw.get("service"))
        service: dict[str, Any] = {}
        directory = getattr(ctx, "directory", None)
        if svc_file and directory is not None:
            path = directory / svc_file
            docs = list(yaml.safe_load_all(path.read_text(encoding="utf-8"))) if path.is_file() else []
            service = next((d for d in docs if isinstance(d, dict) and d.get("kind") == "Service"), {})
            if not service:
                p.add(f"{where}.service", f"{svc_file} holds no Service")
        return cls(file, common.text(p, f"{where}.name", raw.get("name")), service,
                   common.text(p, f"{where}.metric", raw.get("metric")))

    def evaluate(self, ev: evidence.Evidence) -> Outcome:
        sm = _named(ev, self.file, "ServiceMonitor", self.name)
        if sm is None:
            return Outcome(False, f"{self.file} has no ServiceMonitor {self.name}")
        target, why = self.resolve(sm)
        if target is None:
            return Outcome(False, f"ServiceMonitor {self.name} finds no target: {why}")
        return live.guarded(lambda view: self._scrape(view, target), ev)  # noqa: SLF001 - one guard for views

    def resolve(self, sm: dict[str, Any]) -> tuple[tuple[int, str] | None, str]:
        """(target port, path) on the Service, as the Prometheus Operator would pick them, or why none."""
        svc_meta = as_map(self.service.get("metadata"))
        svc_ns, svc_labels = as_str(svc_meta.get("namespace")), as_map(svc_meta.get("labels"))
        spec = as_map(sm.get("spec"))
        ns_sel = as_map(spec.get("namespaceSelector"))
        namespaces = [str(n) for n in as_list(ns_sel.get("matchNames"))] or [as_str(dig(sm, "metadata", "namespace"))]
        if ns_sel.get("any") is not True and svc_ns not in namespaces:
            return None, f"it looks in {', '.join(namespaces)}, and the exporter's Service is in {svc_ns}"
        wanted = as_map(as_map(spec.get("selector")).get("matchLabels"))
        if not wanted or any(svc_labels.get(k) != v for k, v in wanted.items()):
            return None, (f"its selector {wanted or '{}'} does not match the Service's labels "
                          f"{dict(svc_labels)}")
        ports = {as_str(as_map(p).get("name")): as_map(p) for p in as_list(dig(self.service, "spec", "ports"))}
        for ep in (as_map(e) for e in as_list(spec.get("endpoints"))):
            port = ports.get(as_str(ep.get("port")))
            if port is not None:
                return (int(port.get("targetPort") or port.get("port") or 0), as_str(ep.get("path")) or "/metrics"), ""
        named = ", ".join(repr(as_str(as_map(e).get("port"))) for e in as_list(spec.get("endpoints"))) or "none"
        return None, f"its endpoints name port {named}; the Service's ports are {', '.join(ports) or 'none'}"

    def _scrape(self, view: ClusterView, target: tuple[int, str]) -> Outcome:
        port, path = target
        where = f"{as_str(dig(self.service, 'metadata', 'namespace'))}/{as_str(dig(self.service, 'metadata', 'name'))}"
        if not view.live:
            return Outcome(False, "scraping needs the live cluster; grade with replay or check in the lab")
        cm = next((c for c in view.configmaps(EXPORTER_CONFIGMAP[0])
                   if dig(c, "metadata", "name") == EXPORTER_CONFIGMAP[1]), None)
        url = as_str(as_map(cm.get("data")).get("url")) if cm else ""
        if not url:
            return Outcome(False, "the DCGM exporter publishes no endpoint: is the GPU Operator installed?")
        # The simulated exporter pods share one endpoint on this machine; the Service's targetPort stands for it.
        try:
            text = http.get_text(http.at_path(url, path), timeout=10)
        except http.HttpError as exc:
            return Outcome(False, f"scraping {where} on targetPort {port}{path} failed: {exc}")
        series = [s for fam in text_string_to_metric_families(text) for s in fam.samples if s.name == self.metric]
        if not series:
            return Outcome(False, f"{where}:{port}{path} answered, but with no {self.metric} series")
        gpus = sorted({f"{s.labels.get('Hostname', '?')}/{s.labels.get('gpu', '?')}" for s in series})
        return Outcome(True, f"scraped {where} on targetPort {port}{path}: {len(series)} {self.metric} series "
                             f"({len(gpus)} GPUs, e.g. {gpus[0]})")


def node_series(nodes: list[dict[str, Any]]) -> list[tuple[dict[str, str], float]]:
    """What kube-state-metrics exports for nodes' capacity and allocatable: one series per resource, the
    resource name sanitised into a label value, extended resources in unit ``integer``."""
    out: list[tuple[dict[str, str], float]] = []
    for node in nodes:
        name = as_str(dig(node, "metadata", "name"))
        for field, metric in (("capacity", "kube_node_status_capacity"), ("allocatable", "kube_node_status_allocatable")):
            for res, raw in as_map(dig(node, "status", field)).items():
                try:
                    value = float(quantity.parse(raw).value)
                except (ValueError, TypeError):
                    continue
                unit = "byte" if str(res).startswith("hugepages-") else _UNITS.get(str(res), "integer")
                out.append(({"__name__": metric, "node": name, "resource": service_monitor.sanitise(str(res)),
                             "unit": unit}, value))
    return out


@dataclass(frozen=True)
class AlertRule:
    """Alert ``alert`` of a PrometheusRule in ``file``, evaluated now over the nodes' kube-state-metrics series,
    fires for exactly the nodes in ``firesFor``."""

    file: str
    alert: str
    fires_for: tuple[str, ...]
    cluster = True

    @classmethod
    def parse(cls, p: Problems, where: str, raw: dict[str, Any], ctx: Any) -> AlertRule:
        p.unknown(where, raw, ("file", "alert", "firesFor"))
        file = common.text(p, f"{where}.file", raw.get("file"))
        if file and file not in getattr(ctx, "files", (file,)):
            p.add(f"{where}.file", f"{file} is not one of the lab's files")
        fires = raw.get("firesFor", [])
        if not isinstance(fires, list) or not all(isinstance(n, str) for n in fires):
            p.add(f"{where}.firesFor", "must be a list of node names (empty: fires for none)")
            fires = []
        return cls(file, common.text(p, f"{where}.alert", raw.get("alert")), tuple(fires))

    def evaluate(self, ev: evidence.Evidence) -> Outcome:
        rules = [as_map(r) for o in _objects(ev, self.file, "PrometheusRule")
                 for g in as_list(dig(o, "spec", "groups")) for r in as_list(as_map(g).get("rules"))]
        rule = next((r for r in rules if r.get("alert") == self.alert), None)
        if rule is None:
            return Outcome(False, f"{self.file} has no alert named {self.alert}")
        try:
            tree = promql.parse(str(rule.get("expr") or ""))
        except promql.PromQLError as exc:
            return Outcome(False, f"alert {self.alert}: {exc.message}")
        return live.guarded(lambda view: self._fires(view, tree), ev)  # noqa: SLF001 - one guard for views

    def _fires(self, view: ClusterView, tree: promql.Expr) -> Outcome:
        try:
            result = promql.evaluate(tree, node_series(view.nodes()))
        except promql.PromQLError as exc:
            return Outcome(False, f"alert {self.alert} cannot be evaluated: {exc.message}")
        if isinstance(result, float):
            return Outcome(False, f"alert {self.alert}'s expression is a number, not a vector of series")
        fired = sorted({dict(labels).get("node", "?") for labels in result})
        said = ", ".join(fired) or "no node"
        wanted = ", ".join(self.fires_for) or "no node"
        if tuple(fired) == tuple(sorted(self.fires_for)):
            return Outcome(True, f"alert {self.alert} fires for {said}, as the nodes' allocatable and capacity say")
        return Outcome(False, f"alert {self.alert} fires for {said} on this cluster; expected {wanted}")
