"""Who produced an evidence bundle: written from the system, read back as a claim shown beside the file's owner.

``bundle.write`` records the writing process (uid, account, host, UTC time) whatever the data says; a forged
producer is not trusted but noted against the file's owner by the system's word; bundles from before the
producer existed (versions 1 and 2 without one) still load, with no producer.
"""

from __future__ import annotations

import json
import os
import pwd
import socket
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from graders import bundle, producer
from live_factories import bundle_data

pytestmark = pytest.mark.unit

ME = os.getuid()


def _name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return "no account"


def _other_uid() -> int:
    """A uid that is not this process's (one with an account when there is one)."""
    return next((e.pw_uid for e in pwd.getpwall() if e.pw_uid != ME), ME + 1)


def test_write_records_the_producer_from_the_system(tmp_path: Path) -> None:
    """What the learner's data says about its producer is replaced by what the system says about the writer."""
    forged = {"uid": 0, "user": "root", "host": "grader", "at": "2020-01-01T00:00:00Z"}
    before = datetime.now(timezone.utc).replace(microsecond=0)
    path = bundle.write(tmp_path / "evidence.json", {**bundle_data(), "producer": forged})
    written = json.loads(path.read_text())["producer"]
    assert written["uid"] == ME and written["user"] == pwd.getpwuid(ME).pw_name
    assert written["host"] == socket.gethostname()
    at = datetime.strptime(written["at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert before <= at <= datetime.now(timezone.utc) + timedelta(seconds=1)
    assert bundle.load(path).producer == producer.Producer(**written)
    assert bundle.owner_note(path) == ""  # written by the file's owner: nothing to say


def test_a_forged_producer_is_noted_beside_the_owner(tmp_path: Path) -> None:
    path = bundle.write(tmp_path / "evidence.json", bundle_data())
    data = json.loads(path.read_text())
    other = _other_uid()
    data["producer"].update(uid=other, user="bob")
    path.write_bytes(bundle.dumps(data))
    assert bundle.owner_note(path) == (f"the evidence bundle says it was produced by bob (uid {other}), "
                                       f"but the file belongs to {_name(ME)} (uid {ME})")
    data["producer"].update(uid=ME, user="bob")  # the right uid under another name
    path.write_bytes(bundle.dumps(data))
    assert bundle.owner_note(path) == (f"the evidence bundle says it was produced by bob (uid {ME}), "
                                       f"but uid {ME} is {_name(ME)}")
    claim = bundle.loads(bundle.dumps(data)).producer
    assert producer.note(claim, other).endswith(f"but the file belongs to {_name(other)} (uid {other})")


def test_the_owner_is_read_without_following_a_link(tmp_path: Path) -> None:
    real = bundle.write(tmp_path / "real.json", bundle_data())
    data = json.loads(real.read_text())
    data["producer"].update(uid=_other_uid(), user="bob")
    real.write_bytes(bundle.dumps(data))
    (tmp_path / "evidence.json").symlink_to(real)
    assert bundle.owner_note(tmp_path / "evidence.json") == ""  # a link is not a bundle here: collect refuses it
    assert bundle.owner_note(tmp_path / "missing.json") == "" and bundle.owner_note(tmp_path) == ""


@pytest.mark.parametrize("version", [1, 2])
def test_an_old_bundle_without_a_producer_loads(tmp_path: Path, version: int) -> None:
    old = bundle_data()
    old["bundleVersion"] = version
    if version == 1:
        old.pop("actions")
    path = tmp_path / "old.json"
    path.write_bytes(bundle.dumps(old))
    loaded = bundle.load(path)
    assert loaded.producer is None and loaded.version == version
    assert bundle.dumps(loaded.to_dict()) == path.read_bytes()
    assert bundle.owner_note(path) == ("the evidence bundle does not say who produced it; "
                                       f"the file belongs to {_name(ME)} (uid {ME})")
