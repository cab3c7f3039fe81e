"""`gpulab why --bundle` explains offline, in text or JSON; a bad bundle is one clear message with exit code 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from labs.cli.main import cli, main

FIXTURES = Path(__file__).parent.parent / "fixtures" / "explain"


def test_why_json_from_a_bundle_is_deterministic() -> None:
    args = ["why", "trainer", "-n", "lab", "--json", "--bundle", str(FIXTURES / "no-toleration.bundle.json")]
    first, second = CliRunner().invoke(cli, args), CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    assert first.output == second.output
    out = json.loads(first.output)
    assert out["state"] == "unschedulable" and out["agrees"] is True and len(out["nodes"]) == 6
    assert {r["section"] for n in out["nodes"] for r in n["reasons"]} == {"scheduling", "gpu-operator"}


def test_why_text_from_a_bundle() -> None:
    result = CliRunner().invoke(cli, ["why", "greedy", "-n", "lab", "--bundle", str(FIXTURES / "shared-limit.bundle.json")])
    assert result.exit_code == 0, result.output
    assert "failRequestsGreaterThanOne" in result.output and "(sharing)" in result.output


def test_why_with_a_broken_bundle_or_a_namespace_outside_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "b.json"
    broken.write_text("{not json")
    assert main(["why", "p", "--bundle", str(broken)]) == 1
    err = capsys.readouterr().err
    assert "not valid JSON" in err and "Traceback" not in err
    assert main(["why", "p", "-n", "kube-system", "--bundle", str(FIXTURES / "h100-full.bundle.json")]) == 1
    assert "does not include namespace 'kube-system'" in capsys.readouterr().err
