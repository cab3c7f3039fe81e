"""Benchmark: latency of one live outcome check on the real local control plane (a script, not a test).

Brings up the starter fleet in a temporary state dir (or uses ``--kubeconfig``), installs the simulated GPU
Operator, starts one Running GPU pod and one Pending one, then times each check many times on a ``LiveView``
(one check = the GETs it needs, no waiting because the outcome is already there), ``explain_pod`` on the
Pending pod, a bundle snapshot, and the same checks on the bundle offline. The measuring code is
``labs.bench.live_bench`` (``gpulab bench`` reports the same "one live check" figure).

    .venv/bin/python tests/bench/bench_live_check.py [--repeat 50] [--kubeconfig FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from cluster import fleet as fleet_mod
from cluster.kube.client import Client
from graders import bundle
from graders.view import LiveView
from labs.bench import cluster_bench, gpu_bench, live_bench


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


def _show(s: live_bench.Samples) -> float:
    print(f"  {s.label:<44} median {s.median * 1000:7.2f} ms   p95 {s.p95 * 1000:7.2f} ms   "
          f"({len(s.seconds)} runs)", flush=True)
    return s.median


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--kubeconfig", default=None, help="use this cluster instead of bringing one up")
    args = parser.parse_args()
    with _cluster(args.kubeconfig) as client:
        print(f"GPU Operator ready in {gpu_bench.install_operator(client, timeout=180):.1f} s", flush=True)
        live_bench.prepare(client)
        try:
            print("live view (real API server over HTTPS):", flush=True)
            medians = {label: _show(live_bench.time_it(label, fn, args.repeat))
                       for label, fn in live_bench.checks(LiveView(client))}
            t0 = time.perf_counter()
            data = bundle.snapshot(client, [live_bench.NS], {}, "bench")
            payload = bundle.dumps(data)
            print(f"  bundle snapshot + dumps: {(time.perf_counter() - t0) * 1000:.0f} ms, {len(payload) / 1024:.0f} KiB",
                  flush=True)
            print("bundle view (offline):", flush=True)
            offline = bundle.loads(payload).view()
            for label, fn in live_bench.checks(offline):
                _show(live_bench.time_it(label, fn, args.repeat))
        finally:
            live_bench.cleanup(client)
    print(f"one live check (pod_phase): {medians[live_bench.ONE_CHECK] * 1000:.2f} ms median", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
