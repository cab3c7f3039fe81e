"""The whole benchmark: every figure of the project with its target, measured the same way on every run.

Sections, in the order they run (at most one benchmark cluster is up at any time):

- ``starter``: a cold start of the starter fleet with cached binaries, then on that cluster the GPU Operator,
  a label change, a config change, one live check, a lab (check, solve, reset, evidence bundles recorded),
  and the starter fleet's memory;
- ``capacity``: idle starter-fleet clusters (no lab, no operator) measured over a window: RSS and millicores per
  learner with a per-process breakdown, learners per core and per GiB here, and the per-learner requests of the
  Zero to JupyterHub values file beside the ones these figures give;
- ``grading``: offline batch grading of the recorded bundles, and static lint throughput (no cluster);
- ``scale``: ``up`` for a large fleet, a device-plugin config change reconciled across it, memory at scale;
- ``notebooks``: the whole course executed headless (full runs only);
- ``class``: login to lab-ready through a temporary one-host class (needs root; ``labs.bench.class_bench``).

``quick`` shrinks the fleets and the corpus (the figure names say so) to finish in about a minute. A section
that fails, or that needs a part of the project that is not there, leaves its figures unmeasured with the
reason in the note; the failure is also listed in ``Report.errors``.
"""

from __future__ import annotations

import logging
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from cluster import binaries, errors, fleet as fleet_mod, progress as progress_mod
from cluster.backends import local as local_backend
from cluster.kube.client import Client
from labs.bench import (capacity, class_bench, cluster_bench, gpu_bench, grading_bench, labs_bench, live_bench,
                        notebooks_bench, reference, tools_bench)
from labs.bench.figures import Figure, Report, not_measured

log = logging.getLogger(__name__)

SECTIONS = ("starter", "capacity", "grading", "replay", "scale", "notebooks", "class")
LABEL_NODE = "a100-0"
CLI_START = "`gpulab up` from a shell, starter fleet, to the command's exit"
FIRST_START = "first start on a machine (makes the etcd seed), starter fleet"


class Plan:
    """Sizes of one run: full (the targets' own sizes) or quick (smaller, named as such)."""

    def __init__(self, quick: bool) -> None:
        self.quick = quick
        self.scale_nodes = 50 if quick else 1000
        self.submissions = 40 if quick else 200
        # Replaying one submission takes seconds (a reset and the learner's actions on the grader's cluster), so a
        # quick run replays a few: enough for the rotation of solution, starter and wrong submissions.
        self.replay_submissions = 10 if quick else 200
        self.hostile_submissions = 9 if quick else 30
        self.label_repeat = 2 if quick else 5
        self.live_repeat = 20 if quick else 100
        self.tools_repeat = 5 if quick else 20
        self.start_repeat = 1 if quick else 5
        self.cli_repeat = 1 if quick else 3
        self.idle_repeat = 1 if quick else 3
        self.idle_settle = 5.0 if quick else 15.0
        self.idle_window = 15.0 if quick else 60.0

    def tag(self) -> str:
        return " (quick)" if self.quick else ""


class _Run:
    def __init__(self, plan: Plan, root: Path, prog: progress_mod.Progress) -> None:
        self.plan, self.root, self.prog = plan, root, prog
        self.figures: list[Figure] = []
        self.errors: list[str] = []
        self.recorded: labs_bench.Recorded | None = None

    def section(self, title: str, body: Callable[[], None], planned: Iterable[Figure],
                needs_cluster: bool = True) -> None:
        """Run one section; on failure keep what it measured and mark the rest as not measured."""
        if needs_cluster and binaries.cached() is None:
            reason = "the control-plane binaries are not cached (run `gpulab binaries ensure` first)"
            self.errors.append(f"{title}: {reason}")
            self.figures += [not_measured(f.name, f.unit, reason, f.target, f.higher_is_better) for f in planned]
            return
        self.prog.start(title)
        before = len(self.figures)
        try:
            body()
        except (errors.CourseError, OSError, TimeoutError) as exc:
            log.debug("bench section %r failed", title, exc_info=True)
            reason = f"failed: {getattr(exc, 'message', None) or exc}"
            self.errors.append(f"{title}: {reason}")
            done = {f.name for f in self.figures[before:]}
            self.figures += [not_measured(f.name, f.unit, reason, f.target, f.higher_is_better)
                             for f in planned if f.name not in done]
        self.prog.finish()


def _starter(run: _Run) -> None:
    plan = run.plan
    out = run.figures
    fl = fleet_mod.load("starter")
    first: float | None = None
    if not plan.quick:
        first = cluster_bench.first_start_seconds(run.root, fl)
    extra = [cluster_bench.start_seconds(run.root, fl, f"bench-start-{i}") for i in range(plan.start_repeat - 1)]
    cli = [cluster_bench.cli_start_seconds(run.root, "starter") for _ in range(plan.cli_repeat)]
    with cluster_bench.running(run.root, fl, "bench-starter") as bc:
        out.append(cluster_bench.start_figure(bc, extra))
        out.append(Figure(CLI_START, round(statistics.median(cli), 2), "s",
                          note=f"median of {len(cli)} ({', '.join(f'{s:.2f}' for s in sorted(cli))} s): the figure "
                               "above plus the CLI's own Python start-up (~0.45 s) and its status table"))
        if first is not None:
            out.append(Figure(FIRST_START, round(first, 2), "s",
                              note="the same start with no etcd seed yet: the first cluster of a Kubernetes "
                                   "version on a machine bootstraps etcd once (cluster/seed.py)"))
        kubeconfig = bc.backend.kubeconfig()
        with Client.from_kubeconfig(kubeconfig, timeout=120) as client:
            took = gpu_bench.install_operator(client, timeout=180)
            out.append(Figure("GPU Operator install to policy ready, starter fleet", round(took, 2), "s"))
            times = gpu_bench.label_change_seconds(client, fl, LABEL_NODE, repeat=plan.label_repeat)
            out.append(Figure("label change to visible resources, starter fleet", round(max(times), 3), "s", 1.0,
                              note=f"worst of {len(times)} changes on {LABEL_NODE}; median "
                                   f"{statistics.median(times) * 1000:.0f} ms"))
            seconds, gpu_nodes = gpu_bench.config_change_seconds(client, fl)
            out.append(Figure(f"device-plugin config change reconciled across the starter fleet{plan.tag()}",
                              round(seconds, 2), "s", note=f"{gpu_nodes} GPU nodes; the 10 s target is for 1,000 "
                                                           "nodes (the scale section)"))
            gpu_bench.restore_config(client, fl)
            out.append(_live_check(client, plan))
            out += tools_bench.figures(client, kubeconfig, plan.tools_repeat)
        run.recorded = labs_bench.lab_figures(kubeconfig, run.root, out)
        out += cluster_bench.memory_figures(bc, "starter fleet")
    out.append(cluster_bench.teardown_figure(bc, "starter fleet"))


def _live_check(client: Client, plan: Plan) -> Figure:
    live_bench.prepare(client)
    try:
        s = live_bench.one_live_check(client, plan.live_repeat)
    finally:
        live_bench.cleanup(client)
    return Figure("one live check latency", round(s.median * 1000, 2), "ms",
                  note=f"graders.live.pod_phase on a Running pod (1 GET over HTTPS); median of {len(s.seconds)}, "
                       f"p95 {s.p95 * 1000:.1f} ms")


def _starter_planned(plan: Plan) -> list[Figure]:
    return [
        Figure("start, cached binaries, to all starter-fleet nodes Ready", None, "s", 5.0),
        Figure(CLI_START, None, "s"),
        *([] if plan.quick else [Figure(FIRST_START, None, "s")]),
        Figure("label change to visible resources, starter fleet", None, "s", 1.0),
        Figure("one live check latency", None, "ms"),
        *tools_bench.planned(),
        *labs_bench.planned(),
    ]


def _capacity(run: _Run) -> None:
    plan = run.plan
    run.figures.extend(capacity.section(run.root, plan.idle_repeat, plan.idle_settle, plan.idle_window))


def _capacity_planned() -> list[Figure]:
    return [Figure(capacity.RSS_FIGURE, None, "MiB", capacity.IDLE_RSS_TARGET_MIB),
            Figure(capacity.CPU_FIGURE, None, "millicores", capacity.IDLE_CPU_TARGET_MILLICORES)]


def _grading(run: _Run) -> None:
    n = run.plan.submissions
    out = run.figures
    if run.recorded is None:
        out.append(not_measured(_grading_name(run.plan), "submissions/s", "needs the evidence bundles that the "
                                "starter section records on its cluster (it did not run or failed)", 20.0, True))
    else:
        out.append(labs_bench.grading_throughput(run.recorded, n, run.root / "grading", run.plan.tag()))
    t = grading_bench.lint_throughput(n)
    cel_note = "CEL selectors compiled by celcheck, one process per submission" if t.compile_cel else \
        "celcheck not installed: CEL selectors checked statically only"
    out.append(Figure(f"static lint throughput, {n} generated submissions{run.plan.tag()}", round(t.per_second, 1),
                      "submissions/s", note=f"gpulab lint's rules, one submission (4 files) at a time; {cel_note}; "
                                            f"median {t.median_ms:.0f} ms, p95 {t.p95_ms:.0f} ms"))


def _replay_name(plan: Plan) -> str:
    return (f"replay grading, {plan.replay_submissions} submissions of {grading_bench.REPLAY_LAB}, "
            f"grader's cluster start included{plan.tag()}")


def _replay(run: _Run) -> None:
    n = run.plan.replay_submissions
    t = grading_bench.replay_batch(run.root / "replay", n, grading_bench.wrong_submissions(grading_bench.REPLAY_LAB))
    run.figures.append(Figure(
        _replay_name(run.plan), round(t.seconds, 1), "s", None if run.plan.quick else grading_bench.REPLAY_TARGET_S,
        note=f"gpulab grade --batch's path: the grader's cluster started ({t.start_seconds:.1f} s), each submission "
             f"reset and replayed there in a limited child process, CSV row by row; solution, starter and typical "
             f"wrong submissions in rotation, 1 in 50 damaged; {t.full_marks} full marks, {t.broken} broken; "
             f"{(t.seconds - t.start_seconds) / max(1, t.submissions):.2f} s per submission"))


def _hostile_names(plan: Plan) -> tuple[str, str]:
    n = plan.hostile_submissions
    return (f"replay grading, a class of {n} submissions of {grading_bench.HOSTILE_LAB} with 3 hostile ones, grader's "
            f"cluster start included{plan.tag()}",
            f"honest learners in that class graded exactly as when graded without the hostile ones{plan.tag()}")


def _hostile_planned(plan: Plan) -> list[Figure]:
    timing, same = _hostile_names(plan)
    honest = plan.hostile_submissions - 3
    return [Figure(timing, None, "s", HOSTILE_TARGET_S_EACH * plan.hostile_submissions + 10.0),
            Figure(same, None, f"of {honest}", float(honest), True)]


HOSTILE_TARGET_S_EACH = grading_bench.REPLAY_TARGET_S / 200  # the replay figure's rate: 3 s a submission


def _hostile(run: _Run) -> None:
    t = grading_bench.hostile_class(run.root / "hostile", run.plan.hostile_submissions)
    timing, same = _hostile_names(run.plan)
    run.figures.append(Figure(
        timing, round(t.seconds, 1), "s", HOSTILE_TARGET_S_EACH * t.submissions + 10.0,
        note=f"one gpulab grade --batch on one grader's cluster ({t.start_seconds:.1f} s to start); hostile: "
             f"{', '.join(t.hostile)} (finalizers nothing removes on objects and a pod template, a Deployment of "
             "1,500 replicas, an alert whose label regex backtracks under a backtracking engine), each followed by "
             f"an honest learner; {(t.seconds - t.start_seconds) / max(1, t.submissions):.2f} s per submission"))
    run.figures.append(Figure(
        same, float(t.same_as_alone), f"of {t.honest}", float(t.honest), True,
        note="each honest learner's checks compared with the same submission's in a batch of the honest ones alone "
             "on a grader's cluster of its own" + (f"; differ: {', '.join(t.differ)}" if t.differ else "")))


def _grading_name(plan: Plan) -> str:
    return f"offline grading throughput, {plan.submissions} submissions{plan.tag()}"


def _grading_planned(plan: Plan) -> list[Figure]:
    return [Figure(_grading_name(plan), None, "submissions/s", 20.0, True)]


def _scale_names(plan: Plan) -> tuple[str, str]:
    n = plan.scale_nodes
    return (f"up, {n}-node fleet, to all nodes Ready{plan.tag()}",
            f"device-plugin config change reconciled across {n} nodes")


def _scale(run: _Run) -> None:
    """The large fleet; a quick run only brings a smaller one up (its config change is the starter fleet's)."""
    plan = run.plan
    up_name, change_name = _scale_names(plan)
    n = plan.scale_nodes
    out = run.figures
    fl = fleet_mod.scaled(n)
    with cluster_bench.running(run.root, fl, "bench-scale") as bc:
        agents = bc.agent_names()
        rss, _ = cluster_bench.memory_mib(bc.backend, agents)
        control_plane = local_backend.CONTROL_PLANE_PROCESSES
        cp_rss, _ = cluster_bench.memory_mib(bc.backend, control_plane)
        out.append(Figure(up_name, round(bc.up_seconds, 1), "s", None if plan.quick else 60.0,
                          note=f"{fl.node_count - len(gpu_bench.gpu_nodes(fl))} CPU nodes and "
                               f"{len(gpu_bench.gpu_nodes(fl))} nodes with 4 GPUs; when Ready: agents "
                               f"{cluster_bench.cpu_seconds(bc.backend, agents):.1f} CPU-s and {rss:.0f} MiB RSS, "
                               f"control plane {cluster_bench.cpu_seconds(bc.backend, control_plane):.1f}"
                               f" CPU-s and {cp_rss:.0f} MiB RSS; {bc.phases}"))
        if not plan.quick:
            with Client.from_kubeconfig(bc.backend.kubeconfig(), timeout=120) as client:
                took = gpu_bench.install_operator(client, timeout=900)
                out.append(Figure(f"GPU Operator install to policy ready, {n} nodes", round(took, 1), "s"))
                seconds, gpu_nodes = gpu_bench.config_change_seconds(client, fl)
            out.append(Figure(change_name, round(seconds, 2), "s", 10.0,
                              note=f"ClusterPolicy patch until all {gpu_nodes} GPU nodes advertise the "
                                   "time-sliced resource"))
        out += cluster_bench.memory_figures(bc, f"{n} nodes{plan.tag()}")
    out.append(cluster_bench.teardown_figure(bc, f"{n}-node fleet{plan.tag()}"))


def _scale_planned(plan: Plan) -> list[Figure]:
    up_name, change_name = _scale_names(plan)
    if plan.quick:
        return [Figure(up_name, None, "s")]
    return [Figure(up_name, None, "s", 60.0), Figure(change_name, None, "s", 10.0)]


def _notebooks(run: _Run) -> None:
    if run.plan.quick:
        run.figures.append(not_measured(notebooks_bench.TOTAL, "s", "not run with --quick (takes minutes)"))
        return
    notebooks_bench.run(run.root / "notebooks", run.figures)


def machine() -> dict[str, object]:
    return {"cpus": os.cpu_count(), "python": sys.version.split()[0], "platform": platform.platform(),
            "load_average_1m": round(os.getloadavg()[0], 2)}


def run(quick: bool = False, *, sections: Iterable[str] = SECTIONS,
        prog: progress_mod.Progress | None = None, root: Path | None = None) -> Report:
    """Measure the chosen sections; clusters live in a temporary state dir that is removed afterwards."""
    wanted = list(sections)
    unknown = [s for s in wanted if s not in SECTIONS]
    if unknown:
        raise errors.ConfigError("bench sections", [f"{s!r}: unknown (choose from {', '.join(SECTIONS)})"
                                                    for s in unknown])
    plan = Plan(quick)
    base = Path(tempfile.mkdtemp(prefix="gpulab-bench-", dir=root))
    r = _Run(plan, base, prog or progress_mod.LogProgress())
    started = time.monotonic()
    host = machine()
    try:
        if "starter" in wanted:
            r.section("starter fleet: start, GPU Operator, label change, lab", lambda: _starter(r),
                      _starter_planned(plan))
        if "capacity" in wanted:
            r.section("capacity: idle lab clusters", lambda: _capacity(r), _capacity_planned())
        if "grading" in wanted:
            r.section("offline grading", lambda: _grading(r), _grading_planned(plan), needs_cluster=False)
        if "replay" in wanted:
            r.section("replay grading", lambda: _replay(r),
                      [Figure(_replay_name(plan), None, "s", None if plan.quick else grading_bench.REPLAY_TARGET_S)])
            r.section("replay grading with hostile submissions", lambda: _hostile(r), _hostile_planned(plan))
        if "scale" in wanted:
            r.section(f"{plan.scale_nodes}-node fleet", lambda: _scale(r), _scale_planned(plan))
        if "notebooks" in wanted:
            r.section("course notebooks", lambda: _notebooks(r), [Figure(notebooks_bench.TOTAL, None, "s")])
        if "class" in wanted:
            r.section("class mode (one-host JupyterHub)", lambda: class_bench.run(r.root, r.figures),
                      class_bench.planned())
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return Report(quick, tuple(r.figures), reference.KIND, host, time.monotonic() - started, tuple(r.errors))
