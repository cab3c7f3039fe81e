"""Live-check figures: how long one outcome check takes against the real API server, and against a bundle.

``prepare`` starts one Running GPU pod and one that cannot fit (the GPU Operator must be installed), so every
check below finds its outcome already there: a timing is the check's own reads and logic, never a wait.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cluster import errors
from cluster.kube.client import Client
from graders import explain, live
from graders.view import ClusterView, LiveView

NS = "bench-live"
TOLERATE = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
ONE_CHECK = "pod_phase [1 GET when live]"


@dataclass(frozen=True)
class Samples:
    label: str
    seconds: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def p95(self) -> float:
        ordered = sorted(self.seconds)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def _pod(name: str, gpus: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"tolerations": TOLERATE, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "cuda", "command": ["sleep", "infinity"],
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def prepare(client: Client) -> None:
    """A namespace with a Running one-GPU pod and a Pending 16-GPU pod, both settled."""
    with contextlib.suppress(errors.Conflict):
        client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    client.create(f"/api/v1/namespaces/{NS}/pods", _pod("runner", 1))
    client.create(f"/api/v1/namespaces/{NS}/pods", _pod("stuck", 16))
    view = LiveView(client)
    ready = [live.pod_phase(view, NS, "runner", wait=120),
             live.scheduling_failed(view, NS, "stuck", ["Insufficient nvidia.com/gpu"], wait=120)]
    if not all(c.passed for c in ready):
        raise errors.ClusterError("live-check benchmark set-up failed: " +
                                  "; ".join(c.message for c in ready if not c.passed))


def cleanup(client: Client) -> None:
    with contextlib.suppress(errors.NotFound):
        client.delete(f"/api/v1/namespaces/{NS}")


def checks(view: ClusterView) -> list[tuple[str, Callable[[], Any]]]:
    return [
        (ONE_CHECK, lambda: live.pod_phase(view, NS, "runner")),
        ("node_resource [1 GET when live]", lambda: live.node_resource(view, "a100-0", "nvidia.com/gpu", equals=4)),
        ("pod_node with pool [2 GETs when live]", lambda: live.pod_node(view, NS, "runner", pool="h100")),
        ("scheduling_failed [2 GETs when live]", lambda: live.scheduling_failed(view, NS, "stuck", ["Insufficient"])),
        ("explain_pod on the Pending pod", lambda: explain.explain_pod(view, NS, "stuck")),
    ]


def time_it(label: str, fn: Callable[[], Any], repeat: int) -> Samples:
    fn()  # warm the connection pool
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return Samples(label, tuple(out))


def one_live_check(client: Client, repeat: int) -> Samples:
    """The latency of one live check (``pod_phase``) on a prepared namespace."""
    label, fn = checks(LiveView(client))[0]
    return time_it(label, fn, repeat)
