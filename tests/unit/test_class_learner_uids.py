"""The learners' uids on Kubernetes (course/class/z2jh-values.yaml, hub.extraConfig "gpulab-learner-uids"): the
values' own copy of the rule gives each learner the uid ``labs.classroom.kubeuids.learner_uid`` gives (the one
collect checks), the same as group and fsGroup; instructors keep the exchange owner's uid; the hub refuses to
start a second learner whose name would share a uid. The snippet runs as the chart's hub runs it: ``exec`` with
the hub's ``c``, against JupyterHub's own database models."""

from __future__ import annotations

import hashlib
import random
import string
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from traitlets.config import Config

from labs.classroom import kubeuids

VALUES = Path(__file__).resolve().parents[2] / "course" / "class" / "z2jh-values.yaml"


def _hub_config() -> tuple[Config, dict[str, Any]]:
    code = yaml.safe_load(VALUES.read_text(encoding="utf-8"))["hub"]["extraConfig"]["gpulab-learner-uids"]
    c = Config()
    scope: dict[str, Any] = {"c": c}
    exec(compile(code, "hub.extraConfig.gpulab-learner-uids", "exec"), scope)
    return c, scope


@pytest.fixture()
def db() -> Any:
    from jupyterhub import orm

    session = orm.new_session_factory("sqlite:///:memory:")()
    yield session
    session.close()


def _spawner(db: Any, name: str, groups: tuple[str, ...] = ()) -> Any:
    from jupyterhub import orm

    user = orm.User(name=name)
    db.add(user)
    for group_name in groups:
        group = db.query(orm.Group).filter_by(name=group_name).first() or orm.Group(name=group_name)
        user.groups.append(group)
    db.commit()
    # What the snippet reads of a spawner: its user's name and groups, and the hub's database session.
    return SimpleNamespace(user=SimpleNamespace(name=user.name, groups=user.groups, db=db))


def test_the_values_copy_gives_the_uids_collect_checks() -> None:
    _, scope = _hub_config()
    rng = random.Random(7)
    names = ["ann", "bob", "jovyan", "a.learner@example.org", "ünïcödé", "x" * 255] + [
        "".join(rng.choices(string.ascii_lowercase + string.digits + "-_.@", k=rng.randint(1, 40)))
        for _ in range(2000)]
    for name in names:
        uid = kubeuids.learner_uid(name)
        assert scope["gpulab_learner_uid"](name) == uid, name
        assert kubeuids.LEARNER_UIDS[0] <= uid < kubeuids.LEARNER_UIDS[1] <= 2**31, (name, uid)
    assert scope["GPULAB_LEARNER_UIDS"] == kubeuids.LEARNER_UIDS
    assert scope["GPULAB_INSTRUCTOR_UID"] == kubeuids.INSTRUCTOR_UID
    # Not a number anyone picks: the hash's, so the hub and the grader need no table between them.
    assert kubeuids.learner_uid("ann") == kubeuids.LEARNER_UIDS[0] + int.from_bytes(
        hashlib.sha256(b"ann").digest()[:8], "big") % (kubeuids.LEARNER_UIDS[1] - kubeuids.LEARNER_UIDS[0])


def test_each_learner_runs_as_a_uid_group_and_fsgroup_of_their_own_and_instructors_as_the_exchange_owner(
        db: Any) -> None:
    c, _ = _hub_config()
    ann, bob = _spawner(db, "ann"), _spawner(db, "bob")
    teacher = _spawner(db, "teacher", groups=(kubeuids.INSTRUCTORS_GROUP,))
    ks = c.KubeSpawner
    for spawner, name in ((ann, "ann"), (bob, "bob")):
        uid = kubeuids.learner_uid(name)
        assert (ks.uid(spawner), ks.gid(spawner), ks.fs_gid(spawner)) == (uid, uid, uid)
    assert kubeuids.learner_uid("ann") != kubeuids.learner_uid("bob")
    assert (ks.uid(teacher), ks.gid(teacher), ks.fs_gid(teacher)) == (kubeuids.INSTRUCTOR_UID, 100, 100)


def test_a_second_learner_whose_name_shares_a_uid_is_refused(db: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    c, scope = _hub_config()
    first = _spawner(db, "ann")
    second = _spawner(db, "annie")
    # Two names that meet (a real pair is about one chance in 2 x 10^9): the rule itself, made to collide.
    real = scope["gpulab_learner_uid"]
    monkeypatch.setitem(scope, "gpulab_learner_uid", lambda name: real("ann") if name in ("ann", "annie") else real(name))
    with pytest.raises(ValueError, match="'annie' and 'ann' would run as the same uid"):
        c.KubeSpawner.uid(second)
    with pytest.raises(ValueError, match="'ann' and 'annie'"):
        c.KubeSpawner.uid(first)
    assert c.KubeSpawner.uid(_spawner(db, "bob")) == real("bob")
