"""Every static rule proves itself on fixture files: valid ones are clean, invalid ones raise exactly that rule.

Fixtures live in ``tests/fixtures/rules/<rule-id>/{valid-*,invalid-*}.yaml``. An invalid fixture may start
with ``# expect-line: N[, M]`` to pin the line each finding must point at (0 = the whole file); ``# allow:
rule-a, rule-b`` names other rules whose findings the fixture knowingly triggers. Information
notes (severity info) are ignored on both sides: they explain, they never fail a manifest.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cluster.gpu import cel
from graders import context, findings, lint, rules
from prerequisites import require

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "rules"
CASES = sorted(p for p in FIXTURES.glob("*/*.yaml"))
_EXPECT = re.compile(rb"^# expect-line: ([0-9, ]+)$", re.MULTILINE)
_ALLOW = re.compile(rb"^# allow: ([a-z, -]+)$", re.MULTILINE)


@pytest.fixture(scope="module")
def fleet() -> context.FleetFacts:
    return context.FleetFacts.starter()


def _loud(result: findings.LintResult) -> list[findings.Finding]:
    return [f for f in result.findings if f.severity is not findings.Severity.INFO]


def _describe(found: list[findings.Finding]) -> str:
    return "\n".join(f"  {f.line}:{f.column} {f.rule}: {f.message}" for f in found) or "  (none)"


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture(path: Path, fleet: context.FleetFacts) -> None:
    """valid-* gives no error or warning; invalid-* gives errors/warnings from its own rule only, on the pinned lines."""
    rule = path.parent.name
    assert rules.by_id(rule) is not None, f"fixture folder {rule} names no rule"
    if path.name.startswith("invalid-compile"):
        require(cel.find_binary() is not None, "needs the celcheck helper (gpulab binaries ensure): "
                              "only the real CEL compiler sees this error")
    allowed = _ALLOW.search(path.read_bytes())
    others = {r.strip() for r in allowed.group(1).decode().split(",")} if allowed else set()
    loud = [f for f in _loud(lint.lint_paths([path], fleet)) if f.rule not in others]
    if path.name.startswith("valid-"):
        assert loud == [], f"{path.name} should be clean but got:\n{_describe(loud)}"
        return
    assert path.name.startswith("invalid-"), "fixtures are named valid-* or invalid-*"
    assert {f.rule for f in loud} == {rule}, f"{path.name} should raise only {rule}, got:\n{_describe(loud)}"
    match = _EXPECT.search(path.read_bytes())
    if match:
        wanted = {int(n) for n in match.group(1).decode().replace(" ", "").split(",") if n}
        assert wanted <= {f.line for f in loud}, f"expected findings on lines {sorted(wanted)}, got:\n{_describe(loud)}"


def test_every_rule_has_fixtures() -> None:
    """Each rule has at least one valid and two invalid fixtures, and each fixture folder is a rule."""
    folders = {p.name for p in FIXTURES.iterdir() if p.is_dir()}
    ids = {r.id for r in rules.RULES}
    assert folders == ids
    for rule_id in sorted(ids):
        names = [p.name for p in (FIXTURES / rule_id).glob("*.yaml")]
        assert sum(n.startswith("valid-") for n in names) >= 1, rule_id
        assert sum(n.startswith("invalid-") for n in names) >= 2, rule_id


def test_every_rule_is_documented() -> None:
    """Each rule module states its id and its behaviour in a docstring."""
    for info in rules.RULES:
        assert info.summary and len(info.summary) > 20, info.id


def test_a_configmap_config_notes_that_applying_it_reloads_nothing(fleet: context.FleetFacts) -> None:
    """reference §9: an info note on configs inside a ConfigMap (a restart applies edits), none on bare files."""
    folder = FIXTURES / "device-plugin-config"
    in_cm = lint.lint_paths([folder / "valid-configmap.yaml"], fleet).findings
    bare = lint.lint_paths([folder / "valid-time-slicing.yaml"], fleet).findings
    def notes(found: tuple[findings.Finding, ...]) -> list[findings.Finding]:
        return [f for f in found if f.severity is findings.Severity.INFO and "changes no node by itself" in f.message]
    assert [f.rule for f in notes(in_cm)] == ["device-plugin-config"] and "rollout restart" in notes(in_cm)[0].hint
    assert notes(bare) == []
