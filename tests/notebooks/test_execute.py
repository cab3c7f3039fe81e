"""Every course notebook executes headless (nbclient) against a real local cluster, in course order, without errors.

One local control plane with the starter fleet serves the whole module, in a private GPULAB_STATE_DIR; the
kernels get its KUBECONFIG, a private quiz store and a private lab folder. Quiz and lab cells only render
widgets, so nothing waits for a person. Besides "no cell raised", each notebook must show what it is for:
figures as PNGs, and for module notebooks a graded lab report.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster import binaries, fleet as fleet_mod
from cluster.backends.local import LocalBackend
from cluster.progress import LogProgress
from prerequisites import require

pytestmark = [pytest.mark.notebooks, pytest.mark.timeout(1800)]

COURSE = Path(__file__).resolve().parents[2] / "course"
NOTEBOOKS = sorted(p.name for p in COURSE.glob("[0-9][0-9]*-*.ipynb"))
CELL_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def course_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A started local cluster and the environment the notebooks' kernels run with."""
    try:
        import nbclient  # noqa: F401
    except ImportError:
        require(False, "nbclient is missing; pip install -e '.[course]'")
    require(binaries.cached() is not None, "control-plane binaries are missing; run: gpulab binaries ensure")
    root = tmp_path_factory.mktemp("notebooks")
    state = root / "state"
    saved = {k: os.environ.get(k) for k in ("GPULAB_STATE_DIR", "KUBECONFIG", "GPULAB_QUIZ_DB", "GPULAB_LEARNER",
                                            "GPULAB_LABS_DIR")}  # fmt: skip
    os.environ["GPULAB_STATE_DIR"] = str(state)
    backend = LocalBackend("gpulab", state)
    backend.up(fleet_mod.load("starter"), LogProgress())
    env = {
        "GPULAB_STATE_DIR": str(state),
        "KUBECONFIG": str(backend.kubeconfig()),
        "GPULAB_QUIZ_DB": str(root / "quiz.sqlite3"),
        "GPULAB_LEARNER": "notebook-ci",
        "GPULAB_LABS_DIR": str(root / "labs"),
    }
    os.environ.update(env)  # the kernels inherit this process's environment
    try:
        yield {**env, "workdir": str(root / "work")}
    finally:
        backend.down(purge=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def execute(path: Path, workdir: Path) -> tuple[Any, float]:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(str(path), as_version=4)
    workdir.mkdir(parents=True, exist_ok=True)
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(workdir)}})  # fmt: skip
    started = time.monotonic()
    client.execute()
    return nb, time.monotonic() - started


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
    assert NOTEBOOKS[0] == "00-start-here.ipynb" and len(NOTEBOOKS) == 8, NOTEBOOKS


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_executes_against_the_lab_cluster(name: str, course_env: dict[str, str], tmp_path: Path) -> None:
    from nbclient.exceptions import CellExecutionError

    try:
        nb, elapsed = execute(COURSE / name, Path(course_env["workdir"]))
    except CellExecutionError as exc:
        pytest.fail(f"{name}: a cell failed:\n{str(exc)[-4000:]}")
    print(f"{name}: executed in {elapsed:.0f} s")
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    text = stream_text(nb)
    assert "Traceback" not in text
    if name.startswith("00"):
        assert "t4-0" in text and "a100-1" in text  # kubectl reached the cluster the fixture started
        return
    # A module: pre- and post-quiz widgets, the lab widget, and a graded report with the lab's checks.
    widgets = outputs(nb, "application/vnd.jupyter.widget-view+json")
    assert len(widgets) >= 3, f"{name}: expected quiz and lab widgets, found {len(widgets)}"
    reports = [h for h in outputs(nb, "text/html") if "&#10008;" in h or "&#10004;" in h]
    assert reports, f"{name}: no lab report was rendered"
    if name.startswith(("01", "02", "03", "04", "05", "06")):
        assert outputs(nb, "image/png"), f"{name}: its figures were not drawn"
    shutil.rmtree(tmp_path, ignore_errors=True)
