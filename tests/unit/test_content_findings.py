"""Statements the course once got wrong for the versions it teaches (issue 28) stay right.

Each test reads the learner-facing text (notebook cells without their saved outputs, lab definitions with their
instructions, hints and messages, quiz banks, docs, the outcomes file) and fails when a corrected statement
comes back or its correction goes missing. Saved outputs are left out: they are regenerated from the cells.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@cache
def cells(notebook: str) -> tuple[str, ...]:
    """The sources of a course notebook's cells, whitespace folded, by index."""
    nb = json.loads((ROOT / "course" / notebook).read_text(encoding="utf-8"))
    return tuple(_flat("".join(c["source"])) for c in nb["cells"])


@cache
def corpus() -> dict[str, str]:
    """Every learner-facing text by path (notebook cells without outputs), whitespace folded."""
    out: dict[str, str] = {}
    for nb in sorted((ROOT / "course").glob("*.ipynb")):
        out[str(nb.relative_to(ROOT))] = " ".join(cells(nb.name))
    paths = [*(ROOT / "labs").glob("*/lab.yaml"), *(ROOT / "labs").glob("*/starter/*"),
             *(ROOT / "quizzes" / "banks").glob("*.yaml"), *(ROOT / "docs").glob("*.md"),
             ROOT / "course" / "outcomes.yaml"]
    for path in sorted(paths):
        if path.is_file():
            out[str(path.relative_to(ROOT))] = _flat(path.read_text(encoding="utf-8"))
    return out


def where(pattern: str) -> list[str]:
    rx = re.compile(pattern, re.IGNORECASE)
    return [path for path, text in corpus().items() if rx.search(text)]


def test_the_corpus_is_read() -> None:
    assert len([p for p in corpus() if p.endswith(".ipynb")]) >= 9
    assert "labs/03b-topology-manager/lab.yaml" in corpus() and "quizzes/banks/mig.yaml" in corpus()


def test_1_topology_manager_aligns_devices_for_every_qos_class() -> None:
    """Finding 1: alignment needs neither the static CPU manager nor a Guaranteed pod, except for CPUs (lab 03b
    grades BestEffort pods as aligned)."""
    assert where(r"alignment also needs the static CPU manager") == []
    module = " ".join(cells("03-scheduling.ipynb"))
    assert "aligns pods of every QoS class" in module and "BestEffort" in module
    assert "kubernetes.io/docs/tasks/administer-cluster/topology-manager" in module


def test_2_3_the_mig_manager_generates_its_config_when_no_configmap_is_named() -> None:
    """Findings 2 and 3: since MIG manager v0.14 an empty ``migManager.config.name`` (the chart's default since
    v24.9) makes the manager generate its layouts; default-mig-parted-config is only a fallback."""
    wrong = [r"reads one mig-parted file, by default the operator's ConfigMap",
             r"ConfigMap `default-mig-parted-config` defines named layouts",
             r"name: default-mig-parted-config, default: all-disabled",
             r"the layout is defined in the operator's ConfigMap",
             r"reads only the ConfigMap the ClusterPolicy names\. Point"]
    for pattern in wrong:
        assert where(pattern) == [], pattern
    for path in ("course/04b-mig.ipynb", "labs/04f-mig-parted/lab.yaml", "docs/gpu-stack.md"):
        assert re.search(r"v0\.14", corpus()[path]) and "fallback" in corpus()[path], path
    assert "name only when set" in corpus()["docs/gpu-stack.md"] or \
        "renders `name` only when set" in corpus()["docs/gpu-stack.md"]
