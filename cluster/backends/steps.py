"""Bring-up as an ordered list of small steps, shaped like kind's create actions: each step is one concern with one
``run(ctx)``, and the steps that backends share (the fleet, the simulated GPU stack) are written once, here.

A ``Context`` carries what the steps of one bring-up learn (the fleet, the binaries, the PKI, the ports, ...);
each step reads what earlier steps left and adds its own. ``bring_up`` runs the steps in order and, when one fails
on a cluster that did not exist before, asks the backend to tear the half-built cluster down unless ``retain``.
This module starts processes only through the backend's supervisor and never talks to an API server itself.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cluster import binaries, errors, fleet as fleet_mod, pki as pki_mod, progress as progress_mod, staterecord
from cluster.backends.base import StateDir
from cluster.supervisor import ProcessSpec, Supervisor

log = logging.getLogger(__name__)

GPU_STACK = "gpu-stack"


@dataclass
class Context:
    """One bring-up's working memory: the request, then whatever each step found or made."""

    backend: StateDir
    prog: progress_mod.Progress
    requested: fleet_mod.Fleet | None
    record: staterecord.StateRecord | None = None  # the state record as this bring-up found it, then as it wrote it
    fleet: fleet_mod.Fleet | None = None
    bins: binaries.Binaries | None = None
    pki: pki_mod.Pki | None = None
    ports: dict[str, int] = field(default_factory=dict)
    server: str = ""
    specs: dict[str, ProcessSpec] = field(default_factory=dict)
    seeded: bool = False
    fresh: bool = False  # no cluster was there before this bring-up
    retain: bool = False  # keep what a failed bring-up made, for its logs

    def need_fleet(self) -> fleet_mod.Fleet:
        if self.fleet is None:
            raise errors.ClusterError("bring-up step ran before the fleet step", hint="a bug in gpulab: report it")
        return self.fleet


class Step(Protocol):
    """One concern of a bring-up; ``run`` is idempotent, so ``up`` on a running cluster is a no-op."""

    title: str

    def run(self, ctx: Context) -> None: ...


def bring_up(steps: Sequence[Step], ctx: Context, *, fresh: bool, retain: bool,
             teardown: Callable[[], None]) -> None:
    """Run ``steps`` in order; a failure on a fresh cluster calls ``teardown`` unless ``retain``, then re-raises."""
    try:
        for step in steps:
            log.debug("bring-up step: %s", step.title)
            step.run(ctx)
    except BaseException:
        if fresh and not retain:
            log.warning("bring-up failed; removing the half-built cluster (use --retain to keep it)")
            teardown()
        raise


def step_titles(steps: Sequence[Step]) -> list[str]:
    return [s.title for s in steps]


# --- steps every cluster-creating backend takes ------------------------------------------------------------------


class FleetStep:
    """The cluster's fleet: the one it was made for (saved as ``fleet.yaml``), or the requested one (default
    ``starter``) for a new cluster. Asking an existing cluster for another fleet is an error, never a silent swap."""

    title = "fleet"

    def __init__(self, backend_name: str, up_hint: str) -> None:
        self.backend_name = backend_name
        self.up_hint = up_hint  # e.g. "gpulab up --backend kind", completed with --fleet NAME

    def run(self, ctx: Context) -> None:
        saved = ctx.backend.dir / "fleet.yaml"
        if saved.exists():
            current = fleet_mod.load(str(saved))
            if ctx.requested is not None and ctx.requested.name != current.name:
                raise errors.ClusterError(
                    f"the {self.backend_name} cluster already runs fleet {current.name!r}, "
                    f"not {ctx.requested.name!r}",
                    hint=f"gpulab down --purge, then {self.up_hint} --fleet {ctx.requested.name}")
            ctx.fleet = current
            return
        ctx.fleet = ctx.requested or fleet_mod.load("starter")
        ctx.backend.claim()
        saved.write_text(fleet_mod.dump(ctx.fleet))


def gpu_stack_spec(kubeconfig: Path, device_checkpoint: Path | None, device_dir: Path | None = None,
                   pod_logs: Path | None = None) -> ProcessSpec:
    """The simulated NVIDIA stack (operator, device plugin, GFD, MIG manager, DRA driver, DCGM exporter) as one
    process acting through the API server (``cluster.sim.gpu.stack``). With ``device_dir`` (kind) it hands each
    node's devices to the node plugin there instead of writing the node's GPU capacity itself; with ``pod_logs``
    too, it keeps its containers' log lines there and serves them to the nodes' containers."""
    argv = [sys.executable, "-m", "cluster.sim.gpu.stack", f"--kubeconfig={kubeconfig}"]
    if device_checkpoint is not None:
        argv.append(f"--device-checkpoint={device_checkpoint}")
    if device_dir is not None:
        argv.append(f"--device-dir={device_dir}")
    if pod_logs is not None:
        argv.append(f"--pod-logs={pod_logs}")
    return ProcessSpec(GPU_STACK, tuple(argv))


class GpuStackStep:
    """Start the simulated GPU stack on the host against the cluster's API server. ``local`` and ``kind`` both take
    this step: on kind the real kubelets run the pods, and the stack acts on them only through the API."""

    title = "GPU stack"

    def __init__(self, supervisor: Supervisor, kubeconfig: Path, device_checkpoint: Path | None,
                 device_dir: Path | None = None, pod_logs: Path | None = None) -> None:
        self.spec = gpu_stack_spec(kubeconfig, device_checkpoint, device_dir, pod_logs)
        self.sup = supervisor

    def run(self, ctx: Context) -> None:
        self.sup.start(self.spec)
        ctx.specs.setdefault(GPU_STACK, self.spec)
