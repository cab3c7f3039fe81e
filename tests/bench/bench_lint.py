"""Benchmark: static lint throughput on 200 generated submissions (a script, not a test).

Each submission is a folder of typical lab manifests (a GPU Deployment, a Job, a device-plugin ConfigMap,
a DRA claim template with CEL selectors, a ResourceQuota, a PriorityClass), with a different mix of
mistakes per submission. Every submission is linted on its own, as batch grading does (one CEL compiler
process per submission when celcheck is installed).

    .venv/bin/python tests/bench/bench_lint.py [--count 200] [--no-cel]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from cluster.gpu import cel
from graders import context, lint

_DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: infer-{i}}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: infer-{i}}}}}
  template:
    metadata: {{labels: {{app: infer-{i}}}}}
    spec:
      priorityClassName: {priority}
      nodeSelector: {{nvidia.com/gpu.product: {product}}}
      tolerations: [{{key: nvidia.com/gpu, operator: {operator}, effect: NoSchedule}}]
      containers:
      - name: server
        image: nvcr.io/nvidia/tritonserver:24.05-py3
        resources:
          limits: {{nvidia.com/gpu: {gpus}, memory: 8Gi}}
          requests: {{nvidia.com/gpu: {requests}, cpu: "2"}}
---
apiVersion: batch/v1
kind: Job
metadata: {{name: train-{i}}}
spec:
  template:
    spec:
      restartPolicy: Never
      tolerations: [{{key: nvidia.com/gpu, operator: Exists}}]
      containers:
      - name: trainer
        image: pytorch/pytorch
        resources:
          limits: {{{resource}: 1}}
"""

_CONFIG = """apiVersion: v1
kind: ConfigMap
metadata: {{name: plugin-config-{i}, namespace: gpu-operator}}
data:
  any: |-
    version: v1
    sharing:
      {block}:
        failRequestsGreaterThanOne: true
        resources:
        - name: nvidia.com/gpu
          replicas: {replicas}
"""

_DRA = """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{name: gpu-{i}}}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel:
              expression: "{expression}"
"""

_POLICY = """apiVersion: v1
kind: ResourceQuota
metadata: {{name: gpu-quota-{i}}}
spec:
  hard: {{{quota_key}: "4"}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: training}}
value: {value}
preemptionPolicy: {policy}
"""

_EXPRESSIONS = (
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
    "device.attributes['gpu.nvidia.com'].index == 0",
    "device.attributes['gpu.nvidia.com'].cudaComputeCapability >= '8.0'",
    "device.attributes['gpu.nvidia.com'].productName = 'x'",
    "device.attributes['gpu.nvidia.com'].type == 'gpu'",
)


def write_submission(folder: Path, i: int, rng: random.Random) -> None:
    folder.mkdir(parents=True)
    (folder / "workloads.yaml").write_text(_DEPLOYMENT.format(
        i=i, priority=rng.choice(["training", "high"]), product=rng.choice(["Tesla-T4", "NVIDIA-L40S", "Tesla-V100"]),
        operator=rng.choice(["Exists", "Equal"]), gpus=rng.choice([1, 1, 2, 0.5]), requests=rng.choice([1, 2]),
        resource=rng.choice(["nvidia.com/gpu", "nvidia.com/gpus", "nvidia.com/mig-1g.10gb"])))
    (folder / "plugin-config.yaml").write_text(_CONFIG.format(
        i=i, block=rng.choice(["timeSlicing", "timeslicing", "time-slicing", "mps"]), replicas=rng.choice([1, 4, 10])))
    (folder / "claim.yaml").write_text(_DRA.format(i=i, expression=rng.choice(_EXPRESSIONS)))
    (folder / "policy.yaml").write_text(_POLICY.format(
        i=i, quota_key=rng.choice(["requests.nvidia.com/gpu", "limits.nvidia.com/gpu"]),
        value=rng.choice([1000, 2_000_000_000]), policy=rng.choice(["PreemptLowerPriority", "Never", "never"])))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--no-cel", action="store_true", help="skip the CEL compiler")
    args = parser.parse_args()
    rng = random.Random(5)
    fleet = context.FleetFacts.starter()
    compile_cel = not args.no_cel and cel.find_binary() is not None
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i in range(args.count):
            write_submission(root / f"s{i:03d}", i, rng)
        lint.lint_paths([root / "s000"], fleet, compile_cel=compile_cel)  # warm caches and imports
        per: list[float] = []
        total_findings = 0
        started = time.perf_counter()
        for i in range(args.count):
            t = time.perf_counter()
            result = lint.lint_paths([root / f"s{i:03d}"], fleet, compile_cel=compile_cel)
            per.append(time.perf_counter() - t)
            total_findings += len(result.findings)
        wall = time.perf_counter() - started
    print(f"machine: {os.cpu_count()} CPU(s), Python {sys.version.split()[0]}, "
          f"CEL compiler: {'celcheck (one process per submission)' if compile_cel else 'off'}")
    print(f"{args.count} submissions (4 files, 8 documents each) linted one at a time in {wall:.2f}s: "
          f"{args.count / wall:.1f} submissions/s")
    print(f"per submission: median {statistics.median(per) * 1000:.1f} ms, "
          f"p95 {sorted(per)[int(0.95 * len(per)) - 1] * 1000:.1f} ms, max {max(per) * 1000:.1f} ms; "
          f"{total_findings} findings in total")
    return 0


if __name__ == "__main__":
    sys.exit(main())
