"""Grading figures: offline batch grading of a class's submissions, and static lint throughput.

Batch grading (the nbgrader path): ``write_class`` builds submission folders the way a class hands them in,
in a fixed rotation: the solution with the solved evidence bundle, the untouched starter with the untouched
bundle, each typical wrong submission laid over the solution with the solved bundle, and one in fifty with a
damaged bundle (graded as broken, never fatal); ``batch_rate`` times ``labs.grade_batch`` over them after one
warm-up pass. No cluster is involved.

Replay grading (``replay_batch``): the same rotation for lab 04a, graded by ``gpulab grade --batch``'s path:
the grader's own cluster is started, every submission is replayed on it in a limited child process, and the
CSV is written row by row; the figure is the wall time of the whole batch, the cluster's start included.
The solved evidence is the lab's solution files with the actions of its solve steps (what ``lab.submit``
records after ``lab.solve``); the untouched one is the starter files with no actions.

A class with hostile submissions (``hostile_class``): 30 submissions of lab 06b, three of them hostile (objects
and a pod template with finalizers nothing removes, a Deployment of 1,500 replicas, an alert rule whose label
regex backtracks under a backtracking engine), graded in one batch on one grader's cluster; each honest
learner's checks must equal those of the same submission graded in a batch of the honest ones alone.

Lint throughput: each generated submission is a folder of typical lab manifests (a GPU Deployment, a Job, a
device-plugin ConfigMap, a DRA claim template with CEL selectors, a ResourceQuota, a PriorityClass) with a
different mix of mistakes, linted one at a time (one CEL compiler process per submission when ``celcheck`` is
installed). The generator is seeded, so every run grades the same corpus.
"""

from __future__ import annotations

import json
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cluster.gpu import cel
from graders import bundle as bundle_mod, context, lint
from labs import catalog, grading, replay
from labs.grader_cluster import GraderCluster

DAMAGED_BUNDLE = '{"kind": "gpulab.dev/EvidenceBundle", "bundleVersion": 1, "cut'

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


# -- batch grading ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchTiming:
    lab: str
    submissions: int
    seconds: float
    full_marks: int
    broken: int

    @property
    def per_second(self) -> float:
        return self.submissions / self.seconds if self.seconds else 0.0


def write_class(lab_id: str, folder: Path, count: int, solved: Path, unsolved: Path,
                wrongs: Sequence[Path] = ()) -> None:
    """``count`` submission folders in a fixed rotation of kinds (see the module docstring).

    ``wrongs`` are folders of files that replace the solution's (an ``expected.yaml`` in them is skipped).
    """
    spec = catalog.get(lab_id)
    kinds: list[Path | str] = ["solution", "starter", *wrongs]
    for i in range(count):
        sub = folder / f"learner-{i:04d}"
        kind = kinds[i % len(kinds)]
        shutil.copytree(spec.directory / ("starter" if kind == "starter" else "solution"), sub)
        if isinstance(kind, Path):
            for f in kind.iterdir():
                if f.name != "expected.yaml":
                    shutil.copyfile(f, sub / f.name)
        if i % 50 == 49:
            (sub / grading.BUNDLE_FILE).write_text(DAMAGED_BUNDLE)
        else:
            shutil.copyfile(unsolved if kind == "starter" else solved, sub / grading.BUNDLE_FILE)


def batch_rate(lab_id: str, folder: Path, *, compile_cel: bool = True) -> BatchTiming:
    """Time ``labs.grade_batch`` over ``folder`` (after one untimed pass that warms imports and caches)."""
    scratch = Path(tempfile.mkdtemp(prefix="gpulab-bench-csv-"))
    try:
        grading.grade_batch(lab_id, folder, scratch / "warm.csv", compile_cel=compile_cel)
        started = time.perf_counter()
        result = grading.grade_batch(lab_id, folder, scratch / "grades.csv", compile_cel=compile_cel)
        elapsed = time.perf_counter() - started
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    full = sum(1 for r in result.rows if r.report is not None and r.report.passed)
    return BatchTiming(lab_id, len(result.rows), elapsed, full, result.broken)


# -- replay grading ----------------------------------------------------------------------------------------

REPLAY_LAB = "04a-time-slicing"
REPLAY_TARGET_S = 600.0


@dataclass(frozen=True)
class ReplayTiming:
    lab: str
    submissions: int
    seconds: float  # the whole batch, the grader's cluster start included
    start_seconds: float
    full_marks: int
    broken: int


def replay_bundles(lab_id: str, folder: Path) -> tuple[Path, Path]:
    """(solved, untouched) evidence bundles as ``lab.submit`` writes them, with no recorded cluster state."""
    spec = catalog.get(lab_id)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, source, actions in (("solved", "solution", replay.solve_actions(spec)), ("untouched", "starter", [])):
        cluster: dict[str, object] = {k: [] for k in bundle_mod.LIST_KEYS}
        cluster["clusterPolicy"] = None
        data = {"kind": bundle_mod.KIND, "bundleVersion": bundle_mod.BUNDLE_VERSION, "lab": lab_id,
                "scope": {"namespaces": list(spec.scope.namespaces)}, "actions": actions, "cluster": cluster,
                "manifests": {n: (spec.directory / source / n).read_text(encoding="utf-8") for n in spec.files}}
        out.append(bundle_mod.write(folder / f"{name}.json", data))
    return out[0], out[1]


def replay_batch(root: Path, count: int, wrongs: Sequence[Path] = (), lab_id: str = REPLAY_LAB) -> ReplayTiming:
    """Start the grader's cluster in ``root`` and replay-grade a class of ``count`` submissions of ``lab_id``."""
    solved, untouched = replay_bundles(lab_id, root / "bundles")
    folder = root / "class"
    folder.mkdir(parents=True)
    write_class(lab_id, folder, count, solved, untouched, wrongs)
    started = time.perf_counter()
    with GraderCluster(catalog.get(lab_id).fleet, root=root / "state") as gc:
        up = time.perf_counter() - started
        result = grading.grade_batch(lab_id, folder, root / "grades.csv", replay=gc.client)
        elapsed = time.perf_counter() - started
    full = sum(1 for r in result.rows if r.report is not None and r.report.passed)
    return ReplayTiming(lab_id, len(result.rows), elapsed, up, full, result.broken)


# -- a class with hostile submissions --------------------------------------------------------------------------

HOSTILE_LAB = "06b-dcgm-monitoring"
HOLD = "gpulab.dev/bench-hold"  # a finalizer nothing in the cluster removes
SLOW_REGEX = "(a|aa)+(a|aa)+(a|aa)+$"


def hostile_bundles(lab_id: str, solved: Path, folder: Path) -> dict[str, Path]:
    """The solved bundle made hostile three ways (finalizers, a pod flood, a backtracking regex), by name."""
    spec = catalog.get(lab_id)
    base = json.loads(solved.read_text(encoding="utf-8"))
    target = spec.files[-1]
    ns = spec.scope.namespaces[0]
    held = (f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: held, namespace: {ns}, finalizers: [{HOLD}]}}\n"
            f"---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: held, namespace: {ns}, "
            f"finalizers: [{HOLD}]}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: held}}}}\n"
            f"  template:\n    metadata: {{labels: {{app: held}}, finalizers: [{HOLD}]}}\n"
            "    spec: {containers: [{name: c, image: busybox}]}\n")
    flood = (f"---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: flood, namespace: {ns}}}\nspec:\n"
             "  replicas: 1500\n  selector: {matchLabels: {app: flood}}\n  template:\n"
             "    metadata: {labels: {app: flood}}\n    spec: {containers: [{name: c, image: busybox}]}\n")
    out = {}
    for name, extra in (("finalizers", held), ("pod-flood", flood)):
        data = json.loads(json.dumps(base))
        data["manifests"][target] = data["manifests"][target] + extra
        out[name] = bundle_mod.write(folder / f"{name}.json", data)
    data = json.loads(json.dumps(base))
    text = data["manifests"][target]
    if 'resource="nvidia_com_gpu"' in text:  # lab 06b's alert: the learner's own label matcher
        data["manifests"][target] = text.replace('resource="nvidia_com_gpu"', f'resource=~"{SLOW_REGEX}"', 1)
        out["slow-regex"] = bundle_mod.write(folder / "slow-regex.json", data)
    return out


@dataclass(frozen=True)
class HostileTiming:
    lab: str
    submissions: int
    hostile: tuple[str, ...]
    seconds: float  # the mixed batch, the grader's cluster start included
    start_seconds: float
    honest: int
    same_as_alone: int
    differ: tuple[str, ...]  # honest learners whose checks differ from their grade alone


def _checks(result: grading.BatchResult) -> dict[str, tuple[tuple[str, bool], ...] | str]:
    return {r.submission: tuple((c.id, c.passed) for c in r.report.checks) if r.report else f"not graded: {r.error}"
            for r in result.rows}


def hostile_class(root: Path, count: int = 30, lab_id: str = HOSTILE_LAB) -> HostileTiming:
    """``count`` submissions of ``lab_id``, three of them hostile (spread through the class), graded in one batch;
    the honest ones also in a batch of their own, on a grader's cluster started afresh for each."""
    solved, untouched = replay_bundles(lab_id, root / "bundles")
    hostile = hostile_bundles(lab_id, solved, root / "bundles")
    honest_dir, mixed_dir = root / "honest", root / "mixed"
    honest_dir.mkdir(parents=True)
    write_class(lab_id, honest_dir, count - len(hostile), solved, untouched, wrong_submissions(lab_id))
    for i, entry in enumerate(sorted(honest_dir.iterdir())):
        if i % 50 == 49:  # write_class's damaged bundle: not what this figure is about
            shutil.copyfile(solved, entry / grading.BUNDLE_FILE)
    shutil.copytree(honest_dir, mixed_dir)
    step = max(1, (count - len(hostile)) // max(1, len(hostile)))
    for i, (name, bundle) in enumerate(hostile.items()):
        # named to sort just before an honest learner: each hostile replay is followed by an honest one
        sub = mixed_dir / f"learner-{i * step + step // 2:04d}-{name}"
        sub.mkdir()
        shutil.copyfile(bundle, sub / grading.BUNDLE_FILE)
        for file, text in json.loads(bundle.read_text(encoding="utf-8"))["manifests"].items():
            (sub / file).write_text(text, encoding="utf-8")  # a folder's files win over the bundle's copies
    with GraderCluster(catalog.get(lab_id).fleet, root=root / "alone") as gc:
        alone = _checks(grading.grade_batch(lab_id, honest_dir, root / "alone.csv", replay=gc.client))
    started = time.perf_counter()
    with GraderCluster(catalog.get(lab_id).fleet, root=root / "state") as gc:
        up = time.perf_counter() - started
        mixed = _checks(grading.grade_batch(lab_id, mixed_dir, root / "mixed.csv", replay=gc.client))
        elapsed = time.perf_counter() - started
    differ = tuple(sorted(name for name, got in alone.items() if mixed.get(name) != got))
    return HostileTiming(lab_id, len(mixed), tuple(hostile), elapsed, up, len(alone), len(alone) - len(differ),
                         differ)


def wrong_submissions(lab_id: str) -> list[Path]:
    """The lab's typical wrong submissions (``tests/fixtures/labs/<id>/wrong-*``) when this is a source checkout."""
    folder = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "labs" / lab_id
    return sorted(p for p in folder.glob("wrong-*") if p.is_dir())
