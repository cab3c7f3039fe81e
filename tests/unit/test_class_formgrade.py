"""Formgrader's buttons under the class's nbgrader config (``labs/classroom/formgrade.py``): Autograde never runs
the learner's notebook and gives a comment-only task cell no points without replayed evidence; Release refuses
a release folder with more than the notebook. nbgrader's own commands run the same converters and exchange
classes as formgrader's buttons (``NbGraderAPI.autograde`` runs ``Autograde``, ``release_assignment`` the
exchange's release), so they are driven here; the hub's browser test presses the buttons themselves."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import nbformat
import pytest

from cluster import errors
from labs import course_nbgrader, grading, nbgrader_autograde
from labs.classroom import accounts, hubconfig, layout, loop, provision
from prerequisites import require

LAB = "01-device-plugins"


def _course(tmp_path: Path) -> Path:
    root = tmp_path / "course"
    shutil.copytree(course_nbgrader.default_course_dir() / "source" / LAB, root / "source" / LAB)
    cd = layout.ClassDir(tmp_path / "class")
    cd.exchange.mkdir(parents=True)
    (root / "nbgrader_config.py").write_text(
        hubconfig.nbgrader_config(cd, "gpulab") + f"c.CourseDirectory.root = {str(root)!r}\n", encoding="utf-8")
    course_nbgrader.run_nbgrader(["generate_assignment", LAB, "--force"], root)
    return root


def test_autograde_runs_no_learner_code_and_gives_comment_only_task_cells_no_points(tmp_path: Path) -> None:
    root = _course(tmp_path)
    marker = tmp_path / "learner-code-ran"
    folder = root / "submitted" / "alice" / LAB
    folder.mkdir(parents=True)
    nb = nbformat.read(str(root / "release" / LAB / f"{LAB}.ipynb"), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(f"open({str(marker)!r}, 'w').write('ran')"))
    nbformat.write(nb, str(folder / f"{LAB}.ipynb"))  # no evidence.json: the learner claims, shows nothing

    course_nbgrader.run_nbgrader(["autograde", LAB, "--force"], root)

    assert not marker.exists(), "Autograde executed the learner's notebook"
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        rows = [(g.name, g.auto_score, g.max_score) for g in gb.find_submission_notebook(LAB, LAB, "alice").grades]
    tasks = [r for r in rows if r[0].startswith("task-")]
    assert tasks and all(score == 0 for _name, score, _max in tasks), rows
    assert sum(m for _n, _s, m in tasks) > 0
    graded = nbformat.read(str(root / "autograded" / "alice" / LAB / f"{LAB}.ipynb"), as_version=4)
    reports = ["".join(o.get("text", "")) for c in graded.cells if c.cell_type == "code" for o in c.outputs]
    assert any("Not graded: evidence.json was not handed in" in r for r in reports), reports


def test_release_refuses_a_release_folder_with_an_evidence_bundle(tmp_path: Path) -> None:
    root = _course(tmp_path)
    (root / "release" / LAB / "evidence.json").write_text("{}")
    with pytest.raises(errors.CommandFailed) as failed:
        course_nbgrader.run_nbgrader(["release_assignment", LAB, "--force"], root)
    assert "only 01-device-plugins.ipynb may be released" in failed.value.output
    (root / "release" / LAB / "evidence.json").unlink()
    course_nbgrader.run_nbgrader(["release_assignment", LAB, "--force"], root)
    assert sorted(p.name for p in (tmp_path / "class" / "exchange" / "gpulab" / "outbound" / LAB).iterdir()) \
        == [f"{LAB}.ipynb"]


def test_an_assignment_that_is_not_a_lab_is_refused_at_release_and_at_autograde_with_one_reason(
        tmp_path: Path) -> None:
    root = _course(tmp_path)
    own = root / "source" / "hw1"
    own.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("print('hello')", id="c0")]
    nbformat.write(nb, str(own / "hw1.ipynb"))
    course_nbgrader.run_nbgrader(["generate_assignment", "hw1", "--force"], root)
    with pytest.raises(errors.CommandFailed) as failed:
        course_nbgrader.run_nbgrader(["release_assignment", "hw1", "--force"], root)
    assert "'hw1' is not one of the course's labs" in failed.value.output
    assert not (tmp_path / "class" / "exchange" / "gpulab" / "outbound" / "hw1").exists()

    marker = tmp_path / "learner-code-ran"
    submitted = root / "submitted" / "bob" / "hw1"
    submitted.mkdir(parents=True)
    nb.cells.append(nbformat.v4.new_code_cell(f"open({str(marker)!r}, 'w').write('ran')", id="c1"))
    nbformat.write(nb, str(submitted / "hw1.ipynb"))
    with pytest.raises(errors.CommandFailed) as graded:
        course_nbgrader.run_nbgrader(["autograde", "hw1", "--force"], root)
    assert "'hw1' is not one of the course's labs" in graded.value.output
    assert not marker.exists(), "Autograde executed the learner's notebook"


def _inbound(cd: layout.ClassDir, learner: str, stamp: str, owner: str | int, note: str) -> Path:
    """A submission folder of ``learner``'s name in the inbound folder, owned by the account ``owner`` (or uid)."""
    import pwd

    folder = cd.exchange / "gpulab" / "inbound" / f"{learner}+{LAB}+{stamp}+{note}"
    (folder).mkdir(parents=True)
    shutil.copyfile(Path(__file__).resolve().parents[2] / "course" / "nbgrader" / "source" / LAB / f"{LAB}.ipynb",
                    folder / f"{LAB}.ipynb")
    (folder / "note.txt").write_text(note)
    (folder / "timestamp.txt").write_text(stamp)
    uid = owner if isinstance(owner, int) else pwd.getpwnam(owner).pw_uid
    for path in (folder, *folder.iterdir()):
        os.lchown(path, uid, uid)
    return folder


def test_collect_takes_a_submission_only_from_the_learner_whose_folder_it_is(tmp_path: Path) -> None:
    """The exchange's inbound is world-writable: a folder named for `daemon` but made by `nobody` (a forgery,
    newer than daemon's real one) is refused and listed; daemon's own submission is the one collected."""
    require(os.geteuid() == 0, "giving folders to other accounts needs root")
    root = _course(tmp_path)
    cd = layout.ClassDir(tmp_path / "class")
    _inbound(cd, "daemon", "2026-01-15 12:00:00.000000 UTC", "daemon", "real")
    _inbound(cd, "daemon", "2026-01-15 13:00:00.000000 UTC", "nobody", "forged")
    _inbound(cd, "nobody", "2026-01-15 12:30:00.000000 UTC", "nobody", "own")

    course_nbgrader.run_nbgrader(["collect", LAB, "--update"], root)

    assert (root / "submitted" / "daemon" / LAB / "note.txt").read_text() == "real"
    assert (root / "submitted" / "nobody" / LAB / "note.txt").read_text() == "own"
    assert loop.refused(root, LAB) == [{"folder": f"daemon+{LAB}+2026-01-15 13:00:00.000000 UTC+forged",
                                        "claims": "daemon", "owner": "nobody"}]


def test_collect_by_name_takes_a_folder_only_from_the_uid_the_name_has(tmp_path: Path) -> None:
    """On Kubernetes each learner's pod runs as ``kubeuids.learner_uid`` of their name and no learner has an
    account: with ``learner_uids = "by-name"`` collect takes ann's folder, made by her uid, and refuses a newer one
    in her name made by bob's uid (and one by the instructor's uid, which no learner has)."""
    from labs.classroom import kubeuids

    require(os.geteuid() == 0, "giving folders to other uids needs root")
    root = _course(tmp_path)
    with (root / "nbgrader_config.py").open("a", encoding="utf-8") as fh:
        fh.write('c.CheckedCollect.learner_uids = "by-name"\n')
    cd = layout.ClassDir(tmp_path / "class")
    ann, bob = kubeuids.learner_uid("ann"), kubeuids.learner_uid("bob")
    _inbound(cd, "ann", "2026-01-15 12:00:00.000000 UTC", ann, "real")
    _inbound(cd, "ann", "2026-01-15 13:00:00.000000 UTC", bob, "forged")
    _inbound(cd, "bob", "2026-01-15 12:30:00.000000 UTC", bob, "own")
    _inbound(cd, "bob", "2026-01-15 14:00:00.000000 UTC", kubeuids.INSTRUCTOR_UID, "instructors")

    course_nbgrader.run_nbgrader(["collect", LAB, "--update"], root)

    assert (root / "submitted" / "ann" / LAB / "note.txt").read_text() == "real"
    assert (root / "submitted" / "bob" / LAB / "note.txt").read_text() == "own"
    assert sorted((r["claims"], r["folder"].rsplit("+", 1)[1]) for r in loop.refused(root, LAB)) == [
        ("ann", "forged"), ("bob", "instructors")]


def test_a_submission_folder_is_writable_by_its_learner_alone(tmp_path: Path) -> None:
    """nbgrader's submit leaves the folder 0777; the class's submit makes it 0755 and nothing in it writable by
    group or others (no one else may add, change or remove files in it), release gives the inbound folder the
    sticky bit (no one else may rename or remove the folder), and collect still reads it."""
    root = _course(tmp_path)
    course_nbgrader.run_nbgrader(["release_assignment", LAB, "--force"], root)
    inbound_dir = tmp_path / "class" / "exchange" / "gpulab" / "inbound"
    assert inbound_dir.stat().st_mode & 0o7777 == 0o3733, oct(inbound_dir.stat().st_mode)
    work = tmp_path / "learner" / LAB
    work.mkdir(parents=True)
    shutil.copyfile(root / "release" / LAB / f"{LAB}.ipynb", work / f"{LAB}.ipynb")
    (work / "notes.txt").write_text("mine")
    (work / "notes.txt").chmod(0o666)
    course_nbgrader.run_nbgrader(["submit", str(work), "--assignment", LAB], root)
    inbound = list(inbound_dir.iterdir())
    assert len(inbound) == 1 and inbound[0].stat().st_mode & 0o7777 == 0o755, oct(inbound[0].stat().st_mode)
    modes = {p.name: p.stat().st_mode & 0o022 for p in inbound[0].iterdir()}
    assert {f"{LAB}.ipynb", "notes.txt", "timestamp.txt"} <= set(modes) and not any(modes.values()), modes
    course_nbgrader.run_nbgrader(["collect", LAB, "--update"], root)
    assert list((root / "submitted").glob(f"*/{LAB}/{LAB}.ipynb"))


@pytest.mark.parametrize("mode", [0o755, 0o777, 0o1777])
def test_release_leaves_the_exchanges_root_sticky(tmp_path: Path, mode: int) -> None:
    """nbgrader's release makes the root 0777; without the sticky bit any learner could rename the course's folder
    away and make one of their own in its place. Release leaves the root 1777, whatever it found."""
    root = _course(tmp_path)
    exchange = tmp_path / "class" / "exchange"
    exchange.chmod(mode)
    course_nbgrader.run_nbgrader(["release_assignment", LAB, "--force"], root)
    assert exchange.stat().st_mode & 0o7777 == 0o1777, oct(exchange.stat().st_mode)


def test_release_refuses_a_root_every_learner_may_write_that_it_cannot_make_sticky(tmp_path: Path) -> None:
    require(os.geteuid() == 0, "making a folder of another account's needs root")
    root = _course(tmp_path)
    exchange = tmp_path / "class" / "exchange"
    os.chown(exchange, 65534, 65534)
    exchange.chmod(0o777)
    with pytest.raises(errors.CommandFailed) as failed:
        course_nbgrader.run_nbgrader(["release_assignment", LAB, "--force"], root)
    assert f"chmod +t {exchange}" in failed.value.output, failed.value.output
    assert not (exchange / "gpulab").exists()


@pytest.mark.parametrize("config", ["course/nbgrader/nbgrader_config.py", "course/class/nbgrader_config.py"])
def test_every_shipped_nbgrader_config_autogrades_by_replay_and_checks_the_exchange(tmp_path: Path,
                                                                                  config: str) -> None:
    """Plain `nbgrader autograde` with the course folder's or the learner image's config: the learner's notebook
    does not run, and an untouched submission with no evidence gets no points (it had full marks)."""
    from traitlets.config.loader import PyFileConfigLoader

    from labs.classroom import nbsafe

    path = Path(__file__).resolve().parents[2] / config
    loaded = PyFileConfigLoader(path.name, path=str(path.parent)).load_config()
    assert list(loaded.Autograde.autograde_preprocessors) == list(nbsafe.AUTOGRADE_PREPROCESSORS)
    assert {k: loaded.ExchangeFactory[k] for k in nbsafe.EXCHANGE} == nbsafe.EXCHANGE

    root = tmp_path / "course"
    shutil.copytree(course_nbgrader.default_course_dir() / "source" / LAB, root / "source" / LAB)
    text = (Path(__file__).resolve().parents[2] / config).read_text(encoding="utf-8")
    (root / "nbgrader_config.py").write_text(text + f"\nc.CourseDirectory.root = {str(root)!r}\n"
                                             "c.CourseDirectory.course_id = 'gpulab'\n", encoding="utf-8")
    course_nbgrader.run_nbgrader(["generate_assignment", LAB, "--force"], root)
    marker = tmp_path / "learner-code-ran"
    folder = root / "submitted" / "alice" / LAB
    folder.mkdir(parents=True)
    nb = nbformat.read(str(root / "release" / LAB / f"{LAB}.ipynb"), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(f"open({str(marker)!r}, 'w').write('ran')"))
    nbformat.write(nb, str(folder / f"{LAB}.ipynb"))
    course_nbgrader.run_nbgrader(["autograde", LAB, "--force"], root)
    assert not marker.exists(), "autograde executed the learner's notebook"
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        tasks = [g.auto_score for g in gb.find_submission_notebook(LAB, LAB, "alice").grades
                 if g.name.startswith("task-")]
    assert tasks and all(score == 0 for score in tasks), tasks


def test_collect_refuses_a_learners_folder_holding_another_accounts_file(tmp_path: Path) -> None:
    """`nobody` submits a folder of its own name whose notebook is a hard link to `daemon`'s file (another
    learner's work, owned by daemon): it is refused, never collected as nobody's."""
    import pwd

    require(os.geteuid() == 0, "giving folders to other accounts needs root")
    root = _course(tmp_path)
    cd = layout.ClassDir(tmp_path / "class")
    victims = _inbound(cd, "daemon", "2026-01-15 12:00:00.000000 UTC", "daemon", "real")
    thief = _inbound(cd, "nobody", "2026-01-15 12:30:00.000000 UTC", "nobody", "copied")
    (thief / f"{LAB}.ipynb").unlink()
    os.link(victims / f"{LAB}.ipynb", thief / f"{LAB}.ipynb")
    assert (thief / f"{LAB}.ipynb").stat().st_uid == pwd.getpwnam("daemon").pw_uid

    course_nbgrader.run_nbgrader(["collect", LAB, "--update"], root)

    assert (root / "submitted" / "daemon" / LAB / "note.txt").read_text() == "real"
    assert not (root / "submitted" / "nobody").exists()
    assert [r["owner"] for r in loop.refused(root, LAB)] == ["nobody"]


def _hostile(root: Path, student: str, collect_source: str, *, evidence: bool = False) -> Path:
    """``student``'s submission of LAB whose editable collect cell holds ``collect_source``."""
    folder = root / "submitted" / student / LAB
    folder.mkdir(parents=True)
    nb = nbformat.read(str(root / "release" / LAB / f"{LAB}.ipynb"), as_version=4)
    collect = next(c for c in nb.cells if c.get("id") == "collect")
    assert not collect.metadata.get("nbgrader", {}).get("locked"), "the collect cell is the learner's to edit"
    collect.source = collect_source
    nbformat.write(nb, str(folder / f"{LAB}.ipynb"))
    if evidence:
        (folder / "evidence.json").write_text("{}", encoding="utf-8")
    return folder


def _no_cluster() -> Any:
    raise AssertionError("nothing was handed in to replay")


def test_class_grade_runs_no_learner_code_so_a_cell_reads_nothing_and_leaves_no_process(tmp_path: Path) -> None:
    """`gpulab class grade` grades through ``nbgrader_autograde.autograde``. A learner's cell that prints the
    instructor's secret, and one that starts a detached process meant to outlive grading (it would reach the
    grader's cluster with the instructor's kubeconfig), must never run: the earlier write-only sandbox ran them
    as the instructor, showed the secret in the feedback and left the process behind."""
    root = _course(tmp_path)
    secret = tmp_path / "instructor" / ".ssh" / "id_ed25519"
    secret.parent.mkdir(parents=True)
    secret.write_text("CANARY-4d1f-instructor-key\n", encoding="utf-8")
    marker = Path("/dev/shm") / f"gpulab-left-behind-{uuid.uuid4().hex}"  # /dev was writable in the old sandbox
    _hostile(root, "mallory", f"print(open({str(secret)!r}).read())\n"
                              "import subprocess\n"
                              f"subprocess.Popen(['sh', '-c', 'sleep 1; touch {marker}'], start_new_session=True)\n")
    try:
        graded = nbgrader_autograde.autograde(root, LAB, _no_cluster, students=("mallory",))
        time.sleep(2.5)
        assert not marker.exists(), "a process the learner's notebook started outlived grading"
    finally:
        marker.unlink(missing_ok=True)
    autograded = (root / "autograded" / "mallory" / LAB / f"{LAB}.ipynb").read_text(encoding="utf-8")
    assert "CANARY-4d1f" not in autograded
    nb = nbformat.reads(autograded, as_version=4)
    collect = next(c for c in nb.cells if c.get("id") == "collect")
    assert collect.outputs == [] and "subprocess.Popen" in collect.source  # shown as text, never run
    assert [g.student for g in graded] == ["mallory"] and not any(graded[0].tasks.values())
    assert graded[0].error == "evidence.json was not handed in"


def test_class_grade_holds_each_submission_to_its_budget_and_grades_the_next(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A submission whose grading does not end (a slow pattern, a flood) costs that submission its grade within
    the time budget; the next learner is graded as usual."""
    root = _course(tmp_path)
    for student in ("ann", "mallory"):
        _hostile(root, student, "# my evidence is handed in\n", evidence=True)
    from graders import Report

    def grade(lab_id: str, submission: Path, **_kw: Any) -> Report:
        if submission.parent.parent.name == "mallory":
            time.sleep(60)
        return Report.from_checks(lab_id, [])

    monkeypatch.setattr(grading, "grade", grade)
    started = time.monotonic()
    graded = {g.student: g for g in nbgrader_autograde.autograde(
        root, LAB, contextlib.nullcontext, budget=grading.Budget(time_s=3), students=("ann", "mallory"))}
    assert time.monotonic() - started < 30
    assert graded["ann"].report is not None and graded["ann"].error == ""
    assert graded["mallory"].report is None and "longer than the limit of 3 s" in graded["mallory"].error


def test_collect_names_a_bundle_written_by_another_learner(tmp_path: Path) -> None:
    """`nobody` hands in, in their own folder, an evidence bundle `daemon` wrote (copied from them): it is
    collected (the folder is nobody's) and listed for the instructor, who sees whose work it says it is."""
    import json
    import pwd

    from labs.bench import grading_bench

    require(os.geteuid() == 0, "giving folders to other accounts needs root")
    root = _course(tmp_path)
    cd = layout.ClassDir(tmp_path / "class")
    folder = _inbound(cd, "nobody", "2026-01-15 12:30:00.000000 UTC", "nobody", "copied")
    solved, _ = grading_bench.replay_bundles(LAB, tmp_path / "bundles")
    data = json.loads(solved.read_text())
    data["producer"] = {"uid": pwd.getpwnam("daemon").pw_uid, "user": "daemon", "host": "lab-host",
                        "at": "2026-01-15T12:00:00Z"}
    (folder / "evidence.json").write_text(json.dumps(data))
    nobody = pwd.getpwnam("nobody").pw_uid
    os.lchown(folder / "evidence.json", nobody, nobody)

    course_nbgrader.run_nbgrader(["collect", LAB, "--update"], root)

    assert (root / "submitted" / "nobody" / LAB / "evidence.json").is_file()
    notes = loop.producer_notes(root, LAB)
    assert [n["learner"] for n in notes] == ["nobody"], notes
    assert "produced by daemon" in notes[0]["note"] and "belongs to nobody" in notes[0]["note"]


def test_class_init_makes_the_course_folder_the_instructors_and_names_one_someone_else_made(tmp_path: Path) -> None:
    """Before the first release, a learner could make the course's folder in the 1777 root and put a notebook of
    theirs in its outbound for every learner who fetches; ``class init`` makes the folder the instructor's first,
    and refuses, naming the owner, a folder or link that someone else made."""
    require(os.geteuid() == 0, "giving a folder to another account needs root")
    exchange = tmp_path / "exchange"
    exchange.mkdir(mode=0o1777)
    folder = exchange / "gpulab"
    provision.claim_course_folder(folder, "nobody")
    assert (accounts.owner_name(folder), folder.stat().st_mode & 0o7777) == ("nobody", 0o755)
    provision.claim_course_folder(folder, "nobody")  # class init again: the folder is already the instructor's
    os.chown(folder, 1, 1)  # made by another account (uid 1, daemon on Debian)
    with pytest.raises(errors.ConfigError) as refused:
        provision.claim_course_folder(folder, "nobody")
    assert f"owned by {accounts.owner_name(folder)}, not the instructor nobody's" in str(refused.value.problems)
    folder.rmdir()
    folder.symlink_to(tmp_path)
    with pytest.raises(errors.ConfigError) as linked:
        provision.claim_course_folder(folder, "nobody")
    assert "is a link" in str(linked.value.problems)


def test_release_refuses_a_course_folder_a_learner_made_before_it(tmp_path: Path) -> None:
    """Where the course's folder was made by someone else (no ``class init``: a bare exchange), nbgrader's release
    refuses it and releases nothing into it."""
    require(os.geteuid() == 0, "making a folder of another account's needs root")
    root = _course(tmp_path)
    exchange = tmp_path / "class" / "exchange"
    exchange.chmod(0o1777)
    planted = exchange / "gpulab" / "outbound"
    planted.mkdir(parents=True, mode=0o777)
    for path in (planted.parent, planted):
        os.chown(path, 65534, 65534)
    with pytest.raises(errors.CommandFailed) as failed:
        course_nbgrader.run_nbgrader(["release_assignment", LAB, "--force"], root)
    assert "You don't own the directory" in failed.value.output, failed.value.output
    assert not list(planted.iterdir())
