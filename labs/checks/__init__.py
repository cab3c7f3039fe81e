"""The check kinds a lab may use, by the key that names them in ``lab.yaml``.

Static kinds (``lint``, ``manifest``, ``answer``) read only the learner's files; cluster kinds (``pod``,
``node``, ``quota``, ``claim``, ``object``, ``prediction``) read a ``graders.ClusterView``, live or an evidence bundle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from labs.checks import live, static
from labs.spec import Problems, Rule

Parser = Callable[[Problems, str, dict[str, Any], static.LoadContext], Rule]

KINDS: dict[str, Parser] = {
    "lint": static.LintRule.parse,
    "manifest": static.ManifestRule.parse,
    "answer": static.AnswerRule.parse,
    "pod": live.PodRule.parse,
    "node": live.NodeRule.parse,
    "quota": live.QuotaRule.parse,
    "claim": live.ClaimRule.parse,
    "object": live.ObjectRule.parse,
    "prediction": live.PredictionRule.parse,
}

__all__ = ["KINDS", "Parser"]
