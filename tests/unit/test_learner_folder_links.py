"""A learner's folder is hostile: gpulab never writes or reads through a symbolic link in it (``cluster.inside``).

The attempts of the class review: a solution file, an evidence bundle or its temporary file planted as a link to
a stand-in ``~/.bashrc`` (overwritten before), and a linked ``answers.yaml`` whose target's text reached the
check message (read with the grader's rights, shown to the learner)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cluster import errors, inside
from graders import bundle
from labs import catalog, evidence, runtime

LAB = "01-device-plugins"


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "home" / ".bashrc"
    victim.parent.mkdir(parents=True)
    victim.write_text("# the learner's own shell set-up\n")
    return victim


def test_write_replaces_a_link_and_never_writes_its_target(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    folder = tmp_path / "lab"
    folder.mkdir()
    (folder / "answers.yaml").symlink_to(victim)
    inside.write(folder, "answers.yaml", b"new: 1\n")
    assert victim.read_text() == "# the learner's own shell set-up\n"
    assert not (folder / "answers.yaml").is_symlink() and (folder / "answers.yaml").read_bytes() == b"new: 1\n"
    assert sorted(p.name for p in folder.iterdir()) == ["answers.yaml"]  # no temporary file left


def test_a_link_on_the_way_or_a_name_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "lab"
    folder.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (folder / "manifests").symlink_to(tmp_path / "elsewhere")
    for rel in ("manifests/x.yaml", "../x.yaml", "/etc/passwd"):
        with pytest.raises(inside.NotInside):
            inside.write(folder, rel, b"x")
        with pytest.raises(inside.NotInside):
            inside.read(folder, rel, 10)
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_read_never_opens_a_link_and_says_none_for_a_missing_file(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    folder = tmp_path / "lab"
    folder.mkdir()
    (folder / "answers.yaml").symlink_to(victim)
    with pytest.raises(inside.NotInside, match="symbolic link"):
        inside.read(folder, "answers.yaml", 100)
    assert inside.read(folder, "nothing.yaml", 100) is None
    os.mkfifo(folder / "fifo.yaml")  # a FIFO would block a plain open
    with pytest.raises(inside.NotInside, match="not a regular file"):
        inside.read(folder, "fifo.yaml", 100)


def test_grading_leaves_a_linked_file_out_and_never_echoes_its_target(tmp_path: Path) -> None:
    secret = tmp_path / "instructor" / "id_rsa"
    secret.parent.mkdir()
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY----- grader's secret\n")
    spec = catalog.get(LAB)
    folder = tmp_path / "submission"
    folder.mkdir()
    for name in spec.files:
        (folder / name).symlink_to(secret)
    assert evidence.read_files(folder, spec.files) == {}


def test_solving_a_lab_writes_no_file_through_a_link_and_keeps_the_link_in_the_backups(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    spec = catalog.get(LAB)
    work = tmp_path / "work"
    work.mkdir()
    name = spec.files[0]
    (work / name).symlink_to(victim)
    lab = runtime.Lab(spec, work, None)
    lab._copy_files("solution", overwrite=True)
    assert victim.read_text() == "# the learner's own shell set-up\n"
    assert (work / name).read_bytes() == (spec.directory / "solution" / name).read_bytes()
    assert not (work / name).is_symlink()
    kept = list((work / runtime.BACKUPS).glob(f"*/{name}"))
    assert len(kept) == 1 and kept[0].is_symlink()  # the learner's link, as it was


def test_a_linked_backup_folder_is_a_clear_error_and_nothing_is_written_through_it(tmp_path: Path) -> None:
    spec = catalog.get(LAB)
    work = tmp_path / "work"
    work.mkdir()
    (work / spec.files[0]).write_text("# the learner's own work\n")
    (tmp_path / "elsewhere").mkdir()
    (work / runtime.BACKUPS).symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(errors.ConfigError, match="never through a link"):
        runtime.Lab(spec, work, None)._copy_files("solution", overwrite=True)
    assert list((tmp_path / "elsewhere").iterdir()) == []
    assert (work / spec.files[0]).read_text() == "# the learner's own work\n"  # nothing lost


def test_an_evidence_bundle_is_not_written_through_a_link_or_a_planted_temporary_link(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    (work / "evidence.json").symlink_to(victim)
    (work / "evidence.json.tmp").symlink_to(victim)
    bundle.write(work / "evidence.json", {"format": "x"})
    assert victim.read_text() == "# the learner's own shell set-up\n"
    assert not (work / "evidence.json").is_symlink()
