"""A lab's reset or stop that puts a node's MIG layout back waits until the MIG manager has applied it, so the next
lab does not start (and take its start state) while the device plugin is paused for the change (issue 16: kind's
06b once took its start state in the middle of undoing 06's layout)."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest

from cluster import errors
from cluster.gpustack import names
from labs import scope

pytestmark = pytest.mark.unit


class FakeNodes:
    """Two GPU nodes and no operator; each read of a node may first move its MIG state along ``script``."""

    def __init__(self, script: dict[str, list[tuple[str, str | None]]]) -> None:
        self.script = script
        self.nodes: dict[str, dict[str, dict[str, Any]]] = {
            "a100-1": {"metadata": {"name": "a100-1", "labels": {names.MIG_CONFIG: "all-1g.10gb",
                                                                 names.MIG_CONFIG_STATE: "success"},
                                    "annotations": {names.MIG_APPLIED: "all-1g.10gb"}}},
            "t4-1": {"metadata": {"name": "t4-1", "labels": {}, "annotations": {}}},
        }
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.reads: dict[str, int] = {}

    def get(self, path: str, **_: Any) -> dict[str, Any]:
        if path == "/api/v1/nodes":
            return {"items": list(self.nodes.values())}
        if path.startswith(names.POLICY_PATH):
            raise errors.NotFound(404, "NotFound", "no policy")
        name = path.rsplit("/", 1)[-1]
        self.reads[name] = self.reads.get(name, 0) + 1
        steps = self.script.get(name)
        if steps:
            state, config = steps.pop(0)
            meta = self.nodes[name]["metadata"]
            meta["labels"][names.MIG_CONFIG_STATE] = state
            if state == "failed":
                meta["annotations"][names.MIG_FAILURE] = json.dumps({"config": config, "reason": "x"})
            else:
                meta["annotations"][names.MIG_APPLIED] = config
        return self.nodes[name]

    def patch(self, path: str, body: dict[str, Any]) -> None:
        name = path.rsplit("/", 1)[-1]
        self.patches.append((name, body))
        self.nodes[name]["metadata"]["labels"].update(body["metadata"].get("labels", {}))


def test_the_baseline_waits_until_the_layout_it_asked_for_is_applied(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "sleep", lambda _: None)
    # still "success" for the old layout first (the manager has not seen the change), then pending, then done
    client = FakeNodes({"a100-1": [("success", "all-1g.10gb"), ("pending", "all-1g.10gb"),
                                   ("success", "all-disabled")]})
    scope._baseline(client, mig=True)  # type: ignore[arg-type]
    assert client.patches == [("a100-1", {"metadata": {"labels": {names.MIG_CONFIG: "all-disabled"}}})]
    assert client.reads == {"a100-1": 3}  # read until applied; t4-1, with no MIG label, is not waited on


def test_a_failed_layout_ends_the_wait_but_an_earlier_failure_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "sleep", lambda _: None)
    # the learner's layout had failed; the manager then takes the baseline up, and it fails too
    client = FakeNodes({"a100-1": [("failed", "all-1g.10gb"), ("pending", "all-1g.10gb"),
                                   ("failed", "all-disabled")]})
    scope._baseline(client, mig=True)  # type: ignore[arg-type]
    assert client.reads == {"a100-1": 3}


def test_a_manager_that_never_finishes_is_waited_for_a_bounded_time(monkeypatch: pytest.MonkeyPatch,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    clock = iter(range(0, 10_000, 7))
    monkeypatch.setattr(time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(time, "sleep", lambda _: None)
    client = FakeNodes({"a100-1": [("pending", "all-1g.10gb")] * 1000})
    with caplog.at_level(logging.WARNING, logger="labs.scope"):
        scope._wait_mig_applied(client, {"a100-1": "all-disabled"}, timeout=60)  # type: ignore[arg-type]
    assert 5 <= client.reads["a100-1"] <= 11
    assert "a100-1 (all-disabled)" in caplog.text


def test_the_first_pass_changes_no_mig_layout_and_waits_for_none() -> None:
    client = FakeNodes({})
    scope._baseline(client, mig=False)  # type: ignore[arg-type]
    assert client.patches == [] and client.reads == {}
