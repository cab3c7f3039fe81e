"""Rule ``prometheus-rule``: alert and recording rules parse as PromQL and select series that exist.

An expression that does not parse is refused by Prometheus when it loads the rule file; a selector on a
resource name that kube-state-metrics never writes (``nvidia.com/gpu`` instead of ``nvidia_com_gpu``) parses
and never fires; an alert on capacity alone never sees an unhealthy GPU. The checks live in
``graders.rules.service_monitor`` with the monitoring facts they share.
"""

from __future__ import annotations

from collections.abc import Iterator

from graders import findings, source
from graders.rules import base, service_monitor

RULE_ID = "prometheus-rule"


def check(doc: source.Document, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    yield from service_monitor.check_rules(doc, ctx)
