"""The PromQL reader and the monitoring checks: an alert expression is evaluated over the series
kube-state-metrics would export for the nodes, and a ServiceMonitor is resolved as the Prometheus Operator would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from graders import promql
from labs.checks import monitoring


def make_node(name: str, capacity: int, allocatable: int) -> dict[str, Any]:
    res = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    return {"metadata": {"name": name},
            "status": {"capacity": {**res, "nvidia.com/gpu": str(capacity)} if capacity else res,
                       "allocatable": {**res, "nvidia.com/gpu": str(allocatable)} if capacity else res}}


NODES = [make_node("cpu-0", 0, 0), make_node("a100-0", 4, 3), make_node("h100-0", 8, 8)]
GOOD = 'kube_node_status_allocatable{resource="nvidia_com_gpu"} < kube_node_status_capacity{resource="nvidia_com_gpu"}'


def fired(expr: str) -> list[str]:
    result = promql.evaluate(promql.parse(expr), monitoring.node_series(NODES))
    assert not isinstance(result, float)
    return sorted(dict(k).get("node", "?") for k in result)


def test_kube_state_metrics_series_sanitise_the_resource_name_and_count_extended_resources_as_integers() -> None:
    series = {(s["__name__"], s["node"], s["resource"]): (s["unit"], v) for s, v in monitoring.node_series(NODES)}
    assert series[("kube_node_status_allocatable", "a100-0", "nvidia_com_gpu")] == ("integer", 3.0)
    assert series[("kube_node_status_capacity", "a100-0", "memory")] == ("byte", 64 * 2**30)
    assert ("kube_node_status_capacity", "cpu-0", "nvidia_com_gpu") not in series


@pytest.mark.parametrize(("expr", "nodes"), [
    (GOOD, ["a100-0"]),
    ('kube_node_status_capacity{resource="nvidia_com_gpu"} - kube_node_status_allocatable{resource="nvidia_com_gpu"} > 0',
     ["a100-0"]),
    ('sum by (node) (kube_node_status_capacity{resource="nvidia_com_gpu"}) > '
     'sum by (node) (kube_node_status_allocatable{resource="nvidia_com_gpu"})', ["a100-0"]),
    ('kube_node_status_allocatable{resource="nvidia.com/gpu"} < kube_node_status_capacity{resource="nvidia.com/gpu"}', []),
    ('kube_node_status_allocatable{resource="nvidia_com_gpu"} <= kube_node_status_capacity{resource="nvidia_com_gpu"}',
     ["a100-0", "h100-0"]),
    ('kube_node_status_allocatable{resource="nvidia_com_gpu"} < on(node) kube_node_status_capacity{resource="nvidia_com_gpu"}',
     ["a100-0"]),
    ('kube_node_status_capacity{resource=~"nvidia_com_gpu|cpu"} > 10', ["cpu-0", "a100-0", "h100-0"]),
])
def test_alert_expressions_fire_for_the_nodes_their_semantics_say(expr: str, nodes: list[str]) -> None:
    assert fired(expr) == sorted(nodes)


def test_comparing_two_vectors_with_different_resources_matches_nothing() -> None:
    assert fired('kube_node_status_allocatable{resource="nvidia_com_gpu"} < kube_node_status_capacity{resource="cpu"}') == []


@pytest.mark.parametrize(("expr", "says"), [
    ("(kube_node_status_capacity", "ends early"),
    ('kube_node_status_capacity{resource=nvidia_com_gpu}', "quoted string"),
    ("rate(DCGM_FI_DEV_GPU_UTIL[5m])", "function rate()"),
    ("DCGM_FI_DEV_GPU_UTIL[5m]", "range selector"),
    ("a < on(node) group_left b", "group_left"),
    ("a $ b", "unexpected character"),
    ("", "empty"),
])
def test_what_the_reader_cannot_read_or_evaluate_is_said_not_guessed(expr: str, says: str) -> None:
    with pytest.raises(promql.PromQLError, match=says):
        promql.parse(expr)


def test_many_to_many_matching_is_an_error_not_a_guess() -> None:
    tree = promql.parse('kube_node_status_capacity < ignoring(resource, unit) kube_node_status_allocatable')
    with pytest.raises(promql.PromQLError, match="many-to-many"):
        promql.evaluate(tree, monitoring.node_series(NODES))


SERVICE = yaml.safe_load((Path(__file__).resolve().parents[2] / "labs" / "06b-dcgm-monitoring" / "setup" /
                          "dcgm-exporter-service.yaml").read_text())


def rule(**sm_spec: Any) -> tuple[tuple[int, str] | None, str]:
    sm = {"metadata": {"name": "m", "namespace": "lab-06b"}, "spec": sm_spec}
    return monitoring.ScrapeRule("f", "m", SERVICE, "DCGM_FI_DEV_GPU_UTIL").resolve(sm)


def test_a_service_monitor_resolves_to_the_services_target_port_by_port_name() -> None:
    ok = {"namespaceSelector": {"matchNames": ["gpu-operator"]},
          "selector": {"matchLabels": {"app": "nvidia-dcgm-exporter"}}, "endpoints": [{"port": "gpu-metrics"}]}
    assert rule(**ok) == ((9400, "/metrics"), "")
    assert "looks in lab-06b" in rule(**{**ok, "namespaceSelector": {}})[1]
    assert "does not match" in rule(**{**ok, "selector": {"matchLabels": {"app": "dcgm-exporter"}}})[1]
    assert "'metrics'" in rule(**{**ok, "endpoints": [{"port": "metrics"}]})[1]
    assert rule(**{**ok, "namespaceSelector": {"any": True}})[0] == (9400, "/metrics")


def test_a_label_regex_runs_under_re2_in_linear_time() -> None:
    """A catastrophic pattern for a backtracking engine ((a+)+$ against a long run of a's and a stop) is answered
    at once: RE2, as Prometheus (Go's regexp) runs it, not Python's re."""
    import time

    labels = {"node": "a" * 5000 + "!"}
    matcher = promql.Matcher("node", "=~", "(a+)+")
    started = time.monotonic()
    assert matcher.test(labels) is False
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize(("pattern", "value", "matches"), [
    ("h100-.*", "h100-0", True),
    ("h100", "h100-0", False),  # anchored at both ends, as Prometheus anchors it
    ("a.b", "a\nb", True),  # `.` matches a newline ((?s:...), as in Prometheus)
    ("x|h100-0", "h100-0", True),
])
def test_a_label_regex_is_anchored_like_prometheus(pattern: str, value: str, matches: bool) -> None:
    assert promql.Matcher("node", "=~", pattern).test({"node": value}) is matches
    assert promql.Matcher("node", "!~", pattern).test({"node": value}) is not matches


@pytest.mark.parametrize(("pattern", "says"), [
    ("a)|(b", "not a valid regular expression"),  # must not escape the anchoring group
    ("(?<=a)b", "not a valid regular expression"),  # look-behind: Python's re has it, RE2 does not
    ("x" * 2000, "longer than gpulab reads"),
])
def test_a_bad_label_regex_is_refused_at_parse_time(pattern: str, says: str) -> None:
    with pytest.raises(promql.PromQLError, match=says):
        promql.parse(f'kube_node_info{{node=~"{pattern}"}}')
