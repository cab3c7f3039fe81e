"""gpulab graders: static manifest rules, live outcome checks, evidence bundles and reports.

Public API for notebooks and labs (everything else is internal):

- ``lint_paths(paths, fleet=None)`` / ``lint_texts({name: text}, fleet=None)`` -> ``LintResult``
- ``FleetFacts`` (``starter()``, ``from_nodes(...)``, ``from_fleet(...)``, ``from_data(...)``)
- value types ``Finding``, ``Severity``, ``LintResult``, ``Check``, ``Report``
- renderers in ``graders.render`` (``terminal``, ``json``, ``nbgrader``, ``widget``)
"""

from graders.context import FleetFacts
from graders.findings import Check, Finding, LintResult, Report, Severity
from graders.lint import lint_paths, lint_texts

__all__ = ["Check", "FleetFacts", "Finding", "LintResult", "Report", "Severity", "lint_paths", "lint_texts"]
