"""The sandbox that runs a learner's notebook during autograding: no writes outside its copy, time and memory
limits, and the notebook's own folder left as it was handed in. No cluster: only a kernel."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from labs import sandbox
from prerequisites import require

pytestmark = [pytest.mark.notebooks, pytest.mark.timeout(300)]


def notebook(folder: Path, *cells: str) -> Path:
    import nbformat

    folder.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c, id=f"c{i}") for i, c in enumerate(cells)]
    nbformat.write(nb, str(folder / "n.ipynb"))
    return folder


def outputs(run: sandbox.Run) -> list[list[dict[str, object]]]:
    """Each cell's outputs, with stream text joined (the file format may split it into lines)."""
    assert run.notebook is not None, run.log
    return [[{**o, "text": "".join(o["text"]) if isinstance(o.get("text"), list) else o.get("text")}
             for o in c["outputs"]] for c in run.notebook["cells"]]


def test_a_cell_cannot_write_the_gradebook_or_the_handed_in_folder(tmp_path: Path) -> None:
    require(sandbox.landlock_abi() > 0, "this kernel has no Landlock (the sandbox refuses to run without it)")
    gradebook = tmp_path / "course" / "gradebook.db"
    gradebook.parent.mkdir()
    gradebook.write_bytes(b"SQLite format 3\x00original")
    os.chmod(gradebook, 0o666)  # even a world-writable gradebook is out of reach
    sub = notebook(tmp_path / "course" / "submitted" / "s" / "lab",
                   f"open({str(gradebook)!r}, 'ab').write(b'pwned')",
                   f"import os\nos.remove({str(gradebook)!r})",
                   "open('evidence.json', 'w').write('{}')\nprint('wrote my own copy')",
                   "import labs\nprint(labs.list_labs()[0])")
    run = sandbox.run_notebook(sub, "n.ipynb")
    out = outputs(run)
    assert out[0][0]["ename"] == "PermissionError" and out[1][0]["ename"] == "PermissionError"
    assert out[2][0]["text"] == "wrote my own copy\n"  # its temporary copy, not the handed-in folder
    assert out[3][0]["text"] == "01-device-plugins\n"
    assert gradebook.read_bytes() == b"SQLite format 3\x00original"
    assert not (sub / "evidence.json").exists()


def test_a_notebook_over_its_limits_is_stopped(tmp_path: Path) -> None:
    require(sandbox.landlock_abi() > 0, "this kernel has no Landlock (the sandbox refuses to run without it)")
    sub = notebook(tmp_path / "greedy", "x = bytearray(3 * 1024 ** 3)\nprint('allocated')", "print('next cell ran')")
    out = outputs(sandbox.run_notebook(sub, "n.ipynb", sandbox.Limits(memory_mb=1024)))
    assert out[0][0]["ename"] == "MemoryError" and out[1][0]["text"] == "next cell ran\n"
    slow = notebook(tmp_path / "slow", "import time\nwhile True: time.sleep(1)")
    run = sandbox.run_notebook(slow, "n.ipynb", sandbox.Limits(wall_s=20, cell_timeout_s=600))
    assert run.timed_out and run.notebook is None
