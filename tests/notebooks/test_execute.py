"""Every course notebook executes headless (nbclient) against a real local cluster, in course order, without errors,
and prints what its saved outputs show (``labs.nboutputs``: ages, UIDs and times masked).

The notebooks run in course order, as a learner runs them: the first brings the lab cluster up itself, in a private
state root (``labs.nboutputs.course_run``), with a private quiz store and lab folder. Quiz and lab cells only render
widgets, so nothing waits for a person. Besides "no cell raised", each notebook must show what it is for:
figures as PNGs, and for module notebooks a graded lab report.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster import binaries
from labs import nboutputs
from prerequisites import require

pytestmark = [pytest.mark.notebooks, pytest.mark.timeout(1800)]

COURSE = Path(__file__).resolve().parents[2] / "course"
NOTEBOOKS = [p.name for p in nboutputs.notebooks(COURSE)]
CELL_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def course_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A started local cluster and the environment the notebooks' kernels run with (``labs.nboutputs``)."""
    try:
        import nbclient  # noqa: F401
    except ImportError:
        require(False, "nbclient is missing; pip install -e '.[course]'")
    require(binaries.cached() is not None, "control-plane binaries are missing; run: gpulab binaries ensure")
    with nboutputs.course_run(tmp_path_factory.mktemp("notebooks")) as (work, env):
        yield {**env, "workdir": str(work)}


def execute(path: Path, env: dict[str, str]) -> tuple[Any, float]:
    return nboutputs.execute(path, Path(env["workdir"]), {k: v for k, v in env.items() if k != "workdir"},
                             timeout=CELL_TIMEOUT_S)


def outputs(nb: Any, mime: str) -> list[str]:
    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if mime in data:
                found.append(data[mime])
    return found


def stream_text(nb: Any) -> str:
    return "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "stream")


def test_notebooks_are_found() -> None:
    assert NOTEBOOKS[0] == "00-start-here.ipynb" and len(NOTEBOOKS) == 9, NOTEBOOKS


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_executes_against_the_lab_cluster(name: str, course_env: dict[str, str], tmp_path: Path) -> None:
    from nbclient.exceptions import CellExecutionError

    try:
        nb, elapsed = execute(COURSE / name, course_env)
    except CellExecutionError as exc:
        pytest.fail(f"{name}: a cell failed:\n{str(exc)[-4000:]}")
    print(f"{name}: executed in {elapsed:.0f} s")
    saved = json.loads((COURSE / name).read_text(encoding="utf-8"))
    drifted = nboutputs.drift(name, saved, nb)
    for d in drifted:
        print(f"drift (reported): {d}")
    stale = [d for d in drifted if d.cell < 0] or (drifted if len(drifted) > nboutputs.RACES_TOLERATED else [])
    assert not stale, ("saved outputs no longer match what the cells print; if the change is meant, run "
                       "`gpulab course outputs --write` and commit:\n" + "\n\n".join(map(str, drifted[:5])))
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    text = stream_text(nb)
    assert "Traceback" not in text
    if name.startswith("00"):
        assert "t4-0" in text and "a100-1" in text  # kubectl reached the cluster the fixture started
        return
    # A module: pre- and post-quiz widgets, the lab widget, and a graded report with the lab's checks (the
    # capstone has no quiz of its own: its lab widget only).
    widgets = outputs(nb, "application/vnd.jupyter.widget-view+json")
    wanted = 1 if "capstone" in name else 3
    assert len(widgets) >= wanted, f"{name}: expected quiz and lab widgets, found {len(widgets)}"
    reports = [h for h in outputs(nb, "text/html") if "&#10008;" in h or "&#10004;" in h]
    assert reports, f"{name}: no lab report was rendered"
    if name.startswith(("01", "02", "03", "04", "05", "06")):
        assert outputs(nb, "image/png"), f"{name}: its figures were not drawn"
    shutil.rmtree(tmp_path, ignore_errors=True)
