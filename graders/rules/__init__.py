"""The catalog of static rules: each one a small module with ``RULE_ID``, a docstring and ``check(doc, ctx)``.

Rules are independent and order-free; ``graders.lint`` runs all of them on every document. Rules found while
reading a file (syntax, limits, encoding) are listed from ``yaml_input`` and have no ``check``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType

from graders import findings, source
from graders.rules import (
    base,
    cluster_policy,
    confusables,
    device_plugin,
    document_kind,
    dra_cel,
    dra_shape,
    field_types,
    gpu_capacity,
    gpu_integer,
    gpu_limits,
    gpu_requests_equal,
    mig_parted,
    node_selection,
    priority,
    prometheus_rule,
    resource_names,
    resource_quota,
    service_monitor,
    tolerations,
    topology_manager,
    yaml_input,
)

Check = Callable[[source.Document, base.RuleContext], Iterable[findings.Finding]]

_MODULES: tuple[ModuleType, ...] = (
    document_kind,
    field_types,
    confusables,
    gpu_limits,
    gpu_requests_equal,
    gpu_integer,
    resource_names,
    gpu_capacity,
    tolerations,
    node_selection,
    resource_quota,
    priority,
    device_plugin,
    cluster_policy,
    mig_parted,
    dra_shape,
    dra_cel,
    topology_manager,
    service_monitor,
    prometheus_rule,
)


@dataclass(frozen=True)
class RuleInfo:
    id: str
    summary: str
    check: Check | None


def _summary(module: ModuleType) -> str:
    doc = (module.__doc__ or "").strip().splitlines()[0]
    text = doc.split(":", 1)[1].strip() if ":" in doc else doc
    return (text[:1].upper() + text[1:]).replace("``", "`")


RULES: tuple[RuleInfo, ...] = (
    *(RuleInfo(rule_id, text, None) for rule_id, text in yaml_input.RULES.items()),
    *(RuleInfo(m.RULE_ID, _summary(m), m.check) for m in _MODULES),
)


def by_id(rule_id: str) -> RuleInfo | None:
    return next((r for r in RULES if r.id == rule_id), None)
