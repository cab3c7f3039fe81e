"""The set-up trusts the course notebooks as shipped, for the account that opens them: JupyterLab's own contents
manager, reading that account's signature store, marks every cell trusted (so saved widgets are drawn); a copy a
learner changed, a link, and another account's store are not trusted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from labs import nboutputs, nbtrust
from labs.cli import main as cli_main

pytestmark = pytest.mark.unit

SHIPPED = nboutputs.notebooks()


def opened_trusted(path: Path, store: Path) -> bool:
    """Whether JupyterLab's server, with ``store`` as its account's Jupyter data folder, serves ``path`` with
    every cell trusted (what lets the front end draw a widget view)."""
    from jupyter_server.services.contents.filemanager import FileContentsManager
    from nbformat.sign import NotebookNotary

    with NotebookNotary(data_dir=str(store)) as notary:
        manager = FileContentsManager(root_dir=str(path.parent), notary=notary)
        cells = manager.get(path.name)["content"]["cells"]
        return all(c["metadata"].get("trusted") for c in cells if c["cell_type"] == "code")


def test_every_shipped_notebook_is_trusted_for_the_account_and_for_no_other(tmp_path: Path) -> None:
    done = nbtrust.sign(nboutputs.COURSE, tmp_path / "mine")
    assert list(done.signed) == SHIPPED and done.left == () and len(SHIPPED) == 9
    assert all(nbtrust.is_trusted(p, tmp_path / "mine") for p in SHIPPED)
    assert opened_trusted(SHIPPED[-1], tmp_path / "mine")  # as JupyterLab's server sees it (a few s a notebook)
    (tmp_path / "other").mkdir()  # another account: its own secret, no signatures of ours
    assert not opened_trusted(SHIPPED[1], tmp_path / "other")
    assert not nbtrust.is_trusted(SHIPPED[1], tmp_path / "nobody") and not (tmp_path / "nobody").exists()
    assert oct((tmp_path / "mine").stat().st_mode & 0o777) == "0o700"
    assert oct((tmp_path / "mine" / "notebook_secret").stat().st_mode & 0o777) == "0o600"


def test_a_changed_copy_or_a_link_is_left_untrusted(tmp_path: Path) -> None:
    copies = tmp_path / "course"
    copies.mkdir()
    unchanged, changed, linked = SHIPPED[1], SHIPPED[2], SHIPPED[3]
    shutil.copy2(unchanged, copies / unchanged.name)
    nb = json.loads(changed.read_text(encoding="utf-8"))
    nb["cells"].append({"cell_type": "markdown", "id": "added", "metadata": {}, "source": "<script>x()</script>"})
    (copies / changed.name).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (copies / linked.name).symlink_to(linked)
    done = nbtrust.sign(copies, tmp_path / "store")
    assert [p.name for p in done.signed] == [unchanged.name]
    assert sorted(p.name for p in done.left) == sorted([changed.name, linked.name])
    assert opened_trusted(copies / unchanged.name, tmp_path / "store")
    assert not opened_trusted(copies / changed.name, tmp_path / "store")


def test_the_command_make_course_runs(tmp_path: Path) -> None:
    copies = tmp_path / "course"
    shutil.copytree(nboutputs.COURSE, copies, ignore=shutil.ignore_patterns("nbgrader", "class"))
    (copies / SHIPPED[0].name).write_text("{}", encoding="utf-8")
    result = CliRunner().invoke(cli_main.cli, ["course", "trust", str(copies), "--data-dir", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"trusted 8 course notebook(s) for this account ({tmp_path / 'd' / 'nbsignatures.db'})"
    assert lines[1:] == [f"left untrusted (not the course's own): {copies / SHIPPED[0].name}"]
