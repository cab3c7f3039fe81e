"""JSON for scripts: sorted keys, no timings, byte-for-byte identical for the same input."""

from __future__ import annotations

import json as _json
from typing import Any

from graders import findings


def lint_payload(result: findings.LintResult) -> dict[str, Any]:
    return {
        "files": list(result.files),
        "findings": [
            {
                "file": f.file,
                "line": f.line,
                "column": f.column,
                "rule": f.rule,
                "severity": f.severity.value,
                "message": f.message,
                "hint": f.hint,
                "section": f.section,
            }
            for f in result.findings
        ],
        "errors": result.errors,
        "warnings": result.warnings,
        "infos": result.count(findings.Severity.INFO),
    }


def report_payload(report: findings.Report) -> dict[str, Any]:
    return {
        "lab": report.lab,
        "passed": report.passed,
        "score": report.score,
        "max_score": report.max_score,
        "checks": [
            {"id": c.id, "passed": c.passed, "points": c.points, "message": c.message, "hint": c.hint}
            for c in report.checks
        ],
    }


def dumps(payload: dict[str, Any]) -> str:
    return _json.dumps(payload, sort_keys=True, ensure_ascii=False, indent=2) + "\n"


def lint(result: findings.LintResult) -> str:
    return dumps(lint_payload(result))


def report(rep: findings.Report) -> str:
    return dumps(report_payload(rep))
