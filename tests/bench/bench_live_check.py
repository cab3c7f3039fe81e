"""Benchmark: latency of one live outcome check on the real local control plane (a script, not a test).

Brings up the starter fleet in a temporary state dir (or uses ``--kubeconfig``), installs the simulated GPU
Operator, starts one Running GPU pod and one Pending one, then times each check many times on a ``LiveView``
(one check = the GETs it needs, no waiting because the outcome is already there), ``explain_pod`` on the
Pending pod, a bundle snapshot, and the same checks on the bundle offline.

    .venv/bin/python tests/bench/bench_live_check.py [--repeat 50] [--kubeconfig FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from cluster import errors, fleet as fleet_mod
from cluster.kube.client import Client
from cluster.sim.gpu import operator
from graders import bundle, explain, live
from graders.view import LiveView
from labs.bench import cluster_bench

NS = "bench-live"
TOLERATE = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def _pod(name: str, gpus: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"tolerations": TOLERATE, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "cuda", "command": ["sleep", "infinity"],
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


@contextlib.contextmanager
def _cluster(kubeconfig: str | None) -> Iterator[Client]:
    if kubeconfig:
        with Client.from_kubeconfig(Path(kubeconfig)) as client:
            yield client
        return
    with tempfile.TemporaryDirectory(prefix="gpulab-bench-") as tmp:
        with cluster_bench.running(Path(tmp), fleet_mod.load("starter"), "bench") as bc:
            print(f"cluster up in {bc.up_seconds:.1f} s", flush=True)
            with Client.from_kubeconfig(bc.backend.kubeconfig()) as client:
                yield client


def _prepare(client: Client) -> None:
    took = time.monotonic()
    operator.install(client, wait=True, timeout=180)
    print(f"GPU Operator ready in {time.monotonic() - took:.1f} s", flush=True)
    with contextlib.suppress(errors.Conflict):
        client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    client.create(f"/api/v1/namespaces/{NS}/pods", _pod("runner", 1))
    client.create(f"/api/v1/namespaces/{NS}/pods", _pod("stuck", 16))
    view = LiveView(client)
    ready = [live.pod_phase(view, NS, "runner", wait=120),
             live.scheduling_failed(view, NS, "stuck", ["Insufficient nvidia.com/gpu"], wait=120)]
    if not all(c.passed for c in ready):
        raise SystemExit("setup failed: " + "; ".join(c.message for c in ready if not c.passed))


def _time(label: str, fn: Callable[[], Any], repeat: int) -> float:
    fn()  # warm the connection pool
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    samples.sort()
    median, p95 = statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.95))]
    print(f"  {label:<44} median {median * 1000:7.2f} ms   p95 {p95 * 1000:7.2f} ms   ({repeat} runs)", flush=True)
    return median


def _checks(view: Any) -> list[tuple[str, Callable[[], Any]]]:
    return [
        ("pod_phase [1 GET when live]", lambda: live.pod_phase(view, NS, "runner")),
        ("node_resource [1 GET when live]", lambda: live.node_resource(view, "a100-0", "nvidia.com/gpu", equals=4)),
        ("pod_node with pool [2 GETs when live]", lambda: live.pod_node(view, NS, "runner", pool="h100")),
        ("scheduling_failed [2 GETs when live]", lambda: live.scheduling_failed(view, NS, "stuck", ["Insufficient"])),
        ("explain_pod on the Pending pod", lambda: explain.explain_pod(view, NS, "stuck")),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--kubeconfig", default=None, help="use this cluster instead of bringing one up")
    args = parser.parse_args()
    with _cluster(args.kubeconfig) as client:
        _prepare(client)
        try:
            print("live view (real API server over HTTPS):", flush=True)
            medians = {label: _time(label, fn, args.repeat) for label, fn in _checks(LiveView(client))}
            t0 = time.perf_counter()
            data = bundle.snapshot(client, [NS], {}, "bench")
            payload = bundle.dumps(data)
            print(f"  bundle snapshot + dumps: {(time.perf_counter() - t0) * 1000:.0f} ms, {len(payload) / 1024:.0f} KiB",
                  flush=True)
            print("bundle view (offline):", flush=True)
            offline = bundle.loads(payload).view()
            for label, fn in _checks(offline):
                _time(label, fn, args.repeat)
        finally:
            with contextlib.suppress(errors.NotFound):
                client.delete(f"/api/v1/namespaces/{NS}")
    print(f"one live check (pod_phase): {medians['pod_phase [1 GET when live]'] * 1000:.2f} ms median", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
