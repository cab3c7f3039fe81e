"""The lab spec loader: versioned strict YAML, unknown fields rejected, every problem reported with its path.

Lab folders are built by ``make_lab`` from a small valid spec plus one change per test, so each test shows
the one thing that is wrong.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

import labs
from cluster import errors
from labs import loader

pytestmark = pytest.mark.unit

VALID: dict[str, Any] = {
    "apiVersion": "gpulab.dev/v1",
    "kind": "Lab",
    "metadata": {"id": "09-example", "version": 2},
    "spec": {
        "title": "An example",
        "module": "scheduling",
        "summary": "A lab for tests.",
        "fleet": "starter",
        "files": ["pod.yaml", "answers.yaml"],
        "lintFiles": ["pod.yaml"],
        "scope": {"operator": "installed", "namespaces": ["lab-09"]},
        "setup": [{"apply": "setup/thing.yaml"}, {"label": {"node": "t4-0", "key": "x", "value": "y"}}],
        "solve": [{"apply": "solution/pod.yaml"}, {"wait": {"pod": {"namespace": "lab-09", "name": "p"}, "timeout": 5}}],
        "tasks": [{
            "id": "one", "title": "Task one", "instructions": "Do it.", "files": ["pod.yaml"],
            "checks": [
                {"id": "valid", "points": 1, "hint": "Read: somewhere.", "lint": {"files": ["pod.yaml"], "rules": ["gpu-limits"]}},
                {"id": "one-gpu", "points": 2, "hint": "Read: there.", "manifest": {
                    "file": "pod.yaml", "kind": "Pod", "name": "p",
                    "expect": [{"path": "spec.containers[*].resources.limits[nvidia.com/gpu]", "equals": 1}]}},
                {"id": "answer", "hint": "Read: here.", "answer": {"key": "a.b", "equals": 3}},
                {"id": "runs", "hint": "Read: then.", "pod": {"namespace": "lab-09", "name": "p", "phase": "Running"}},
            ],
        }],
    },
}


def make_lab(tmp_path: Path, spec: dict[str, Any], name: str = "09-example") -> Path:
    folder = tmp_path / name
    for sub in ("starter", "solution", "setup"):
        (folder / sub).mkdir(parents=True)
    for sub in ("starter", "solution"):
        (folder / sub / "pod.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
        (folder / sub / "answers.yaml").write_text("a: {b: 3}\n")
    (folder / "setup" / "thing.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n")
    (folder / "lab.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder


def problems(tmp_path: Path, change: Any) -> list[str]:
    spec = copy.deepcopy(VALID)
    change(spec)
    with pytest.raises(errors.ConfigError) as info:
        loader.load(make_lab(tmp_path, spec))
    assert "Traceback" not in str(info.value)
    return info.value.problems


def test_a_valid_spec_loads_into_runnable_objects(tmp_path: Path) -> None:
    spec = loader.load(make_lab(tmp_path, VALID))
    assert spec.id == "09-example" and spec.version == 2 and spec.max_score == 5
    assert [c.id for c in spec.checks] == ["valid", "one-gpu", "answer", "runs"]
    assert [c.cluster for c in spec.checks] == [False, False, False, True]
    assert [s.describe() for s in spec.setup] == ["apply setup/thing.yaml", "label t4-0 x=y"]


def test_every_shipped_lab_loads() -> None:
    ids = labs.list_labs()
    assert len(ids) >= 6 and all(labs.get(i).tasks for i in ids)
    modules = {labs.get(i).module for i in ids}
    assert modules == {"gpu-fundamentals", "gpu-operator", "scheduling", "sharing", "mig", "dra", "operations",
                       "capstone"}


def test_unknown_fields_are_rejected_at_every_level(tmp_path: Path) -> None:
    def change(s: dict[str, Any]) -> None:
        s["extra"] = 1
        s["spec"]["tite"] = "typo"
        s["spec"]["tasks"][0]["checks"][0]["lint"]["rule"] = ["x"]

    found = problems(tmp_path, change)
    assert any(p.startswith("(top).extra: unknown field") for p in found)
    assert any(p.startswith("spec.tite: unknown field") for p in found)
    assert any(p.startswith("spec.tasks[0].checks[0].lint.rule: unknown field") for p in found)


@pytest.mark.parametrize(("version", "words"), [
    ("gpulab.dev/v2", "newer than this gpulab understands"),
    ("gpulab.dev/v1alpha1", "older lab format"),
    ("gpulab.dev/v0", "older lab format"),
    ("example.com/v1", "must be gpulab.dev/v1"),
])
def test_versions_too_new_or_too_old_say_so(tmp_path: Path, version: str, words: str) -> None:
    found = problems(tmp_path, lambda s: s.__setitem__("apiVersion", version))
    assert any(p.startswith("apiVersion:") and words in p for p in found), found


def test_every_problem_is_reported_at_once_with_its_path(tmp_path: Path) -> None:
    def change(s: dict[str, Any]) -> None:
        s["kind"] = "Fleet"
        s["metadata"]["id"] = "other-name"
        s["spec"]["module"] = "cooking"
        s["spec"]["lintFiles"] = ["nope.yaml"]
        checks = s["spec"]["tasks"][0]["checks"]
        checks[0]["lint"]["rules"] = ["no-such-rule"]
        checks[1]["manifest"]["expect"][0]["path"] = "spec..x"
        checks[1]["points"] = 0
        checks[2]["id"] = "valid"
        checks[3]["pod"]["phase"] = "Sleeping"
        s["spec"]["setup"].append({"reboot": "now"})

    found = problems(tmp_path, change)
    expected = ["kind:", "metadata.id:", "spec.module:", "spec.lintFiles[0]:", "spec.tasks[0].checks[0].lint.rules[0]:",
                "spec.tasks[0].checks[1].manifest.expect[0].path:", "spec.tasks[0].checks[1].points:",
                "spec.tasks[0].checks[2].id: duplicate", "spec.tasks[0].checks[3].pod.phase:", "spec.setup[2].reboot:"]
    for prefix in expected:
        assert any(p.startswith(prefix) for p in found), (prefix, found)


def test_a_check_needs_exactly_one_kind(tmp_path: Path) -> None:
    def change(s: dict[str, Any]) -> None:
        s["spec"]["tasks"][0]["checks"][0]["answer"] = {"key": "a", "equals": 1}
        s["spec"]["tasks"][0]["checks"][1].pop("manifest")

    found = problems(tmp_path, change)
    assert any("checks[0]: needs exactly one check kind" in p and "lint, answer" in p for p in found)
    assert any("checks[1]: needs exactly one check kind" in p and "found none" in p for p in found)


def test_files_must_exist_in_starter_and_solution(tmp_path: Path) -> None:
    spec = copy.deepcopy(VALID)
    folder = make_lab(tmp_path, spec)
    (folder / "solution" / "pod.yaml").unlink()
    with pytest.raises(errors.ConfigError) as info:
        loader.load(folder)
    assert "spec.files[0]: solution/pod.yaml does not exist (line 12)" in info.value.problems


def test_expectations_need_one_operator_and_sane_values(tmp_path: Path) -> None:
    def change(s: dict[str, Any]) -> None:
        s["spec"]["tasks"][0]["checks"][1]["manifest"]["expect"] = [
            {"path": "a", "equals": 1, "contains": "x"}, {"path": "b", "in": "notalist"}, {"path": "c", "exists": "yes"}]

    found = problems(tmp_path, change)
    assert any("expect[0]: needs exactly one of" in p for p in found)
    assert any("expect[1].in: must be a list" in p for p in found)
    assert any("expect[2].exists: must be true or false" in p for p in found)


def test_steps_are_validated(tmp_path: Path) -> None:
    def change(s: dict[str, Any]) -> None:
        s["spec"]["setup"] = [{"apply": "setup/missing.yaml"}, {"operator": "maybe"},
                              {"fault": {"node": "t4-0", "kind": "on-fire", "gpu": -1}},
                              {"wait": {"pod": {"namespace": "x", "name": "p"}, "timeout": 0}},
                              {"apply": "a", "label": {}}]

    found = problems(tmp_path, change)
    for prefix in ("spec.setup[0].apply:", "spec.setup[1].operator:", "spec.setup[2].fault.kind:",
                   "spec.setup[2].fault.gpu:", "spec.setup[3].wait.timeout:", "spec.setup[4]: a step is a mapping"):
        assert any(p.startswith(prefix) for p in found), (prefix, found)


def test_yaml_that_does_not_parse_is_one_clear_problem(tmp_path: Path) -> None:
    folder = make_lab(tmp_path, VALID)
    (folder / "lab.yaml").write_text("spec: [unclosed\n")
    with pytest.raises(errors.ConfigError, match="cannot be read"):
        loader.load(folder)


def test_duplicate_keys_are_refused(tmp_path: Path) -> None:
    folder = make_lab(tmp_path, VALID)
    (folder / "lab.yaml").write_text((folder / "lab.yaml").read_text() + "kind: Lab\n")
    with pytest.raises(errors.ConfigError, match="cannot be read"):
        loader.load(folder)


def test_an_unknown_lab_names_the_known_ones() -> None:
    with pytest.raises(errors.ConfigError) as info:
        labs.get("03-schedulng")
    assert "there is no lab '03-schedulng'" in str(info.value) and "03-scheduling" in str(info.value)


def test_every_hint_names_a_course_section_that_exists() -> None:
    """Hints end with `Read: “<heading>” in “<module title>”.`; the heading is one of that module's notebook."""
    import json
    import re

    from graders.messages import SECTION_TITLES

    course = Path(__file__).resolve().parents[2] / "course"
    headings: dict[str, set[str]] = {}
    for nb in course.glob("0*.ipynb"):
        cells = json.loads(nb.read_text())["cells"]
        lines = [l for c in cells if c["cell_type"] == "markdown" for l in "".join(c["source"]).splitlines()]
        titles = [re.sub(r"^#+\s*(\d+\.\s*)?", "", l).strip() for l in lines if l.startswith("#")]
        module = next((t.split(": ", 1)[1] for t in titles if t.startswith("Module ")), "")
        headings[module] = set(titles)
    for lab_id in labs.list_labs():
        for check in labs.get(lab_id).checks:
            m = re.search(r"Read: “([^”]+)” in “([^”]+)”\.$", check.hint)
            assert m, (lab_id, check.id, check.hint)
            assert m.group(2) in SECTION_TITLES.values(), (lab_id, check.id, m.group(2))
            if m.group(2) in headings:
                assert m.group(1) in headings[m.group(2)], (lab_id, check.id, m.group(1))


def test_a_misspelt_key_gets_its_line_and_the_name_it_meant(tmp_path: Path) -> None:
    """Lab errors carry the YAML line and a did-you-mean, like quiz banks and fleets (one strict reader)."""
    lab = make_lab(tmp_path, VALID)
    text = (lab / "lab.yaml").read_text()
    (lab / "lab.yaml").write_text(text.replace("  title:", "  tilte:", 1))
    line = next(i for i, row in enumerate((lab / "lab.yaml").read_text().splitlines(), 1) if "tilte:" in row)
    with pytest.raises(errors.ConfigError) as info:
        loader.load(lab)
    assert f"spec.tilte: unknown field (did you mean 'title'?) (line {line})" in info.value.problems
