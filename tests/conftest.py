"""Shared test configuration: tier markers are applied from the folder a test lives in, every marker must be
registered, and a warning attributed to our own packages fails the test.

Tiers (``make test`` runs them all; each has its own ``make test-TIER``):

* ``unit``: no cluster, no build, no whole-tree analysis; quick.
* ``static``: mypy --strict and import-linter over the whole tree (minutes).
* ``build`` (folder tests/gobuild): builds a Go tool (the pinned kind) from the Go module proxy on first use
  (minutes; needs the proxy or a warm cache).
* ``e2e``, ``notebooks``, ``browser``: need the real local control plane (and Chromium for ``browser``).
* ``kind``: a real kind cluster from the offline node image (``.ci/kind/node-image.sh``, which ``.ci/run`` runs).

pyproject.toml registers every marker and runs pytest with ``--strict-markers`` (an unknown mark is a collection
error), and its ``filterwarnings`` makes a warning attributed to our own packages an error.

``make test`` runs the tiers side by side in two pytest-xdist workers (most of a cluster test's time is spent
waiting on the cluster, not on a core): a test file is one unit of work (its module fixtures start once), the
class-mode files share one (one class on the machine at a time, as when run alone), and the longest units start
first so that the run does not end waiting on one of them. Files keep their tests' order; no file may depend on
another having run before it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
_TIERS = {
    "unit": "unit",
    "static": "static",
    "gobuild": "build",  # not tests/build: pytest never recurses into folders named build
    "e2e": "e2e",
    "notebooks": "notebooks",
    "browser": "browser",
    "kind": "kind",
}


# Files whose tests must not run beside each other: one unit of work for the xdist scheduler below.
SHARED_UNITS = {
    "tests/e2e/test_class_hub_round_trip.py": "class-mode",
    "tests/e2e/test_class_hub_isolation.py": "class-mode",
    "tests/e2e/test_class_solutions.py": "class-mode",
    # One kind cluster at a time: two 7-node kind clusters at once on 2 cores failed in the new-machine run of
    # 65cdaca (kubeadm gave up on one, a worker of the other never registered).
    "tests/kind/test_labs_on_kind.py": "kind",
    "tests/kind/test_nvidia_smi_on_kind.py": "kind",
    "tests/kind/test_kubectl_logs_on_kind.py": "kind",
    "tests/kind/test_class_on_kind.py": "kind",
}
# The longest units (measured in a serial run on a new machine, 2026-11-28), in the order they start; every other file follows in
# this tier order, and keeps its place within its tier.
LONG_FIRST = (
    "kind",  # about 1,100 s: every kind-tier file, one after another
    "tests/gobuild/test_go_modules.py",  # about 480 s on a new machine (go vet compiles the control plane)
    "tests/e2e/test_labs.py",  # every lab, about 20 s each
    "class-mode",  # about 340 s together
    "tests/e2e/test_bench_quick.py",  # about 240 s
    "tests/browser/test_course_lab_browser.py",  # about 200 s
)
_TIER_ORDER = ("kind", "browser", "e2e", "notebooks", "gobuild", "static", "unit")


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, or the shared unit that file is part of."""
    path = nodeid.split("::", 1)[0]
    return SHARED_UNITS.get(path, path)


def _folder(nodeid: str) -> str:
    """The folder under tests/ a test lives in (its tier's folder), or "" for one outside it."""
    parts = nodeid.split("::", 1)[0].split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else ""


def _rank(item: pytest.Item) -> tuple[int, int]:
    unit = unit_of(item.nodeid)
    if unit in LONG_FIRST:
        return (0, LONG_FIRST.index(unit))
    folder = _folder(item.nodeid)
    return (1, _TIER_ORDER.index(folder) if folder in _TIER_ORDER else len(_TIER_ORDER))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        try:
            folder = item.path.resolve().relative_to(TESTS).parts[0]
        except ValueError:
            continue
        if folder in _TIERS:
            item.add_marker(getattr(pytest.mark, _TIERS[folder]))
    items.sort(key=_rank)  # stable: a file's tests stay together and in order


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """With ``--dist loadscope`` (``make test``): xdist's scope scheduling over our units of work. Pass
    ``--no-loadscope-reorder`` too, or xdist starts the units with the most tests first instead of ours."""
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        """pytest-xdist's per-scope scheduling with our units of work (a file, or a shared unit)."""

        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return UnitScheduling(config, log)


# Wall time per tier (set-up, call and teardown of each test, module and session fixtures included), printed at the
# end of the run: the figures the set-up budget in docs/ci.md is kept against.
_TIER_SECONDS: dict[str, float] = {}
_TIER_COUNTS: dict[str, int] = {}


def _tier_of(nodeid: str) -> str:
    return _TIERS.get(_folder(nodeid), "other")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    tier = _tier_of(report.nodeid)
    _TIER_SECONDS[tier] = _TIER_SECONDS.get(tier, 0.0) + report.duration
    if report.when == "call":
        _TIER_COUNTS[tier] = _TIER_COUNTS.get(tier, 0) + 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _TIER_SECONDS:
        return
    terminalreporter.section("time per tier")
    for tier, seconds in sorted(_TIER_SECONDS.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{tier:10} {seconds:8.1f} s  {_TIER_COUNTS.get(tier, 0):5d} tests")
