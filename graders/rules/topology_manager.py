"""Rule ``topology-manager-policy``: the kubelet's Topology Manager settings use values the kubelet knows.

``topologyManagerPolicy`` is one of ``none``, ``best-effort``, ``restricted``, ``single-numa-node`` and
``topologyManagerScope`` is ``container`` or ``pod``, spelled exactly. Any other value stops the kubelet
at start-up with ``invalid configuration``; the node never becomes Ready.
"""

from __future__ import annotations

from collections.abc import Iterator

from graders import findings, manifests, source
from graders.rules import base

RULE_ID = "topology-manager-policy"

POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
SCOPES = ("container", "pod")


def check(doc: source.Document, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    if manifests.classify(doc) is not manifests.DocType.OBJECT or manifests.kind(doc) != "KubeletConfiguration":
        return
    data = manifests.as_map(doc.data)
    if "topologyManagerPolicy" in data:
        policy = data.get("topologyManagerPolicy")
        if policy not in POLICIES:
            text = policy if isinstance(policy, str) else str(policy)
            quoted = " ".join(manifests.go_quote(p) for p in POLICIES)
            error = (f"invalid configuration: topologyManagerPolicy (--topology-manager-policy) "
                     f"{manifests.go_quote(text)} must be one of: [{quoted}]")
            yield base.emit(doc, ("topologyManagerPolicy",), "topology-manager-policy/bad-policy", value=text,
                            error=error, suggestion=_closest(text, POLICIES))
    if "topologyManagerScope" in data:
        scope = data.get("topologyManagerScope")
        if scope not in SCOPES:
            text = scope if isinstance(scope, str) else str(scope)
            error = (f"invalid configuration: topologyManagerScope (--topology-manager-scope) "
                     f'{manifests.go_quote(text)} must be one of: "container", or "pod"')
            yield base.emit(doc, ("topologyManagerScope",), "topology-manager-policy/bad-scope", value=text, error=error)


def _closest(text: str, options: tuple[str, ...]) -> str:
    normal = text.lower().replace("_", "-").replace(" ", "-")
    for option in options:
        if normal == option or normal.replace("-", "") == option.replace("-", ""):
            return option
    return options[-1] if "numa" in normal else options[1]
