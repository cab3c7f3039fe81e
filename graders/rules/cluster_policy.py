"""Rule ``cluster-policy-schema``: every field of a ClusterPolicy (or a patch of one) exists in NVIDIA's CRD.

The schema is the GPU Operator's own (``cluster.gpu.clusterpolicy_crd``, generated from ``api/nvidia/v1``), the
one ``gpulab gpu-operator install`` puts on the API server. It keeps no unknown fields, so a misspelt one
(``confg``, ``Config``, ``devicePlugins``) never reaches the operator: ``kubectl patch`` has it pruned with only a
``Warning: unknown field`` line, ``kubectl apply`` is refused under strict field validation. Either way the
setting the learner meant is not made, so it is an error. Values (enums, types) are left to the rules that
know what the operator does with them.
"""

from __future__ import annotations

from collections.abc import Iterator

from cluster import strict
from cluster.gpu import clusterpolicy_crd
from graders import findings, manifests, source
from graders.rules import base

RULE_ID = "cluster-policy-schema"
_API_VERSION = "nvidia.com/v1"


def check(doc: source.Document, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    if manifests.classify(doc) is not manifests.DocType.OBJECT or manifests.kind(doc) != "ClusterPolicy":
        return
    data = manifests.as_map(doc.data)
    if data.get("apiVersion") != _API_VERSION:
        return  # document-kind reports the wrong apiVersion
    for unknown in clusterpolicy_crd.unknown_fields(data):
        parent = ".".join(str(p) for p in unknown.path[:-1] if not isinstance(p, int))
        yield base.emit(doc, unknown.path, f"{RULE_ID}/unknown-field", field=unknown.dotted,
                        parent=parent or "spec", crd=clusterpolicy_crd.source(),
                        suggestion=_closest(str(unknown.path[-1]), unknown.known))


def _closest(key: str, known: tuple[str, ...]) -> str:
    for option in known:
        if option.lower() == key.lower().replace("-", "").replace("_", ""):
            return option
    return strict.closest(key, known, cutoff=0.6) or ""
