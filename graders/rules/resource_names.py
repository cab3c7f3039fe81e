"""Rule ``gpu-resource-name``: the accelerator resource names a pod asks for exist, and this fleet offers them.

Device plugins advertise fixed names: ``nvidia.com/gpu``; ``nvidia.com/gpu.shared`` when sharing renames
replicas; ``nvidia.com/mig-<profile>`` under the mixed MIG strategy, where the profile must be one the
fleet's GPU models have (``1g.5gb`` exists on A100-40GB, not on 80 GB cards); ``amd.com/gpu`` and
``habana.ai/gaudi`` for other vendors. Anything else is a typo that leaves the pod Pending forever, or, for
a name without a domain, a manifest the apiserver refuses.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from cluster import strict
from cluster.gpu import catalog
from graders import context, findings, manifests, placement, source
from graders.rules import base

RULE_ID = "gpu-resource-name"

KNOWN = ("nvidia.com/gpu", "nvidia.com/gpu.shared", "amd.com/gpu", "habana.ai/gaudi")
_MIG = re.compile(r"^nvidia\.com/mig-(?P<profile>.+?)(?P<shared>\.shared)?$")
_STANDARD = frozenset({"cpu", "memory", "ephemeral-storage", "storage", "pods"})


def check(doc: source.Document, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    for pod in manifests.pod_specs(doc):
        for container in manifests.containers(pod):
            seen: set[str] = set()
            for entry in placement.accelerator_entries(container):
                if entry.name in seen or not entry.name.isascii():
                    continue  # confusable-characters explains non-ASCII names
                seen.add(entry.name)
                yield from _judge(doc, pod, entry, ctx)


def _judge(
    doc: source.Document, pod: manifests.PodSpecAt, entry: placement.ResourceEntry, ctx: base.RuleContext
) -> Iterator[findings.Finding]:
    fleet = ctx.fleet
    name = entry.name
    if "/" not in name:
        if name in _STANDARD:
            return
        api = manifests.invalid(pod.kind, pod.name, [
            f'{entry.api}: Invalid value: "{name}": must be a standard resource type or fully qualified',
            f'{entry.api}: Invalid value: "{name}": must be a standard resource for containers',
        ])
        yield base.emit(doc, entry.path, "gpu-resource-name/not-qualified", resource=name, api=api,
                        suggestion=_suggest(name, fleet))
        return
    mig = _MIG.match(name)
    if mig:
        yield from _judge_mig(doc, entry, mig.group("profile"), ctx)
        return
    if name in KNOWN:
        if fleet.resources.get(name, 0) == 0 and name not in ctx.index.shared_resources:
            yield base.emit(doc, entry.path, "gpu-resource-name/not-advertised", resource=name, fleet=fleet.name,
                            offered=_offered(fleet))
        return
    if name in fleet.resources:
        return  # whatever the fleet advertises is real
    key = "gpu-resource-name/unknown-nvidia" if name.lower().startswith("nvidia") else "gpu-resource-name/unknown"
    yield base.emit(doc, entry.path, key, resource=name, suggestion=_suggest(name, fleet), offered=_offered(fleet))


def _judge_mig(
    doc: source.Document, entry: placement.ResourceEntry, profile: str, ctx: base.RuleContext
) -> Iterator[findings.Finding]:
    fleet = ctx.fleet
    fleet_models = [m for m in fleet.gpu_models if m.mig_capable]
    here = [m.key for m in fleet_models if m.profile(profile)]
    elsewhere = [m.key for m in catalog.MODELS.values() if m.profile(profile) and m.key not in here]
    offered = sorted({p.resource_suffix for m in fleet_models for p in m.mig_profiles})
    if not here:
        key = "gpu-resource-name/mig-other-model" if elsewhere else "gpu-resource-name/mig-unknown-profile"
        yield base.emit(doc, entry.path, key, resource=entry.name, profile=profile, models=", ".join(elsewhere),
                        fleet_models=", ".join(m.key for m in fleet_models) or "none",
                        offered=", ".join(offered) or "none")
        return
    if "mixed" not in fleet.mig_strategies | ctx.index.mig_strategies:
        yield base.emit(doc, entry.path, "gpu-resource-name/mig-needs-mixed", resource=entry.name,
                        strategies=", ".join(sorted(fleet.mig_strategies)) or "none")
        return
    if fleet.resources.get(entry.name, 0) == 0 and entry.name not in ctx.index.shared_resources:
        yield base.emit(doc, entry.path, "gpu-resource-name/mig-not-configured", resource=entry.name,
                        models=", ".join(here), offered=_offered(fleet))


def _offered(fleet: context.FleetFacts) -> str:
    names = [n for n in fleet.resources if placement.is_accelerator(n)]
    return ", ".join(names) if names else "no accelerators"


def _suggest(name: str, fleet: context.FleetFacts) -> str:
    candidates = sorted(set(KNOWN) | {n for n in fleet.resources if placement.is_accelerator(n)})
    close = strict.closest(name.lower(), candidates, cutoff=0.5)
    if close:
        return close
    return "nvidia.com/gpu" if "gpu" in name.lower() else candidates[0]
