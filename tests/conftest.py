"""Shared test configuration: tier markers are applied from the folder a test lives in, every marker must be
registered, and a warning attributed to our own packages fails the test.

Tiers (``make test`` runs them all; each has its own ``make test-TIER``):

* ``unit``: no cluster, no build, no whole-tree analysis; quick.
* ``static``: mypy --strict and import-linter over the whole tree (minutes).
* ``build`` (folder tests/gobuild): builds a Go tool (the pinned kind) from the Go module proxy on first use
  (minutes; needs the proxy or a warm cache).
* ``e2e``, ``notebooks``, ``browser``: need the real local control plane (and Chromium for ``browser``).

pyproject.toml registers unit, e2e, notebooks and browser; static and build are registered here. Unknown marks are
refused by turning pytest's unknown-mark warning into an error: the collection error ``--strict-markers`` gives.
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
}
_MARKERS = (
    "static: whole-tree analysis (mypy --strict, import-linter); not in unit",
    "build: builds Go tools from the Go module proxy on first use; not in unit",
)
# Warnings are errors when they are attributed to our own packages (the module that called warnings.warn, or the
# caller it names with stacklevel); third-party warnings keep pytest's defaults.
_OURS = r"(cluster|graders|labs|quizzes)(\..*)?$"
_FILTERS = (
    "error::pytest.PytestUnknownMarkWarning",
    f"error:::{_OURS}",
)


def pytest_configure(config: pytest.Config) -> None:
    registered = {line.split(":", 1)[0].split("(", 1)[0].strip() for line in config.getini("markers")}
    for line in _MARKERS:
        if line.split(":", 1)[0] not in registered:
            config.addinivalue_line("markers", line)
    for line in _FILTERS:
        config.addinivalue_line("filterwarnings", line)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        try:
            folder = item.path.resolve().relative_to(TESTS).parts[0]
        except ValueError:
            continue
        if folder in _TIERS:
            item.add_marker(getattr(pytest.mark, _TIERS[folder]))
