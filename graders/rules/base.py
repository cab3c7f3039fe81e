"""What every static rule receives and how it reports: the rule context and ``emit``.

A rule is a module with ``RULE_ID`` and ``check(doc, ctx)`` yielding findings. Rules read plain data and
the ``RuleContext``; they never raise on a learner's input and never print. Wording comes from
``graders.messages`` by key, so a rule only decides *what* is wrong and *where*.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from graders import context, findings, manifests, messages, source


@dataclass(frozen=True)
class Index:
    """Names the whole submission defines, for rules that look across documents."""

    priority_classes: Mapping[str, bool] = field(default_factory=dict)  # name -> globalDefault
    global_defaults: tuple[tuple[str, str, int], ...] = ()  # (name, file, line)
    device_classes: frozenset[str] = frozenset()
    claim_templates: frozenset[str] = frozenset()
    claims: frozenset[str] = frozenset()
    # What the submission itself sets up on the nodes: MIG strategies (ClusterPolicy, device-plugin configs)
    # and resources that sharing renames to <name>.shared.
    mig_strategies: frozenset[str] = frozenset()
    shared_resources: frozenset[str] = frozenset()


@dataclass(frozen=True)
class CelVerdict:
    ok: bool
    error: str = ""
    cost: int = 0


@dataclass(frozen=True)
class CelResults:
    """Verdicts of the real Kubernetes CEL compiler, keyed by (expression, field path).

    ``unavailable`` says why no verdicts exist (binary missing, crashed), in which case rules report once
    that CEL was not checked rather than guessing. ``parsed``: celcheck parsed the selectors, so the static
    checks (``graders.cel_static``, which read cel-go's syntax tree) ran.
    """

    verdicts: Mapping[tuple[str, str], CelVerdict] = field(default_factory=dict)
    unavailable: str = ""
    parsed: bool = False


@dataclass(frozen=True)
class RuleContext:
    fleet: context.FleetFacts
    index: Index = Index()
    cel: CelResults = CelResults(unavailable="not requested")


def emit(doc: source.Document, path: source.YPath, key: str, /, **fields: object) -> findings.Finding:
    """A finding for ``key`` (``"<rule-id>/<variant>"``) at the position of ``path`` in ``doc``."""
    said = messages.say(key, **fields)
    mark = doc.locate(path)
    return findings.Finding(
        rule=said.rule, severity=said.severity, message=said.message, hint=said.hint,
        file=doc.file, line=mark.line, column=mark.column, section=said.section,
    )


def build_index(docs: Iterable[source.Document]) -> Index:
    classes: dict[str, bool] = {}
    defaults: list[tuple[str, str, int]] = []
    device_classes: set[str] = set()
    templates: set[str] = set()
    claims: set[str] = set()
    strategies: set[str] = set()
    shared: set[str] = set()
    for doc in docs:
        if manifests.classify(doc) is manifests.DocType.DEVICE_PLUGIN_CONFIG:
            _plugin_config_facts(manifests.as_map(doc.data), strategies, shared)
            continue
        if manifests.classify(doc) is not manifests.DocType.OBJECT:
            continue
        kind, name = manifests.kind(doc), manifests.name(doc)
        if kind == "ClusterPolicy":
            strategy = manifests.as_map(manifests.as_map(manifests.as_map(doc.data).get("spec")).get("mig")).get("strategy")
            if isinstance(strategy, str):
                strategies.add(strategy)
        if kind == "PriorityClass" and name:
            is_default = manifests.as_map(doc.data).get("globalDefault") is True
            classes[name] = is_default
            if is_default:
                defaults.append((name, doc.file, doc.locate(("globalDefault",)).line))
        elif kind == "DeviceClass" and name:
            device_classes.add(name)
        elif kind == "ResourceClaimTemplate" and name:
            templates.add(name)
        elif kind == "ResourceClaim" and name:
            claims.add(name)
    return Index(classes, tuple(defaults), frozenset(device_classes), frozenset(templates), frozenset(claims),
                 frozenset(strategies), frozenset(shared))


def _plugin_config_facts(data: dict[str, object], strategies: set[str], shared: set[str]) -> None:
    strategy = manifests.as_map(data.get("flags")).get("migStrategy")
    if isinstance(strategy, str):
        strategies.add(strategy)
    for block in manifests.as_map(data.get("sharing")).values():
        block = manifests.as_map(block)
        if block.get("renameByDefault") is not True:
            continue
        for item in manifests.as_list(block.get("resources")):
            name = manifests.as_map(item).get("name")
            if isinstance(name, str):
                shared.add((name if "/" in name else f"nvidia.com/{name}") + ".shared")
