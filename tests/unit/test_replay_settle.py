"""After a replay, failing cluster checks are read again while the outcome may still be coming, and no longer once
nothing changes: a wrong submission used to wait out the whole 10 s (8.4 s per submission in `gpulab bench
--section replay`, against a 600 s target for 200)."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from graders import Check, Report
from labs import grading, replay

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _run(monkeypatch: pytest.MonkeyPatch, results: list[bool], prints: list[str],
         mig: bool = False) -> tuple[Report, int, float]:
    """``_settled`` where the check's n-th read gives ``results[n]`` and the cluster's n-th look ``prints[n]``
    (the last entry repeats)."""
    clock = Clock()
    monkeypatch.setattr(time, "monotonic", clock.monotonic)
    monkeypatch.setattr(time, "sleep", clock.sleep)
    reads = [0]

    def run_checks(spec: Any, ev: Any) -> Report:
        passed = results[min(reads[0], len(results) - 1)]
        reads[0] += 1
        return Report("lab", 1.0 if passed else 0.0, 1.0, (Check("c", passed, 1.0, f"passed={passed}"),))

    looks = [0]

    def fingerprint(client: Any, spec: Any) -> str:
        looks[0] += 1
        return prints[min(looks[0] - 1, len(prints) - 1)]

    monkeypatch.setattr(grading, "run_checks", run_checks)
    monkeypatch.setattr(grading, "LiveView", lambda client: None)
    monkeypatch.setattr(replay, "outcome_fingerprint", fingerprint)
    monkeypatch.setattr(replay, "still_changing", lambda client: mig)
    spec = SimpleNamespace(checks=[SimpleNamespace(id="c", cluster=True)])
    report = grading._settled(spec, SimpleNamespace(view=None), object(), 10.0)  # type: ignore[arg-type]
    return report, reads[0], clock.now


def test_a_failing_check_on_a_quiet_cluster_is_not_read_for_the_whole_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    report, reads, spent = _run(monkeypatch, [False], ["same"])
    assert not report.passed
    assert grading.SETTLE_QUIET_S == 1.0 and spent == pytest.approx(1.0) and reads == 3


def test_a_cluster_still_changing_is_read_until_the_check_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    report, reads, spent = _run(monkeypatch, [False] * 12 + [True], [str(i) for i in range(100)])
    assert report.passed and reads == 13 and spent == pytest.approx(6.0)


def test_a_change_restarts_the_quiet_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # quiet for 0.5 s, then a change (an operand's pod going), then quiet again
    report, reads, spent = _run(monkeypatch, [False], ["a", "a", "b"])
    assert not report.passed and spent == pytest.approx(2.0)


def test_a_change_under_way_keeps_the_reads_going_until_the_wait_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    report, reads, spent = _run(monkeypatch, [False], ["same"], mig=True)
    assert not report.passed and spent == pytest.approx(10.0)


def test_passing_checks_are_not_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    report, reads, spent = _run(monkeypatch, [True], ["same"])
    assert report.passed and reads == 1 and spent == 0.0


class Cluster:
    """Nodes and the operator's namespace and pods, as ``still_changing`` reads them."""

    def __init__(self, mig_state: str = "success", namespace: dict[str, Any] | None = None,
                 pods: tuple[dict[str, Any], ...] = ()) -> None:
        self.mig_state, self.namespace, self.pods = mig_state, namespace, pods

    def get(self, path: str, **_: Any) -> dict[str, Any]:
        from cluster import errors
        from cluster.gpustack import names

        if path == "/api/v1/nodes":
            return {"items": [{"metadata": {"labels": {names.MIG_CONFIG_STATE: self.mig_state}}}]}
        if path == f"/api/v1/namespaces/{names.NAMESPACE}":
            if self.namespace is None:
                raise errors.NotFound(404, "NotFound", "no namespace")
            return self.namespace
        assert path == f"/api/v1/namespaces/{names.NAMESPACE}/pods", path
        return {"items": list(self.pods)}


@pytest.mark.parametrize(("cluster", "changing"), [
    (Cluster(), False),
    (Cluster(namespace={"metadata": {}}, pods=({"metadata": {"name": "nvidia-device-plugin-x"}},)), False),
    (Cluster(mig_state="pending"), True),
    (Cluster(namespace={"metadata": {"deletionTimestamp": "2026-11-27T08:00:00Z"}}), True),
    (Cluster(namespace={"metadata": {}},
             pods=({"metadata": {"name": "gfd-x", "deletionTimestamp": "2026-11-27T08:00:00Z"}},)), True),
], ids=["nothing", "operator-running", "mig-pending", "namespace-terminating", "operand-pod-going"])
def test_what_counts_as_a_change_under_way(cluster: Cluster, changing: bool) -> None:
    assert replay.still_changing(cluster) is changing  # type: ignore[arg-type]
