"""The shape rules of issue 29 that ``codebase_measures.py`` can hold: no import loop at run time, and an import of
one of our own modules inside a function only where it saves start-up time or keeps an optional dependency
optional, each such place listed here with its reason. A new one fails until it is moved to the top of its
module or listed with a reason; one listed here that is gone fails too, so the list stays true.

The figures are ``time.perf_counter`` around ``import importer`` and ``import importer, target`` in fresh
processes, median of three, on the 2-core development machine with a CI run beside it (2026-12-02): noisy, so
read them as sizes, not as exact costs."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import codebase_measures  # noqa: E402  (a script beside this test, not a package)

LOCAL = "a command that never uses the local backend does not import it (+110-380 ms)"
ALLOWED: dict[tuple[str, str], tuple[int, str]] = {
    ("cluster/backends/__init__.py", "cluster.backends.local"): (1, "the backend chosen by name only: " + LOCAL),
    ("cluster/backends/__init__.py", "cluster.backends.kind"): (1, "the backend chosen by name only (+200 ms)"),
    ("cluster/backends/__init__.py", "cluster.backends.attach"): (2, "the backend chosen by name only (+340 ms)"),
    ("cluster/sim/agents.py", "cluster.sim.admission"): (1, "each agent process imports only what it runs"),
    ("cluster/sim/agents.py", "cluster.sim.checkpoint"): (1, "each agent process imports only what it runs"),
    ("cluster/sim/agents.py", "cluster.sim.nodes"): (1, "each agent process imports only what it runs"),
    ("cluster/sim/agents.py", "cluster.sim.pod_agent"): (1, "each agent process imports only what it runs (+48 ms)"),
    ("cluster/sim/agents.py", "cluster.sim.gpu.stack"): (1, "each agent process imports only what it runs (+180 ms)"),
    ("cluster/sim/agents.py", "cluster.sim.kubelet.logstore"): (1, "each agent process imports only what it runs"),
    ("cluster/sim/agents.py", "cluster.sim.kubelet.server"): (1, "each agent process imports only what it runs "
                                                                 "(+186 ms)"),
    ("graders/findings.py", "graders.render.terminal"): (2, "rich, 17-45 ms of a 280 ms `import graders`, for "
                                                            "IPython's text display only"),
    ("labs/classroom/ondemand.py", "cluster.backends.local"): (1, "class mode only: " + LOCAL),
    ("labs/classroom/singleuser.py", "cluster.backends.local"): (1, "a learner's server start: " + LOCAL),
    ("labs/classroom/singleuser.py", "labs.classroom.ondemand"): (2, "a learner's server start (+135 ms)"),
    ("labs/cli/cmd_class.py", "labs.classroom.loop"): (2, "gpulab class subcommands: the other commands do not pay "
                                                          "for it (+610 ms)"),
    ("labs/cli/cmd_class.py", "labs.classroom.provision"): (2, "gpulab class subcommands (+450 ms)"),
    ("labs/cli/cmd_class.py", "labs.classroom.report"): (2, "gpulab class subcommands (+540 ms)"),
    ("labs/cli/cmd_class.py", "labs.classroom.similarity"): (1, "gpulab class subcommands (+950 ms)"),
    ("labs/cli/cmd_class.py", "quizzes.render"): (1, "gpulab class report only (+53 ms)"),
    ("labs/cli/cmd_course.py", "labs.nboutputs"): (2, "gpulab course outputs and trust only (+220 ms)"),
    ("labs/cli/cmd_course.py", "labs.nbtrust"): (1, "gpulab course trust only (it imports labs.nboutputs, +220 ms)"),
    ("labs/grader_cluster.py", "cluster.backends.local"): (2, "a grader given a kubeconfig never starts one: " + LOCAL),
    ("labs/nboutputs.py", "cluster.backends.local"): (1, "only when outputs are regenerated: " + LOCAL),
    ("labs/runtime.py", "labs.classroom.ondemand"): (1, "class mode only (+52 ms)"),
    ("labs/runtime.py", "labs.widget"): (1, "ipywidgets, an optional dependency (the course extra)"),
    ("quizzes/__init__.py", "quizzes.widget"): (1, "ipywidgets, an optional dependency (the course extra; +99 ms)"),
}


def test_no_import_loop_at_run_time() -> None:
    """No two of our modules import each other, directly or round a ring, counting imports inside functions."""
    assert codebase_measures.loops() == []


def test_imports_inside_functions_are_the_listed_ones() -> None:
    found = Counter((imp.path, imp.target) for imp in codebase_measures.inner_imports())
    assert dict(found) == {key: count for key, (count, _) in ALLOWED.items()}


def test_every_listed_import_says_why() -> None:
    assert all(len(reason) > 20 for _, reason in ALLOWED.values())


def test_the_measures_report_runs() -> None:
    text = codebase_measures.report()
    assert "import loops at run time: 0" in text
    assert f"imports of our own modules inside functions: {sum(c for c, _ in ALLOWED.values())}" in text
