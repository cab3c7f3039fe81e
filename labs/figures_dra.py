"""Module 05's picture: a ResourceClaim, the DeviceClass it names, the ResourceSlice it draws from, and the
devices it was allocated.

Without a cluster the slice is the one the simulated ``gpu.nvidia.com`` driver publishes for a fleet node
(``cluster.sim.gpu.dra``, built from the same inventory the simulator runs), the classes are the driver's plus the
module's ``m05-hopper``, and the allocation is the first matching devices in slice order, which is the order in
which the scheduler's allocator tries them (``K8S staging/src/k8s.io/dynamic-resource-allocation/structured``);
the figure says it is a prediction. Given live objects (``kubectl get resourceclaim/resourceslices/deviceclasses
-o json``), it draws the allocation the claim's ``status.allocation.devices.results`` records. Whether a device
matches is judged with ``graders.dra_fit``'s CEL idioms (an expression outside them shows as "unknown").
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from matplotlib.axes import Axes
from matplotlib.patches import FancyBboxPatch

from cluster import errors, fleet as fleet_mod
from cluster.gpu import catalog, inventory, mig
from cluster import gpustack
from graders import dra_fit, live
from labs import figures

HOPPER_CLASS: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "m05-hopper"},
    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                                  "device.attributes['gpu.nvidia.com'].type == 'gpu' && "
                                                  "device.attributes['gpu.nvidia.com'].architecture == 'Hopper'"}}]},
}
TWO_HOPPERS: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "two-hoppers", "namespace": "m05"},
    "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
        "deviceClassName": "m05-hopper", "count": 2,
        "selectors": [{"cel": {"expression": "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('64Gi')) >= 0"}}],
    }}]}},
}  # fmt: skip

ALLOCATED, FREE_MATCH, TAKEN, NO_MATCH, UNKNOWN = "allocated", "matches", "taken", "no match", "unknown"
_FACE = {ALLOCATED: "#55a868", FREE_MATCH: "#dcefdc", TAKEN: "#dddddd", NO_MATCH: "#ffffff", UNKNOWN: "#fff1c7"}


@dataclass(frozen=True)
class ClaimRequest:
    name: str
    device_class: str
    count: int
    selectors: tuple[str, ...]  # the request's own CEL expressions


@dataclass(frozen=True)
class DeviceRow:
    name: str
    summary: str  # product or MIG profile and memory
    state: str  # allocated | matches | taken | no match | unknown


def requests(claim: Mapping[str, Any]) -> tuple[ClaimRequest, ...]:
    """The claim's requests (v1 ``exactly``, or the first choice of ``firstAvailable``)."""
    out = []
    for raw in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        first = raw.get("firstAvailable") or []
        body = raw.get("exactly") or (first[0] if first else raw)  # v1beta1 keeps the fields on the request
        count = body.get("count", 1)
        sels = tuple(str((s.get("cel") or {}).get("expression", "")) for s in body.get("selectors") or [])
        out.append(ClaimRequest(str(raw.get("name", "")), str(body.get("deviceClassName", "")),
                                count if isinstance(count, int) and not isinstance(count, bool) else 1,
                                tuple(s for s in sels if s)))  # fmt: skip
    return tuple(out)


def _class_selectors(classes: Sequence[Mapping[str, Any]], name: str) -> tuple[str, ...] | None:
    for c in classes:
        if (c.get("metadata") or {}).get("name") == name:
            return tuple(str((s.get("cel") or {}).get("expression", "")) for s in (c.get("spec") or {}).get("selectors") or [])
    return None


def _summary(dev: dra_fit.Device) -> str:
    attrs = {k.split("/", 1)[1]: v for k, v in dev.attributes.items() if "/" in k}
    memory = next((v for k, v in dev.capacity.items() if k.endswith("/memory")), None)
    what = str(attrs.get("profile") or attrs.get("productName") or "?")
    return what + (f", {float(memory) / 2**30:.1f} GiB" if memory is not None else "")


def device_rows(claim: Mapping[str, Any], slices: Sequence[Mapping[str, Any]], classes: Sequence[Mapping[str, Any]],
                taken: Sequence[tuple[str, str, str]] = ()) -> tuple[DeviceRow, ...]:  # fmt: skip
    """Every device of ``slices`` with its state for ``claim``: allocated to it (from its status, else predicted as
    the first matching free devices in slice order), matching but free, taken by another claim, or no match."""
    devices = [d for s in slices for d in dra_fit.devices_of(dict(s))]
    alloc = live.allocation_of(dict(claim))
    allocated = set(alloc.devices) if alloc is not None else set()
    predict = alloc is None
    busy = set(taken) - allocated
    rows: list[DeviceRow] = []
    wanted = {r.name: r.count for r in requests(claim)}
    by_request: list[list[bool | None]] = []  # one CEL run per request over every device
    for req in requests(claim):
        class_sel = _class_selectors(classes, req.device_class)
        by_request.append([None] * len(devices) if class_sel is None else
                          dra_fit.match_devices(class_sel + req.selectors, devices))
    for i, dev in enumerate(devices):
        verdicts = [column[i] for column in by_request]
        if dev.key in allocated:
            state = ALLOCATED
        elif dev.key in busy:
            state = TAKEN
        elif any(v is True for v in verdicts):
            state = FREE_MATCH
            req_name = next(r.name for r, v in zip(requests(claim), verdicts) if v is True)
            if predict and wanted.get(req_name, 0) > 0:
                wanted[req_name] -= 1
                state = ALLOCATED
        elif any(v is None for v in verdicts):
            state = UNKNOWN
        else:
            state = NO_MATCH
        rows.append(DeviceRow(dev.name, _summary(dev), state))
    return tuple(rows)


def fleet_slice(node: str = "h100-0", fleet: str | fleet_mod.Fleet = "starter", mig_layout: str = "") -> dict[str, Any]:
    """The ResourceSlice the simulated driver publishes for ``node`` of a fleet spec (optionally MIG-partitioned
    with one of the model's default mig-parted layouts on every GPU)."""
    fl = fleet if isinstance(fleet, fleet_mod.Fleet) else fleet_mod.load(fleet)
    pool = fl.pool_of(node)
    if pool is None or pool.gpu is None:
        raise errors.ConfigError("DRA figure", [f"fleet {fl.name!r} has no GPU node {node!r}"],
                                 hint="one of: " + ", ".join(n for p in fl.pools if p.gpu for n in p.node_names()))
    model = pool.gpu.model
    layouts: dict[int, Sequence[inventory.Placement]] | None = None
    if mig_layout:
        configs = catalog.default_mig_configs(model)
        if mig_layout not in configs:
            raise errors.ConfigError("DRA figure", [f"{mig_layout!r} is not a default mig-parted config of {model.key}"],
                                     hint="one of: " + ", ".join(configs))  # fmt: skip
        placed = mig.fit(model, configs[mig_layout] or {}).placements
        layouts = {i: placed for i in range(pool.gpu.count)}
    inv = inventory.simulated_inventory(node, model, pool.gpu.count, layouts=layouts)
    return gpustack.resource_slice(node, "figure", inv, 1)


# --- drawing -------------------------------------------------------------------------------------------------------


def _panel(ax: Axes, x: float, y_top: float, w: float, h: float, title: str, lines: Sequence[str],
           colour: str) -> None:  # fmt: skip
    ax.add_patch(FancyBboxPatch((x, y_top - h), w, h, boxstyle="round,pad=0.05", fc="#fafafa", ec=colour, lw=1.3))
    ax.text(x + 0.12, y_top - 0.25, title, fontsize=9, weight="bold", va="center", color=colour)
    for i, line in enumerate(lines):
        ax.text(x + 0.12, y_top - 0.62 - 0.3 * i, line, fontsize=7, family="monospace", va="center")


def _wrap(expression: str, width: int, indent: str = "  ") -> list[str]:
    """A CEL expression one ``&&`` clause per line, each wrapped at spaces."""
    clauses = [c.strip() for c in expression.split("&&")]
    out: list[str] = []
    for i, clause in enumerate(clauses):
        text = ("&& " if i else "") + clause
        out += textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + "   ") or [indent]
    return out


def claim_graph(claim: Mapping[str, Any] | None = None, slices: Sequence[Mapping[str, Any]] | None = None,
                classes: Sequence[Mapping[str, Any]] | None = None, *, node: str = "h100-0",
                fleet: str | fleet_mod.Fleet = "starter", taken: Sequence[tuple[str, str, str]] = (),
                max_rows: int = 12) -> figures.CourseFigure:  # fmt: skip
    """Claim -> DeviceClass -> ResourceSlice -> allocated devices. Defaults: the module's ``two-hoppers`` claim,
    the slice of ``node`` in ``fleet``, and the driver's classes plus ``m05-hopper``."""
    claim = claim if claim is not None else TWO_HOPPERS
    slices = slices if slices is not None else [fleet_slice(node, fleet)]
    classes = classes if classes is not None else [*gpustack.device_classes(), HOPPER_CLASS]
    reqs = requests(claim)
    if not reqs:
        raise errors.ConfigError("DRA figure", ["the claim has no spec.devices.requests"],
                                 hint="pass a ResourceClaim object (kubectl get resourceclaim NAME -o json)")
    rows = device_rows(claim, slices, classes, taken)
    predicted = live.allocation_of(dict(claim)) is None
    fig = figures.CourseFigure(figsize=(13, 5.6))
    ax = fig.add_subplot()
    ax.set_xlim(0, 13)
    ax.set_ylim(0, 6)
    ax.axis("off")

    meta = claim.get("metadata") or {}
    claim_lines = []
    for r in reqs:
        claim_lines += [f"request {r.name}:", f"  deviceClassName: {r.device_class}", f"  count: {r.count}"]
        for s in r.selectors:
            claim_lines += ["  selector:"] + _wrap(s, 50, "    ")
    got = [r for r in rows if r.state == ALLOCATED]
    claim_lines += ["", "status.allocation.devices.results:" + (" (predicted)" if predicted else "")]
    claim_lines += [f"  {r.name}" for r in got] or ["  (none)"]
    reserved = [str(x.get("name")) for x in ((claim.get("status") or {}).get("reservedFor") or [])]
    if reserved:
        claim_lines += ["reservedFor: " + ", ".join(reserved)]
    _panel(ax, 0.1, 5.6, 3.9, 5.2, f"ResourceClaim {meta.get('namespace', '')}/{meta.get('name', '?')}".replace(" /", " "),
           claim_lines, "#4c72b0")  # fmt: skip

    class_lines = []
    for name in dict.fromkeys(r.device_class for r in reqs):
        sel = _class_selectors(classes, name)
        class_lines += [f"{name}:"] + (["  (not found: nothing matches)"] if sel is None else
                                       [line for s in sel for line in _wrap(s, 44)])
    _panel(ax, 4.5, 5.6, 3.5, 5.2, "DeviceClass", class_lines, "#8172b3")
    _arrow(ax, (4.0, 4.6), (4.5, 4.6), "names")

    spec = (slices[0].get("spec") or {}) if slices else {}
    slice_names = [str((s.get("metadata") or {}).get("name", "?")) for s in slices]
    head = f"ResourceSlice {slice_names[0]}" if len(slice_names) == 1 else f"{len(slice_names)} ResourceSlices"
    _panel(ax, 8.5, 5.6, 4.4, 5.2, head, [f"driver {spec.get('driver', '?')}   pool {(spec.get('pool') or {}).get('name', '?')}"],
           "#dd8452")  # fmt: skip
    _arrow(ax, (8.0, 4.6), (8.5, 4.6), "selects")
    shown = rows[:max_rows]
    for i, row in enumerate(shown):
        y = 4.55 - i * 0.33
        ax.add_patch(FancyBboxPatch((8.65, y - 0.13), 4.1, 0.26, boxstyle="round,pad=0.02", fc=_FACE[row.state],
                                    ec="#888", lw=0.6))  # fmt: skip
        ax.text(8.75, y, row.name[:26], fontsize=7.5, family="monospace", va="center",
                color="white" if row.state == ALLOCATED else "black", weight="bold" if row.state == ALLOCATED else None)
        ax.text(12.68, y, f"{row.summary}  [{row.state}]", fontsize=7, va="center", ha="right",
                color="white" if row.state == ALLOCATED else "#333")  # fmt: skip
    if len(rows) > max_rows:
        ax.text(8.75, 4.55 - max_rows * 0.33, f"... and {len(rows) - max_rows} more devices", fontsize=7.5)
    if any(r.state == ALLOCATED for r in shown):
        first = next(i for i, r in enumerate(shown) if r.state == ALLOCATED)
        y_claim = 5.6 - 0.62 - 0.3 * (len(claim_lines) - len(got) - (1 if reserved else 0))
        _arrow(ax, (8.6, 4.55 - first * 0.33), (3.2, y_claim), "", colour="#2e7d32", rad=-0.2)
    label = ("predicted allocation: the first matching devices in slice order" if predicted
             else "status.allocation.devices.results")  # fmt: skip
    ax.text(4.5, 0.12, f"green: {label}  ({', '.join(r.name for r in got) or 'none'})", fontsize=8, color="#2e7d32")
    ax.set_title("One claim, one class, one slice: the scheduler allocates concrete devices and records them in the "
                 "claim's status", fontsize=10)  # fmt: skip
    return fig


def _arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float], label: str, colour: str = "#333333",
           rad: float = 0.0) -> None:  # fmt: skip
    ax.annotate("", xy=end, xytext=start, arrowprops={"arrowstyle": "-|>", "color": colour, "lw": 1.3,
                                                      "connectionstyle": f"arc3,rad={rad}"})  # fmt: skip
    if label:
        ax.text((start[0] + end[0]) / 2, start[1] + 0.12, label, ha="center", fontsize=7.5, color=colour)
