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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        try:
            folder = item.path.resolve().relative_to(TESTS).parts[0]
        except ValueError:
            continue
        if folder in _TIERS:
            item.add_marker(getattr(pytest.mark, _TIERS[folder]))


# Wall time per tier (set-up, call and teardown of each test, module and session fixtures included), printed at the
# end of the run: the figures the set-up budget in docs/ci.md is kept against.
_TIER_SECONDS: dict[str, float] = {}
_TIER_COUNTS: dict[str, int] = {}


def _tier_of(nodeid: str) -> str:
    folder = nodeid.split("/", 1)[1].split("/", 1)[0] if nodeid.startswith("tests/") else ""
    return _TIERS.get(folder, "other")


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
