"""The lab widget without a cluster: tasks, file links and editors, Check showing findings with hints, and
progress across tasks. ``Lab.check`` is replaced by grading the working folder against a recorded cluster."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import labs
from cluster import errors
from graders import Report, load_bundle
from labs import evidence, grading, runtime, widget

pytestmark = pytest.mark.unit

BUNDLES = Path(__file__).resolve().parents[1] / "fixtures" / "labs" / "bundles"


def offline_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lab_id: str = "03-scheduling") -> runtime.Lab:
    """A lab whose Check grades its folder with a recorded untouched cluster standing in for the live one (the
    bundle's view answers as the live view did when it was recorded)."""
    spec = labs.get(lab_id)
    work = tmp_path / "work"
    shutil.copytree(spec.directory / "starter", work)
    lab = runtime.Lab(spec, work)

    def check(*, wait: float = 5.0) -> Report:
        recorded = load_bundle(BUNDLES / f"{lab_id}.unsolved.json").view()
        files = evidence.read_files(work, spec.files)
        return grading.run_checks(spec, evidence.Evidence(files, spec.linted, evidence.fleet_facts(spec.fleet), recorded))

    monkeypatch.setattr(lab, "check", check)
    monkeypatch.chdir(tmp_path)
    return lab


def test_the_widget_lists_tasks_with_instructions_links_and_editors(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    lab = offline_lab(tmp_path, monkeypatch)
    view = widget.LabWidget(lab)
    assert len(view.tasks.children) == len(lab.tasks)
    assert view.tasks.get_title(0) == "1. A GPU pod that stays Pending"
    first = view.tasks.children[0].children
    assert "<code>kubectl -n lab-03 describe pod stuck</code>" in first[0].value
    assert 'href="work/stuck.yaml"' in first[1].value
    assert view.editors["stuck.yaml"].value == (lab.workdir / "stuck.yaml").read_text()


def test_check_shows_failed_checks_with_hints_and_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = offline_lab(tmp_path, monkeypatch)
    view = widget.LabWidget(lab)
    view.buttons["check"].click()
    assert view.report is not None and not view.report.passed
    html = view.result.value
    assert "stuck-tolerates-gpu-taint" in html and "Taints and tolerations" in html  # the lab's hint
    assert view.progress.value == view.report.score and view.progress.description.endswith("/18")
    assert view.tasks.get_title(0).startswith("1. A GPU pod that stays Pending (0/3)")
    assert "Some checks fail" in view.status.value


def test_editing_then_checking_saves_the_file_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = offline_lab(tmp_path, monkeypatch)
    view = widget.LabWidget(lab)
    fixed = (lab.spec.directory / "solution" / "stuck.yaml").read_text()
    view.editors["stuck.yaml"].value = fixed
    report = view.check()
    assert (lab.workdir / "stuck.yaml").read_text() == fixed
    assert report is not None
    passed = {c.id for c in report.checks if c.passed}
    assert {"stuck-toleration-valid", "stuck-tolerates-gpu-taint"} <= passed
    assert "(2/3)" in view.tasks.get_title(0)  # the pod itself still waits (recorded before the fix)


def test_a_course_error_is_shown_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = offline_lab(tmp_path, monkeypatch)

    def broken(*, wait: float = 10.0) -> Report:
        raise errors.ClusterError("cannot reach the API server", hint="gpulab up")

    monkeypatch.setattr(lab, "check", broken)
    view = widget.LabWidget(lab)
    assert view.check() is None
    assert "cannot reach the API server" in view.status.value and "gpulab up" in view.status.value


def test_instructions_markup() -> None:
    html = widget.instructions_html("1. Run `kubectl get <pods>`.\n2. Then this.\n\nNew paragraph.")
    assert html == ("<p>1. Run <code>kubectl get &lt;pods&gt;</code>.<br>2. Then this.</p>"
                    "<p>New paragraph.</p>")


def test_files_edited_elsewhere_are_not_overwritten_by_untouched_editors(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    lab = offline_lab(tmp_path, monkeypatch)
    view = widget.LabWidget(lab)
    edited = (lab.spec.directory / "solution" / "quota.yaml").read_text()
    (lab.workdir / "quota.yaml").write_text(edited)  # the learner used JupyterLab's own editor
    view.check()
    assert (lab.workdir / "quota.yaml").read_text() == edited
    assert view.editors["quota.yaml"].value == edited  # and the widget now shows it
