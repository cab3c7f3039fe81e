"""Grading figures: offline static-check throughput over generated submissions, and one live check's latency.

Each generated submission is a folder of typical lab manifests (a GPU Deployment, a Job, a device-plugin
ConfigMap, a DRA claim template with CEL selectors, a ResourceQuota, a PriorityClass) with a different mix of
mistakes. Submissions are graded one at a time, as batch grading does (one CEL compiler process per submission
when ``celcheck`` is installed). The generator is seeded, so every run grades the same corpus.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from dataclasses import dataclass
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



@dataclass(frozen=True)
class Throughput:
    count: int
    seconds: float
    per_item: tuple[float, ...]
    findings: int
    compile_cel: bool

    @property
    def per_second(self) -> float:
        return self.count / self.seconds if self.seconds else 0.0

    @property
    def median_ms(self) -> float:
        return statistics.median(self.per_item) * 1000

    @property
    def p95_ms(self) -> float:
        ordered = sorted(self.per_item)
        return ordered[max(0, int(0.95 * len(ordered)) - 1)] * 1000


def write_corpus(root: Path, count: int, seed: int = 5) -> list[Path]:
    rng = random.Random(seed)
    folders = [root / f"s{i:03d}" for i in range(count)]
    for i, folder in enumerate(folders):
        write_submission(folder, i, rng)
    return folders


def lint_throughput(count: int = 200, *, compile_cel: bool | None = None) -> Throughput:
    """Lint ``count`` generated submissions one at a time (after one warm-up); time the whole batch."""
    use_cel = cel.find_binary() is not None if compile_cel is None else compile_cel
    fleet = context.FleetFacts.starter()
    with tempfile.TemporaryDirectory(prefix="gpulab-bench-lint-") as tmp:
        folders = write_corpus(Path(tmp), count)
        lint.lint_paths([folders[0]], fleet, compile_cel=use_cel)  # warm caches and imports
        per: list[float] = []
        total = 0
        started = time.perf_counter()
        for folder in folders:
            t = time.perf_counter()
            result = lint.lint_paths([folder], fleet, compile_cel=use_cel)
            per.append(time.perf_counter() - t)
            total += len(result.findings)
        wall = time.perf_counter() - started
    return Throughput(count, wall, tuple(per), total, use_cel)
