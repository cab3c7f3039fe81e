"""No invented signals: every Event reason, condition, label and annotation key that gpulab writes while the GPU
stack runs (operator install, a time-sliced device plugin, a MIG change that fails and one that succeeds, faults of
the driver, of the CUDA validation (with its workload pod) and of a GPU)
is in the table of ``docs/gpu-stack.md`` ("Signals and who writes them"), which names the upstream component that
writes it in a real cluster, or says it is gpulab's own record. A new signal without a row fails here.

What gpulab wrote is read from the objects' ``managedFields`` (every gpulab client is the field manager ``gpulab``),
so what the real API server, scheduler and controllers write is not asked about."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from cluster.kube.client import Client
from cluster.sim.gpu import names
from cluster.testing import wait_for
from gpu_e2e import (configmap, create_pod, delete, gpu_operator, gpu_pod, label, labels, set_device_plugin_config,
                     wait_ext, wait_phase)

__all__ = ["gpu_operator"]
DOC = Path(__file__).resolve().parents[2] / "docs" / "gpu-stack.md"
HEADING = "## Signals and who writes them"
MANAGER = "gpulab"
CM = "signals-plugin-config"
TIMESLICE = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"


def table(text: str) -> list[tuple[str, re.Pattern[str]]]:
    """(kind, pattern) of every signal in the doc's table; ``<x>`` in a name stands for any text."""
    body = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[0].startswith("`"):
            continue
        for name in re.findall(r"`([^`]+)`", cells[0]):
            pattern = "".join(".+" if part.startswith("<") else re.escape(part)
                              for part in re.split(r"(<[^>]+>)", name))
            rows.append((cells[1], re.compile(pattern)))
    return rows


def _keys(fields: Mapping[str, Any], *path: str) -> set[str]:
    for step in path:
        fields = fields.get(step) or {}
    return {k[2:] for k in fields if k.startswith("f:")}


def written(obj: Mapping[str, Any], kind: str) -> set[tuple[str, str]]:
    """(kind of signal, name) of what gpulab wrote on ``obj``: label and annotation keys, condition types and
    reasons, container-state and pod reasons, and an Event's reason."""
    out: set[tuple[str, str]] = set()
    mine = [m.get("fieldsV1") or {} for m in obj.get("metadata", {}).get("managedFields") or []
            if m.get("manager") == MANAGER]
    if not mine:
        return out
    if kind == "Event":
        return {("Event", str(obj.get("reason", "")))}
    status = obj.get("status") or {}
    for fields in mine:
        out |= {(f"{kind} label", k) for k in _keys(fields, "f:metadata", "f:labels")}
        out |= {(f"{kind} annotation", k) for k in _keys(fields, "f:metadata", "f:annotations")}
        for key in (fields.get("f:status") or {}).get("f:conditions") or {}:
            if key.startswith("k:"):
                ctype = json.loads(key[2:])["type"]
                conds = status.get("conditions") or []
                cond: Mapping[str, Any] = next((c for c in conds if c.get("type") == ctype), {})
                out.add((f"{kind} condition", f"{ctype}/{cond.get('reason', '')}".rstrip("/")))
    if kind == "pod" and any("f:status" in f for f in mine):
        if status.get("reason"):
            out.add(("pod reason", str(status["reason"])))
        for cs in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
            for state in (cs.get("state") or {}, cs.get("lastState") or {}):
                out |= {("container reason", str(s["reason"])) for s in state.values() if s.get("reason")}
    return out


class Collector:
    def __init__(self, client: Client, namespaces: tuple[str, ...]) -> None:
        self.client = client
        self.namespaces = namespaces
        self.seen: dict[tuple[str, str], str] = {}  # signal -> where it was first seen

    def sample(self) -> None:
        objs: list[tuple[Mapping[str, Any], str]] = [(n, "node") for n in self.client.get("/api/v1/nodes")["items"]]
        for ns in self.namespaces:
            objs += [(p, "pod") for p in self.client.get(f"/api/v1/namespaces/{ns}/pods")["items"]]
        objs += [(e, "Event") for e in self.client.get("/api/v1/events")["items"]]
        for obj, kind in objs:
            for signal in written(obj, kind):
                self.seen.setdefault(signal, f"{kind} {obj['metadata'].get('name')}")


@pytest.fixture
def collector(gpu_operator: Client, namespace: str) -> Iterator[Collector]:
    c = Collector(gpu_operator, (names.NAMESPACE, namespace))
    yield c


def test_the_doc_table_parses() -> None:
    rows = table(DOC.read_text())
    assert len(rows) > 30 and any(k == "node label" and p.fullmatch("nvidia.com/gpu.deploy.device-plugin")
                                  for k, p in rows)
    assert not any(p.fullmatch("MigConfigFailed") for _, p in rows)


def test_every_signal_the_stack_writes_has_an_upstream_writer(collector: Collector, local_cluster: Any,
                                                             namespace: str) -> None:
    client = collector.client
    wait_ext(client, "a100-1", {"nvidia.com/gpu": "4"}, "allocatable")
    collector.sample()
    # Time-slicing on t4-0, and a pod that gets a replica.
    configmap(client, CM, {"ts": TIMESLICE})
    set_device_plugin_config(client, CM, None)
    label(client, "t4-0", names.DEVICE_PLUGIN_CONFIG, "ts")
    try:
        wait_ext(client, "t4-0", {"nvidia.com/gpu": "4"}, "allocatable", timeout=60)
        create_pod(client, namespace, gpu_pod("shared", {"nvidia.com/gpu": "1"}, "t4-0"))
        wait_phase(client, namespace, "shared", "Running")
        collector.sample()
        # A MIG change that fails (a name not in the file), then one that succeeds.
        label(client, "a100-1", names.MIG_CONFIG, "all-9g.99gb")
        wait_for(lambda: labels(client, "a100-1").get(names.MIG_CONFIG_STATE) == "failed", 30, what="MIG failed")
        collector.sample()
        label(client, "a100-1", names.MIG_CONFIG, "all-1g.10gb")
        wait_for(lambda: labels(client, "a100-1").get(names.MIG_CONFIG_STATE) == "pending", 20, interval=0.05,
                 what="MIG pending")
        collector.sample()
        wait_ext(client, "a100-1", {"nvidia.com/gpu": "28"}, "allocatable", timeout=60)
        collector.sample()
        # Faults: a driver that does not load, a CUDA validation that fails (its workload pod too), an unhealthy GPU.
        local_cluster.gpulab("fault", "inject", "h100-0", "driver-missing")
        local_cluster.gpulab("fault", "inject", "l40s-0", "cuda-validation-failing")
        local_cluster.gpulab("fault", "inject", "a100-0", "gpu-unhealthy", "--gpu", "3")
        for node in ("h100-0", "l40s-0"):
            wait_for(lambda n=node: any("CrashLoopBackOff" in json.dumps(p.get("status", {}))
                                        for p in client.get(f"/api/v1/namespaces/{names.NAMESPACE}/pods",
                                                            fieldSelector=f"spec.nodeName={n}")["items"]), 60,
                     what=f"a pod on {node} crash-looping")
        wait_for(lambda: any("CrashLoopBackOff" in json.dumps(p.get("status", {})) for p in client.get(
            f"/api/v1/namespaces/{names.NAMESPACE}/pods", labelSelector="app=nvidia-cuda-validator")["items"]), 60,
                 what="the CUDA validation's workload pod crash-looping")
        collector.sample()
    finally:
        local_cluster.gpulab("fault", "clear", "h100-0", "driver-missing", check=False)
        local_cluster.gpulab("fault", "clear", "l40s-0", "cuda-validation-failing", check=False)
        local_cluster.gpulab("fault", "clear", "a100-0", "gpu-unhealthy", check=False)
        delete(client, f"/api/v1/namespaces/{namespace}/pods/shared")
        label(client, "a100-1", names.MIG_CONFIG, "all-disabled")
        label(client, "t4-0", names.DEVICE_PLUGIN_CONFIG, None)
        set_device_plugin_config(client, None, None)
        delete(client, f"/api/v1/namespaces/{names.NAMESPACE}/configmaps/{CM}")
        wait_ext(client, "a100-1", {"nvidia.com/gpu": "4"}, "allocatable", timeout=60)
        wait_ext(client, "t4-0", {"nvidia.com/gpu": "1"}, "allocatable", timeout=60)
    rows = table(DOC.read_text())
    missing = sorted(f"{kind} {name!r} (first on {where})" for (kind, name), where in collector.seen.items()
                     if not any(k == kind and p.fullmatch(name) for k, p in rows))
    assert not missing, "signals with no row in docs/gpu-stack.md's table:\n" + "\n".join(missing)
    assert ("node label", names.MIG_CONFIG_STATE) in collector.seen
    assert ("pod annotation", "nvidia.cdi.k8s.io/container.cuda-validation") in collector.seen
