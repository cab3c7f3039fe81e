"""Why a node cannot satisfy a pod's ResourceClaims: its published devices, which are free, which match.

Devices come from the ResourceSlices of each node; a device is taken when any claim's allocation names it.
Selectors (the DeviceClass's and the request's) are CEL, evaluated by the Kubernetes CEL library itself
(``cluster.gpu.cel.evaluate``, the ``celcheck`` helper) against each device as the scheduler's allocator does.
A device CEL cannot decide (a runtime error such as a missing attribute, or no helper installed) has the
verdict "unknown", and the reason is then marked uncertain rather than guessed. Explanation only: the
scheduler's allocator decides.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from cluster import errors, quantity
from cluster.gpu import cel
from graders import live, nodefit, schedmsg
from graders.manifests import as_list, as_map, as_str
from graders.view import ClusterView, Obj, dig, name_of

log = logging.getLogger(__name__)

STAGE = 8  # DynamicResources runs after the resource and topology filters


@dataclass(frozen=True)
class Device:
    name: str
    driver: str
    pool: str
    attributes: dict[str, object] = field(default_factory=dict)  # "<domain>/<name>" -> value
    capacity: dict[str, Fraction] = field(default_factory=dict)
    api: Mapping[str, Any] = field(default_factory=dict, compare=False)  # as the slice lists it, for CEL

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.name)


def devices_of(slice_obj: Obj) -> list[Device]:
    driver = as_str(dig(slice_obj, "spec", "driver"))
    pool = as_str(dig(slice_obj, "spec", "pool", "name"))
    out = []
    for raw in (d for d in as_list(dig(slice_obj, "spec", "devices")) if isinstance(d, dict)):
        attrs: dict[str, object] = {}
        for key, value in as_map(dig(raw, "attributes")).items():
            typed = next(iter(as_map(value).values()), None)
            attrs[key if "/" in key else f"{driver}/{key}"] = typed
        caps: dict[str, Fraction] = {}
        for key, value in as_map(dig(raw, "capacity")).items():
            try:
                caps[key if "/" in key else f"{driver}/{key}"] = quantity.parse(dig(value, "value")).value
            except quantity.QuantityError:
                continue
        api = {"name": as_str(dig(raw, "name")), "driver": driver, "attributes": as_map(dig(raw, "attributes")),
               "capacity": as_map(dig(raw, "capacity"))}
        out.append(Device(as_str(dig(raw, "name")), driver, pool, attrs, caps, api))
    return out


def match_devices(selectors: Sequence[str], devices: Sequence[Device]) -> list[bool | None]:
    """Each device against every selector (all must hold, checked in order like the allocator's
    selectorsMatch): True, False, or None when CEL could not decide (a runtime error, which the allocator
    reports as an error, or no celcheck)."""
    out: list[bool | None] = [True] * len(devices)
    for expression in selectors:
        if not devices:
            break
        try:
            verdicts = [v.match for v in cel.evaluate(expression, [d.api or _api(d) for d in devices])]
        except (errors.BinariesUnavailable, errors.CommandFailed) as exc:
            log.warning("CEL selectors not evaluated: %s", exc)
            verdicts = [None] * len(devices)
        # In order, as the allocator runs them: the first selector that is false or fails decides.
        out = [b if a is True else a for a, b in zip(out, verdicts)]
    return out


def match(expression: str, dev: Device) -> bool | None:
    """One device against one selector (see ``match_devices``)."""
    return match_devices([expression], [dev])[0]


def _api(dev: Device) -> dict[str, Any]:
    """A device built in Python (not read from a slice) in the slice's JSON shape."""
    def typed(value: object) -> dict[str, object]:
        kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "string"
        return {kind: value}

    return {"name": dev.name, "driver": dev.driver, "attributes": {k: typed(v) for k, v in dev.attributes.items()},
            "capacity": {k: {"value": quantity.canonical(quantity.Quantity(v, "BinarySI"))}
                         for k, v in dev.capacity.items()}}


# -- per-node verdicts for one pod ------------------------------------------------------------------------

@dataclass(frozen=True)
class Request:
    claim: str
    name: str
    device_class: str
    selectors: tuple[str, ...]  # the class's and the request's CEL expressions
    count: int  # devices needed (1 for allocationMode All: at least one)
    exact: bool  # False for firstAvailable (we look at its first choice only)


@dataclass
class DraState:
    """What the explainer needs to judge a pod's claims node by node."""

    pending: list[Request]  # requests of claims that are not allocated yet
    allocated: dict[str, str]  # claim -> node it was allocated on
    missing_classes: list[str]
    devices_by_node: dict[str, list[Device]]
    taken: set[tuple[str, str, str]]

    def reasons(self, node: Obj) -> list[nodefit.Reason]:
        name = name_of(node)
        out = [nodefit.Reason("dra-elsewhere", schedmsg.DRA_NOT_ON_NODE, STAGE,
                              MappingProxyType({"claim": claim, "node": where}))
               for claim, where in sorted(self.allocated.items()) if where and where != name]
        if not self.pending or self.missing_classes:
            return out
        devices = self.devices_by_node.get(name, [])
        if not devices:
            return out + [nodefit.Reason("dra-no-devices", schedmsg.DRA_CANNOT_ALLOCATE, STAGE)]
        free = [d for d in devices if d.key not in self.taken]
        for req in self.pending:
            verdicts = match_devices(req.selectors, free)
            sure, maybe = verdicts.count(True), verdicts.count(None)
            facts = {"claim": req.claim, "request": req.name, "class": req.device_class, "need": str(req.count),
                     "free": str(len(free)), "total": str(len(devices)), "matching": str(sure),
                     "selectors": " && ".join(f"({s})" for s in req.selectors) or "(none)",
                     "offer": offer(free or devices)}
            if sure >= req.count:
                chosen = {d.key for d, v in zip(free, verdicts) if v is True}
                chosen = set(sorted(chosen)[: req.count])
                free = [d for d in free if d.key not in chosen]
                continue
            if sure + maybe >= req.count:
                out.append(nodefit.Reason("dra-unknown", schedmsg.DRA_CANNOT_ALLOCATE, STAGE,
                                          MappingProxyType(facts), certain=False))
            else:
                code = "dra-all-taken" if not free else "dra-no-match"
                out.append(nodefit.Reason(code, schedmsg.DRA_CANNOT_ALLOCATE, STAGE, MappingProxyType(facts)))
        return out


def offer(devices: list[Device]) -> str:
    """A short inventory: ``2 x NVIDIA A100-SXM4-80GB (80Gi)``."""
    counts: dict[str, int] = {}
    for d in devices:
        product = next((str(v) for k, v in d.attributes.items() if k.endswith("/productName")), d.name)
        profile = next((f" {v}" for k, v in d.attributes.items() if k.endswith("/profile")), "")
        memory = next((v for k, v in d.capacity.items() if k.endswith("/memory")), None)
        shown = f"{product}{profile}" + (f" ({quantity.canonical(quantity.Quantity(memory, 'BinarySI'))})" if memory else "")
        counts[shown] = counts.get(shown, 0) + 1
    return ", ".join(f"{n} x {what}" for what, n in sorted(counts.items())) or "no devices"


def prepare(view: ClusterView, pod: Obj) -> DraState | None:
    """The DRA picture for a pod with resource claims, or None when it has none."""
    entries = [e for e in as_list(dig(pod, "spec", "resourceClaims")) if isinstance(e, dict)]
    if not entries:
        return None
    ns = as_str(dig(pod, "metadata", "namespace"))
    names = live.claim_names_of_pod(pod)
    claims = {name_of(c): c for c in view.resource_claims(ns)}
    classes = {name_of(c): c for c in view.device_classes()}
    state = DraState([], {}, [], {}, set())
    for entry in entries:
        claim = claims.get(names.get(as_str(entry.get("name")), ""))
        if claim is None:
            continue
        alloc = live.allocation_of(claim)
        if alloc is not None:
            state.allocated[name_of(claim)] = alloc.node
            continue
        for req in _requests(claim, classes):
            if req.device_class in classes:
                state.pending.append(req)
            else:
                state.missing_classes.append(req.device_class)
    for slice_obj in view.resource_slices():
        node = as_str(dig(slice_obj, "spec", "nodeName"))
        if node:
            state.devices_by_node.setdefault(node, []).extend(devices_of(slice_obj))
    for other in view.resource_claims(None):
        alloc = live.allocation_of(other)
        state.taken.update(alloc.devices if alloc else ())
    return state


def _requests(claim: Obj, classes: dict[str, Obj]) -> list[Request]:
    out = []
    for raw in as_list(dig(claim, "spec", "devices", "requests")):
        first = as_list(dig(raw, "firstAvailable"))
        body = as_map(dig(raw, "exactly")) or (as_map(first[0]) if first else {})
        class_name = as_str(body.get("deviceClassName"))
        selectors = [as_str(dig(s, "cel", "expression")) for s in as_list(dig(classes.get(class_name), "spec", "selectors"))]
        selectors += [as_str(dig(s, "cel", "expression")) for s in as_list(body.get("selectors"))]
        raw_count = body.get("count")
        count = raw_count if isinstance(raw_count, int) and not isinstance(raw_count, bool) else 1
        out.append(Request(name_of(claim), as_str(dig(raw, "name")), class_name,
                           tuple(s for s in selectors if s), max(1, count), not first))
    return out
