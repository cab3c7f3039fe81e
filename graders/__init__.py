"""gpulab graders: static manifest rules, live outcome checks, evidence bundles and reports.

Public API for notebooks and labs (everything else is internal):

- ``lint_paths(paths, fleet=None)`` / ``lint_texts({name: text}, fleet=None)`` -> ``LintResult``
- ``FleetFacts`` (``starter()``, ``from_nodes(...)``, ``from_fleet(...)``, ``from_data(...)``)
- value types ``Finding``, ``Severity``, ``LintResult``, ``Check``, ``Report``
- renderers in ``graders.render`` (``terminal``, ``json``, ``nbgrader``, ``widget``, ``explain``)
- cluster state: ``ClusterView`` (protocol), ``LiveView(client)``, ``OutOfScope``
- outcome checks in ``graders.live`` (``node_resource``, ``node_label``, ``pod_phase``, ``pod_node``,
  ``scheduling_failed``, ``admission_failed``, ``claim_allocated``, ``quota_usage``): ``f(view, ...) -> Check``
- evidence bundles: ``snapshot(client, namespaces, manifests, lab) -> dict``, ``write_bundle``, ``load_bundle``
  (raises ``BundleError``), ``read_bundle`` (-> ``(Bundle | None, findings)``); ``Bundle.view()``
- ``dry_run_paths`` / ``dry_run_texts`` (server-side dry-run findings, rule ``apiserver``)
- ``explain_pod(view, namespace, name) -> Explanation``, ``explain_message(text)``
"""

from graders import live
from graders.bundle import Bundle, BundleError, snapshot
from graders.bundle import load as load_bundle
from graders.bundle import read as read_bundle
from graders.bundle import write as write_bundle
from graders.context import FleetFacts
from graders.dryrun import dry_run_paths, dry_run_texts
from graders.explain import Explanation, explain_message, explain_pod
from graders.findings import Check, Finding, LintResult, Report, Severity
from graders.lint import lint_paths, lint_texts
from graders.view import ClusterView, LiveView, OutOfScope

__all__ = [
    "Bundle", "BundleError", "Check", "ClusterView", "Explanation", "FleetFacts", "Finding", "LintResult", "LiveView",
    "OutOfScope", "Report", "Severity", "dry_run_paths", "dry_run_texts", "explain_message", "explain_pod", "lint_paths",
    "lint_texts", "live", "load_bundle", "read_bundle", "snapshot", "write_bundle",
]
