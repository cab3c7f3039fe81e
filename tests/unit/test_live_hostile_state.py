"""Damaged cluster state inside a well-formed bundle (wrong types anywhere below the object level) never makes a
check or the explainer raise: each gives a result, quickly."""

from __future__ import annotations

import copy
import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

from graders import bundle, explain, live

FIXTURES = Path(__file__).parent.parent / "fixtures" / "explain"
JUNK: list[Any] = [None, 0, -1, 10**30, 1.5, True, "", "x" * 300, [], {}, [1, "a"], {"a": [None]}, "9Ti", "-5"]


def _containers(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every value below the objects' top level (metadata.name/namespace are kept: validation needs them)."""
    out = []
    if isinstance(data, dict):
        for k, v in data.items():
            if path[-1:] == ("metadata",) and k in ("name", "namespace"):
                continue
            out.append((*path, k))
            out.extend(_containers(v, (*path, k)))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            if len(path) >= 2:  # keep each cluster list's items themselves (objects)
                out.append((*path, i))
            out.extend(_containers(v, (*path, i)))
    return out


def _set(data: Any, path: tuple[Any, ...], value: Any) -> None:
    for part in path[:-1]:
        data = data[part]
    data[path[-1]] = value


@pytest.mark.parametrize("name", ["dra-too-big", "h100-full", "shared-limit", "quota-exceeded"])
def test_mutated_state_gives_results_not_tracebacks(name: str) -> None:
    original = json.loads((FIXTURES / f"{name}.bundle.json").read_text())
    focus = ("nodes", "pods", "events", "resourceClaims", "resourceSlices", "deviceClasses", "resourceQuotas")
    paths = [p for p in _containers(original["cluster"]) if len(p) >= 3 and p[0] in focus and p[2] != "metadata"]
    rng = random.Random(f"{name}-42")
    accepted = 0
    for _ in range(50):
        data = copy.deepcopy(original)
        for path in rng.sample(paths, 6):
            try:
                _set(data["cluster"], path, copy.deepcopy(rng.choice(JUNK)))
            except (KeyError, IndexError, TypeError):
                continue  # an ancestor was replaced already
        try:
            view = bundle.loads(bundle.dumps(data)).view()
        except bundle.BundleError:
            continue  # refused with a finding: also fine
        accepted += 1
        started = time.perf_counter()
        for pod in ("huge", "greedy", "holder", "trainer", "x"):
            explain.explain_pod(view, "lab", pod)
            for check in (live.pod_phase(view, "lab", pod), live.pod_node(view, "lab", pod, pool="h100"),
                          live.scheduling_failed(view, "lab", pod, ["x"]), live.admission_failed(view, "lab", pod),
                          live.claim_allocated(view, "lab", pod=pod), live.quota_usage(view, "lab", "gpu-quota")):
                assert isinstance(check.passed, bool) and check.message
        for node in ("a100-0", "h100-0"):
            live.node_resource(view, node, "nvidia.com/gpu", at_least=1)
            live.node_label(view, node, "nvidia.com/gpu.product")
        assert time.perf_counter() - started < 1.0
    assert accepted >= 40  # the damage is below what validation looks at, so the checks do meet it
