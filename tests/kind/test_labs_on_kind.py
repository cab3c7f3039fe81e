"""Every lab on a real kind cluster: solve → check → reset, with real kubelets running the pods and the simulated
GPU stack acting through kind's API server. Every check must pass; a check only the pod agent's kubelet-side
admission can satisfy (the lab's ``spec.backends.kind``) passes on what kind produces instead (its ``gradedOn``) and
shows the learner why kind differs (``kind.lacks``). No pod needs a registry: every image the labs name is in the offline node image under
a pinned tag. The lab must come back to its start state after reset."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import labs
from cluster.backends import kind as kind_mod
from cluster.backends.kind import KindBackend
from cluster.kube.client import Client
from cluster.testing import wait_for


@pytest.fixture
def started(kind_backend: KindBackend, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[labs.Lab]:
    try:
        lab = labs.start(request.param, workdir=tmp_path / "work", kubeconfig=kind_backend.kubeconfig(), fresh=True)
    except Exception:
        _print_cluster(kind_backend)  # pytest shows it with the error: why a setup step waited in vain
        raise
    try:
        yield lab
    finally:
        lab.stop()


def _settled_snapshot(lab: labs.Lab) -> dict[str, Any]:
    """The lab's start state once it holds still for 5 s. A stop waits for the MIG manager to undo a MIG layout
    (labs.scope), but on kind the device plugin's return and the kubelet's next status update can still land a
    moment after the next lab has started: 06b's snapshot once missed a100-1's `nvidia.com/gpu` that way."""
    last: list[dict[str, Any]] = []

    def still() -> dict[str, Any] | None:
        now = lab.snapshot()
        same = bool(last) and now == last[0]
        last[:] = [now]
        return now if same else None

    settled: dict[str, Any] = wait_for(still, timeout=90, interval=5.0,
                                       what=f"lab {lab.id}'s start state to hold still")
    return settled


@pytest.mark.parametrize("started", labs.list_labs(), indirect=True)
def test_lab_solve_check_reset_on_kind(started: labs.Lab, kind_backend: KindBackend, record_property: Any) -> None:
    lab = started
    at_start = _settled_snapshot(lab)
    untouched = lab.check(wait=1)
    assert not untouched.passed
    why = {cid: kind_mod.lacks(d.lacks, d.then) for cid, d in lab.spec.backends.get("kind", {}).items()}
    # graded on what kind produces is no free pass: before the solution exists, those checks fail too
    assert not [c.id for c in untouched.checks if c.id in why and c.passed]

    t0 = time.monotonic()
    lab.solve()
    solved = lab.check(wait=180)
    record_property("solve_check_seconds", round(time.monotonic() - t0, 1))
    failed = {c.id: c.message for c in solved.checks if not c.passed}
    assert not failed, failed
    assert set(why) <= {c.id for c in solved.checks}, f"spec.backends.kind names checks {lab.id} does not have"
    # a check kind cannot produce says so to the learner, with the reason, and passes on what kind produces
    shown = {c.id: c.message for c in solved.checks if c.id in why}
    assert all(message.startswith(why[cid] + ". Graded on what kind produces: ") for cid, message in shown.items()), shown

    lab.reset()
    seen: list[dict[str, Any]] = []

    def back() -> bool:
        seen[:] = [lab.snapshot()]
        return seen[0] == at_start

    try:
        wait_for(back, timeout=120, interval=1.0, what=f"lab {lab.id} back at its start state on kind")
    except AssertionError as exc:
        _print_cluster(kind_backend, devices=True)  # what the nodes, the stack's device files and events say
        raise AssertionError(f"{exc}; differs at {_differences(at_start, seen[0] if seen else {})}") from None


def _differences(a: Any, b: Any, where: str = "") -> list[str]:
    """Where two snapshots differ (paths, at most 10), to say what a reset left behind."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{where}/{k}: {'missing' if k not in b else 'extra'}" for k in sorted(set(a) ^ set(b), key=str)]
        for k in sorted(set(a) & set(b), key=str):
            out += _differences(a[k], b[k], f"{where}/{k}")
        return out[:10]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _differences(x, y, f"{where}[{i}]")][:10]
    return [] if a == b else [f"{where}: {str(a)[:120]!r} -> {str(b)[:120]!r}"]


def _print_cluster(backend: KindBackend, *, devices: bool = False) -> None:
    """The pods that are not running (with the kubelet's message), the nodes' GPU resources, and recent events;
    with ``devices`` also each node's device file as the GPU stack last wrote it for the node plugin."""
    if devices:
        for path in sorted(backend.devices_dir().glob("*/*.json")):
            print("devices", path.parent.name, path.read_text(errors="replace").strip()[:600])
    with Client.from_kubeconfig(backend.kubeconfig()) as client:
        for pod in client.get("/api/v1/pods").get("items", []):
            st = pod.get("status", {})
            if st.get("phase") != "Running":
                print("pod", pod["metadata"]["namespace"], pod["metadata"]["name"], pod["spec"].get("nodeName"),
                      st.get("phase"), st.get("reason"), st.get("message"))
        for node in client.get("/api/v1/nodes").get("items", []):
            st = node.get("status", {})
            print("node", node["metadata"]["name"],
                  {k: v for k, v in st.get("capacity", {}).items() if "/" in k},
                  {k: v for k, v in st.get("allocatable", {}).items() if "/" in k})
        events = client.get("/api/v1/events").get("items", [])
        for ev in sorted(events, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))[-60:]:
            obj = ev.get("involvedObject", {})
            print("event", ev.get("lastTimestamp") or ev.get("eventTime"), obj.get("kind"), obj.get("namespace"),
                  obj.get("name"), ev.get("reason"), ev.get("message"))
