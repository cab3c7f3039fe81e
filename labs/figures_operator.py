"""Module 02's picture: the GPU Operator's operands on one node and the validation chain that gates them.

What waits for what is NVIDIA's, read from the operator's DaemonSet assets (gpu-operator v26.7,
``assets/state-device-plugin/0500_daemonset.yaml`` and the other ``assets/state-*`` DaemonSets;
reference section 9): the validator's init containers run driver -> toolkit -> CUDA -> plugin checks and write
``driver-ready``, ``toolkit-ready``, ``cuda-ready``, ``plugin-ready`` under ``/run/nvidia/validations``; the
toolkit waits for ``driver-ready``; the device plugin for ``toolkit-ready`` (init container) and ``driver-ready``
(entrypoint); GFD, the DCGM exporter and the MIG manager for ``toolkit-ready``. Nothing waits for ``cuda-ready`` or
``plugin-ready``: those two checks only decide whether the ClusterPolicy reports ``ready``.

Without a cluster the figure draws the chain for a GPU model; given the operator's pods (``kubectl get pods -n
gpu-operator -o json``), it colours each operand and each validation step by what the pods show.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from matplotlib.axes import Axes
from matplotlib.patches import FancyBboxPatch

from cluster import errors
from cluster.gpu import catalog
from cluster.gpustack import names
from labs import figures

VALIDATOR = names.OPERANDS["operator-validator"][0]
# The validator's init containers in the order they run, and the file each writes when it passes.
VALIDATIONS: tuple[tuple[str, str], ...] = (
    ("driver-validation", "driver-ready"), ("toolkit-validation", "toolkit-ready"),
    ("cuda-validation", "cuda-ready"), ("plugin-validation", "plugin-ready"),
)
GATES = ("driver-ready", "toolkit-ready")  # the only files an operand waits for


@dataclass(frozen=True)
class Operand:
    """One operand DaemonSet and the validation files its pods wait for before they start."""

    key: str  # the deploy-label suffix (nvidia.com/gpu.deploy.<key>)
    daemonset: str
    waits_for: tuple[str, ...]
    gives: str  # what the node gains once it runs


def operands(model_name: str = "A100-SXM4-80GB") -> tuple[Operand, ...]:
    """The operands the operator deploys on a node with ``model_name`` GPUs, in start order."""
    model = catalog.lookup(model_name)
    if model is None:
        raise errors.ConfigError("operator figure", [f"unknown GPU model {model_name!r}"],
                                 hint="use one of: " + ", ".join(catalog.MODELS))  # fmt: skip
    ds = {key: value[0] for key, value in names.OPERANDS.items()}
    out = [
        Operand("driver", ds["driver"], (), "kernel module; NVML sees the GPUs"),
        Operand("container-toolkit", ds["container-toolkit"], ("driver-ready",), "runtime hook / CDI specs"),
        Operand("device-plugin", ds["device-plugin"], ("toolkit-ready", "driver-ready"),
                "nvidia.com/gpu capacity and allocatable"),
        Operand("gpu-feature-discovery", ds["gpu-feature-discovery"], ("toolkit-ready",), "nvidia.com/gpu.* labels"),
        Operand("dcgm-exporter", ds["dcgm-exporter"], ("toolkit-ready",), "GPU metrics on :9400"),
    ]
    if model.mig_capable:
        out.append(Operand("mig-manager", ds["mig-manager"], ("toolkit-ready",), "applies nvidia.com/mig.config"))
    return tuple(out)


# --- what live pods show -------------------------------------------------------------------------------------------

OK, FAILING, WAITING, ABSENT = "ok", "failing", "waiting", "absent"
_FACE = {OK: "#dcefdc", FAILING: "#f6d5d5", WAITING: "#eeeeee", ABSENT: "#ffffff", "": "#e8f0fb"}
_EDGE = {OK: "#2e7d32", FAILING: "#b00020", WAITING: "#777777", ABSENT: "#bbbbbb", "": "#4c72b0"}


def _crashing(cs: Mapping[str, Any]) -> bool:
    state = cs.get("state") or {}
    return (state.get("waiting") or {}).get("reason") in ("CrashLoopBackOff", "Error") or \
        (state.get("terminated") or {}).get("exitCode", 0) != 0


def pod_state(pod: Mapping[str, Any]) -> tuple[str, str]:
    """(ok | failing | waiting, the status as ``kubectl get pods`` would abbreviate it)."""
    status = pod.get("status") or {}
    for cs in status.get("initContainerStatuses") or []:
        state = cs.get("state") or {}
        if _crashing(cs):
            return FAILING, f"Init:CrashLoopBackOff ({cs.get('name', '?')})"
        if "terminated" not in state:
            return WAITING, f"Init ({cs.get('name', '?')} waiting)"
    for cs in status.get("containerStatuses") or []:
        reason = ((cs.get("state") or {}).get("waiting") or {}).get("reason")
        if reason:
            return (FAILING if reason in ("CrashLoopBackOff", "Error") else WAITING), str(reason)
    phase = str(status.get("phase") or "Pending")
    return (OK if phase == "Running" else WAITING), phase


def validation_states(validator: Mapping[str, Any] | None) -> dict[str, str]:
    """Each validation step's state from the validator pod's init containers (all absent without the pod)."""
    if validator is None:
        return {step: ABSENT for step, _ in VALIDATIONS}
    seen = {cs.get("name"): cs for cs in (validator.get("status") or {}).get("initContainerStatuses") or []}
    out: dict[str, str] = {}
    for step, _ in VALIDATIONS:
        cs = seen.get(step)
        if cs is None:
            out[step] = WAITING
        elif _crashing(cs):
            out[step] = FAILING
        else:
            out[step] = OK if "terminated" in (cs.get("state") or {}) else WAITING
    return out


def _pods_by_app(pods: Sequence[Mapping[str, Any]], node: str | None) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for pod in pods:
        if node and (pod.get("spec") or {}).get("nodeName") != node:
            continue
        app = ((pod.get("metadata") or {}).get("labels") or {}).get(names.OPERAND_LABEL)
        if app:
            out.setdefault(str(app), pod)
    return out


# --- drawing -------------------------------------------------------------------------------------------------------


def _box(ax: Axes, x: float, y: float, w: float, h: float, lines: Sequence[tuple[str, dict[str, Any]]],
         state: str = "", dashed: bool = False) -> None:  # fmt: skip
    ax.add_patch(FancyBboxPatch((x, y - h / 2), w, h, boxstyle="round,pad=0.04", fc=_FACE[state], ec=_EDGE[state],
                                lw=1.2, ls="--" if dashed else "-"))  # fmt: skip
    top = y + (len(lines) - 1) * 0.17
    for i, (text, style) in enumerate(lines):
        ax.text(x + w / 2, top - i * 0.34, text, ha="center", va="center", **style)


def _arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float], label: str = "", dashed: bool = False,
           colour: str = "#333333", rad: float = 0.0) -> None:  # fmt: skip
    ax.annotate("", xy=end, xytext=start, arrowprops={"arrowstyle": "-|>", "color": colour, "lw": 1.3,
                                                      "ls": "--" if dashed else "-",
                                                      "connectionstyle": f"arc3,rad={rad}"})  # fmt: skip
    if label:
        mid = ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2 + 0.18)
        ax.text(*mid, label, ha="center", va="bottom", fontsize=7.5, family="monospace", color=colour,
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"})  # fmt: skip


_NAME: dict[str, Any] = {"fontsize": 8.5, "family": "monospace", "weight": "bold"}
_SMALL: dict[str, Any] = {"fontsize": 7.5}
_STATUS: dict[str, Any] = {"fontsize": 7.5, "style": "italic"}


def operator_chain(model_name: str = "A100-SXM4-80GB", pods: Sequence[Mapping[str, Any]] | None = None,
                   node: str | None = None) -> figures.CourseFigure:  # fmt: skip
    """The operands and the validation chain on one node; with ``pods`` (and ``node``), their live states."""
    ops = operands(model_name)
    live = _pods_by_app(pods, node) if pods is not None else None
    fig = figures.CourseFigure(figsize=(13, 6.6))
    ax = fig.add_subplot()
    ax.set_xlim(0, 13)
    ax.set_ylim(0, 7.4)
    ax.axis("off")

    def state_of(daemonset: str) -> tuple[str, str]:
        if live is None:
            return "", ""
        pod = live.get(daemonset)
        return pod_state(pod) if pod is not None else (ABSENT, "no pod")

    # Top: the validator pod, its four init steps in order, and the file each writes.
    steps = validation_states(live.get(VALIDATOR) if live is not None else None) if live is not None else {}
    ax.add_patch(FancyBboxPatch((0.2, 5.45), 12.6, 1.75, boxstyle="round,pad=0.04", fc="#fafafa", ec="#999"))
    validator_shown = state_of(VALIDATOR)[1]
    ax.text(0.35, 7.0, f"{VALIDATOR} pod: init containers run in this order"
            + (f"   [{validator_shown}]" if validator_shown else ""), fontsize=8.5, family="monospace",
            va="center")  # fmt: skip
    xs = (0.5, 3.6, 6.7, 9.8)
    for x, (step, ready) in zip(xs, VALIDATIONS):
        gate = ready in GATES
        state = steps.get(step, "")
        label = "gates operands" if gate else "gates nothing: only ClusterPolicy ready"
        _box(ax, x, 6.2, 2.7, 0.8, [(step, _NAME), (f"writes {ready}", {"fontsize": 7.5, "family": "monospace"}),
                                    (label, {**_SMALL, "color": "#1b5e20" if gate else "#8a5a00"})],
             state, dashed=not gate)  # fmt: skip
    for a, b in zip(xs, xs[1:]):
        _arrow(ax, (a + 2.75, 6.2), (b - 0.05, 6.2))

    # Middle: the gated chain driver -> toolkit -> device plugin -> the node's resource.
    by_key = {o.key: o for o in ops}
    chain = [by_key["driver"], by_key["container-toolkit"], by_key["device-plugin"]]
    cx = (0.3, 4.0, 7.7)
    for x, op in zip(cx, chain):
        state, shown = state_of(op.daemonset)
        waits = "waits for " + " + ".join(op.waits_for) if op.waits_for else "starts first"
        lines = [(op.daemonset, _NAME), (waits, _SMALL), (op.gives, _SMALL)] + ([(shown, _STATUS)] if shown else [])
        _box(ax, x, 3.6, 3.2, 1.3, lines, state)
    _arrow(ax, (3.55, 3.6), (3.95, 3.6))
    _arrow(ax, (7.25, 3.6), (7.65, 3.6))
    resource_state = state_of(by_key["device-plugin"].daemonset)[0]
    _box(ax, 11.5, 3.6, 1.3, 1.3, [(node or "node", {"fontsize": 8, "weight": "bold"}), ("nvidia.com/gpu", _SMALL),
                                   ("allocatable", _SMALL)], resource_state)  # fmt: skip
    _arrow(ax, (10.95, 3.6), (11.45, 3.6))
    # The ready files come from the validator's first two steps: the only arrows out of the validator.
    _arrow(ax, (xs[0] + 1.35, 5.75), (cx[1] + 1.0, 4.35), "driver-ready", colour="#1b5e20")
    _arrow(ax, (xs[0] + 1.6, 5.75), (cx[2] + 1.0, 4.35), "", colour="#1b5e20")
    _arrow(ax, (xs[1] + 1.35, 5.75), (cx[2] + 1.5, 4.35), "toolkit-ready", colour="#1b5e20")

    # Bottom: the operands that wait for toolkit-ready only.
    others = [o for o in ops if o.key not in ("driver", "container-toolkit", "device-plugin")]
    ax.text(0.3, 2.0, "these operands wait for toolkit-ready only:", fontsize=8.5, va="center")
    for i, op in enumerate(others):
        x = 0.3 + i * 3.7
        state, shown = state_of(op.daemonset)
        lines = [(op.daemonset, _NAME), (op.gives, _SMALL)] + ([(shown, _STATUS)] if shown else [])
        _box(ax, x, 1.1, 3.0, 1.0, lines, state)
    title = ("GPU Operator on a node: a failing driver or toolkit keeps the device plugin from starting; a failing CUDA "
             "or plugin validation takes no GPU away")  # fmt: skip
    ax.set_title(title, fontsize=10)
    legend = ("solid: a file an operand waits for   dashed: a check nothing waits for" if live is None else
              "green: running / passed   red: crash-looping   grey: waiting   white: no pod")  # fmt: skip
    ax.text(6.5, 0.05, legend + "   (source: gpu-operator assets/state-*/0500_daemonset.yaml)", ha="center",
            fontsize=7.5, color="#555")  # fmt: skip
    return fig
