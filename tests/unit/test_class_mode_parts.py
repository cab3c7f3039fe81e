"""The parts of one-host class mode that need no hub: what may be released, the hub's config, account names,
the gradebook rows of the class report and its text."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest
from traitlets.config import Config

from cluster import errors
from labs import catalog, course_nbgrader
from labs.classroom import hubconfig, layout, loop, report
from labs.cli import cmd_class

LAB = "01-device-plugins"


def _released(tmp_path: Path) -> Path:
    folder = tmp_path / "release" / LAB
    folder.mkdir(parents=True)
    nbformat.write(course_nbgrader.source_notebook(catalog.get(LAB)), str(folder / f"{LAB}.ipynb"))
    return folder


def test_a_release_of_the_lab_notebook_alone_passes(tmp_path: Path) -> None:
    assert loop.release_problems(_released(tmp_path), LAB) == []


def test_a_release_with_an_evidence_bundle_or_a_solution_cell_is_refused(tmp_path: Path) -> None:
    folder = _released(tmp_path)
    (folder / "evidence.json").write_text("{}")
    nb = json.loads((folder / f"{LAB}.ipynb").read_text())
    nb["cells"][3]["metadata"]["nbgrader"] = {"solution": True, "grade_id": "x", "schema_version": 3}
    (folder / f"{LAB}.ipynb").write_text(json.dumps(nb))
    problems = loop.release_problems(folder, LAB)
    assert any("evidence.json" in p for p in problems)
    assert any("solution" in p for p in problems)


def test_the_hub_config_binds_loopback_uses_pam_groups_and_runs_the_culler(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hubconfig, "proxy_command", lambda: Path("/opt/chp"))
    cd = layout.ClassDir(tmp_path)
    cd.save(layout.ClassSettings(instructor="teach", port=9000, cull_after=120, cull_every=30))
    c = Config()
    exec(compile(hubconfig.render(cd, Path("/opt/rt/bin")), "jupyterhub_config.py", "exec"), {"get_config": lambda: c})
    assert (c.JupyterHub.ip, c.JupyterHub.port, c.JupyterHub.hub_ip, c.JupyterHub.hub_port) == \
        ("127.0.0.1", 9000, "127.0.0.1", 9001)
    assert c.ConfigurableHTTPProxy.api_url == "http://127.0.0.1:9002"
    assert c.ConfigurableHTTPProxy.command == ["/opt/chp"]
    assert c.JupyterHub.authenticator_class == "pam"
    assert c.PAMAuthenticator.allowed_groups == {layout.LEARNERS_GROUP, layout.INSTRUCTORS_GROUP}
    assert c.Authenticator.admin_users == {"teach"}
    assert c.Spawner.cmd == ["/opt/rt/bin/gpulab", "class", "singleuser"]
    assert c.Spawner.environment["GPULAB_CLUSTER_ON_DEMAND"] == "1"
    assert c.Spawner.environment["GPULAB_CLUSTER_AT_LOGIN"] == "0"  # the default: the cluster starts at first use
    cd.save(layout.ClassSettings(instructor="teach", cluster_start="login"))
    early = Config()
    exec(compile(hubconfig.render(cd, Path("/opt/rt/bin")), "jupyterhub_config.py", "exec"),
         {"get_config": lambda: early})
    assert early.Spawner.environment["GPULAB_CLUSTER_AT_LOGIN"] == "1"
    culler = c.JupyterHub.services[0]
    assert culler["name"] == "idle-culler" and "--timeout=120" in culler["command"]
    assert "delete:servers" in c.JupyterHub.load_roles[0]["scopes"]
    report_service = c.JupyterHub.services[1]
    assert report_service["name"] == "class-report" and report_service["url"] == "http://127.0.0.1:9003"
    assert report_service["command"][1:4] == ["class", "report-service", "--dir"]
    assert not any(r.get("services") == ["class-report"] for r in c.JupyterHub.load_roles)  # no extra rights


@pytest.mark.parametrize("name", ["Root", "a+b", "9lives", "x" * 40, "../etc"])
def test_account_names_that_break_paths_or_the_exchange_are_refused(name: str) -> None:
    with pytest.raises(errors.ConfigError):
        layout.check_name(name)


def test_the_report_reads_scores_per_learner_and_lab_from_the_gradebook(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from nbgrader.api import Gradebook

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")  # nbgrader's alembic
    db = tmp_path / "gradebook.db"
    with Gradebook(f"sqlite:///{db}") as gb:
        gb.add_assignment(LAB)
        for student in ("ann", "bob"):
            gb.add_student(student)
        gb.add_submission(LAB, "ann")
    labs, rows = report.gradebook_rows(db, ["ann", "bob", "cat"])
    assert labs == (LAB,)
    assert [(r.learner, r.labs[0].score) for r in rows] == [("ann", 0.0), ("bob", None), ("cat", None)]


def test_the_report_text_lists_every_learner_with_a_dash_for_missing_work() -> None:
    import quizzes
    from quizzes import analysis, report as quiz_report

    banks = list(quizzes.builtin_banks())
    rows = (report.LearnerRow("ann", (report.LabScore(LAB, 3.0, 10.0),)),
            report.LearnerRow("bob", (report.LabScore(LAB, None, 10.0),)))
    rep = report.ClassReport(("ann", "bob"), (LAB,), rows, quiz_report.aggregate(banks, []),
                             analysis.analyse(banks, []), ("a store was unreadable",), 1)
    text = cmd_class.report_text(rep)
    assert "Class of 2 learner(s)" in text
    assert any(line.startswith("ann") and "3/10" in line for line in text.splitlines())
    assert any(line.startswith("bob") and " - " in f" {line} " for line in text.splitlines())
    assert "a store was unreadable" in text


def test_the_cluster_starts_at_login_only_in_class_mode_when_asked_and_only_for_learners(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import grp
    import pwd

    from labs.classroom import ondemand

    me = pwd.getpwuid(os.getuid())
    learners = grp.struct_group(("gpulab-learners", "x", 4242, [me.pw_name]))
    monkeypatch.setattr(grp, "getgrnam", lambda name: learners)
    monkeypatch.delenv(ondemand.ENV, raising=False)
    monkeypatch.setenv(ondemand.AT_LOGIN, "1")
    assert not ondemand.at_login()  # not class mode
    monkeypatch.setenv(ondemand.ENV, "1")
    assert ondemand.at_login()
    monkeypatch.setenv(ondemand.AT_LOGIN, "0")
    assert not ondemand.at_login()  # --cluster-start first-use
    monkeypatch.setenv(ondemand.AT_LOGIN, "1")
    monkeypatch.setattr(grp, "getgrnam", lambda name: grp.struct_group(("gpulab-learners", "x", 4242, [])))
    if me.pw_gid != 4242:
        assert not ondemand.at_login()  # the instructor's server


def test_a_lab_waits_for_a_bring_up_at_login_that_is_still_registering_nodes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CI, stop 31: with ``--cluster-start login`` the learner's kernel found every process of the cluster running
    while ``singleuser``'s bring-up was still registering nodes, and ``labs.start`` read a node that did not exist
    yet (404). ``ensure`` must look at the cluster only once that bring-up lets go of the state folder's lock."""
    import threading
    import time

    from cluster import backends, safefs, settings
    from cluster.backends.base import ComponentStatus
    from cluster.backends.local import LocalBackend
    from labs.classroom import ondemand

    state = tmp_path / "state"
    ups: list[object] = []
    monkeypatch.setattr(LocalBackend, "exists", lambda self: True)
    monkeypatch.setattr(LocalBackend, "components",
                        lambda self: [ComponentStatus(name, True, 1) for name in ("etcd", "kube-apiserver")])
    monkeypatch.setattr(LocalBackend, "up", lambda self, fl, prog, **kw: ups.append(fl))
    with settings.overridden(state_dir=state, cluster_on_demand=True):
        backend = backends.current()
        assert isinstance(backend, LocalBackend)
        backend.claim()
        holding, release = threading.Event(), threading.Event()

        def bring_up() -> None:  # singleuser's thread: processes running, nodes not registered yet
            with safefs.locked(backend.dir, what="gpulab up"):
                holding.set()
                release.wait(10)

        other = threading.Thread(target=bring_up)
        other.start()
        assert holding.wait(10)
        released_at: list[float] = []

        def finish() -> None:
            time.sleep(0.5)
            released_at.append(time.monotonic())
            release.set()

        threading.Thread(target=finish).start()
        ondemand.ensure()
        returned = time.monotonic()
        other.join(10)
    assert released_at and returned >= released_at[0], "ensure returned while the bring-up still held the lock"
    assert ups == []  # the cluster it then found up is not started a second time
