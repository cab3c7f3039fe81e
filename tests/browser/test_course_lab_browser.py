"""A learner opens a course notebook in a real JupyterLab (Debian Chromium via Playwright), starts the module's lab,
presses its Check button and reads the findings, graded against a real local cluster.

The JupyterLab harness (temporary dirs, token, process-group cleanup) is the quiz browser test's; see
tests/browser/README.md for the prerequisites. The cluster comes up in a private GPULAB_STATE_DIR that the
server's kernels inherit.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from test_quiz_browser import CHROMIUM, Lab, lab, prerequisites, require  # noqa: F401  (fixtures reused)

import labs
from cluster import binaries, fleet as fleet_mod
from cluster.backends.local import LocalBackend
from cluster.progress import LogProgress

pytestmark = [pytest.mark.browser, pytest.mark.timeout(1200)]

COURSE = Path(__file__).resolve().parents[2] / "course"
NOTEBOOK = "01-gpu-fundamentals-device-plugins.ipynb"
LAB_ID = "01-device-plugins"
SCORE = re.compile(rf"{LAB_ID}: (\d+(?:\.\d+)?)/(\d+(?:\.\d+)?)")


@pytest.fixture(scope="module")
def cluster_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A local cluster whose state dir (and lab folder) the JupyterLab server and its kernels inherit."""
    require(binaries.cached() is not None, "control-plane binaries are missing; run: gpulab binaries ensure")
    root = tmp_path_factory.mktemp("browser-lab")
    saved = {k: os.environ.get(k) for k in ("GPULAB_STATE_DIR", "GPULAB_LABS_DIR", "GPULAB_LEARNER")}
    os.environ.update({"GPULAB_STATE_DIR": str(root / "state"), "GPULAB_LABS_DIR": str(root / "labs"),
                       "GPULAB_LEARNER": "browser-learner"})  # fmt: skip
    backend = LocalBackend("gpulab", root / "state")
    backend.up(fleet_mod.load("starter"), LogProgress())
    try:
        yield root
    finally:
        backend.down(purge=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def wait_for_idle_kernel(server: Lab, name: str, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    states: list[str] = []
    while time.monotonic() < deadline:
        states = [s["kernel"]["execution_state"] for s in server.api("/api/sessions") if s.get("path", "").endswith(name)]
        if states and all(state == "idle" for state in states):
            return
        time.sleep(0.5)
    pytest.fail(f"the notebook's kernel did not become idle within {timeout:.0f}s (states: {states})")


@contextmanager
def notebook_page(lab: Lab, name: str, tmp_path: Path) -> Iterator[Any]:
    """Chromium showing notebook ``name`` in JupyterLab with its (new) kernel idle; a screenshot and the server
    log on failure; the browser always closed."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(120_000)
        try:
            page.goto(f"{lab.url}/lab/tree/{name}?token={lab.token}", wait_until="domcontentloaded")
            page.locator(".jp-Notebook .jp-Cell").first.wait_for(state="visible", timeout=180_000)
            wait_for_idle_kernel(lab, name)
            yield page
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            print(f"screenshot: {tmp_path / 'failure.png'}\nserver log:\n{lab.log_tail()}")
            raise
        finally:
            browser.close()


def test_learner_checks_a_course_lab_in_jupyterlab_and_sees_findings(cluster_env: Path, lab: Lab,
                                                                      tmp_path: Path) -> None:  # fmt: skip
    from playwright.sync_api import expect

    shutil.copy(COURSE / NOTEBOOK, lab.root / NOTEBOOK)
    spec = labs.get(LAB_ID)
    with notebook_page(lab, NOTEBOOK, tmp_path) as page:
        cell = page.locator(".jp-Notebook .jp-CodeCell", has_text=f'labs.start("{LAB_ID}")')
        cell.scroll_into_view_if_needed()
        cell.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        widget = cell.locator(".jp-OutputArea")
        expect(widget).to_contain_text(f"Lab {LAB_ID}", timeout=300_000)
        expect(widget).to_contain_text(spec.tasks[0].title)
        widget.get_by_role("button", name="Check").click()
        expect(widget).to_contain_text(SCORE, timeout=180_000)
        expect(widget).to_contain_text("Some checks fail: read the hints below.")
        text = widget.inner_text()
        page.screenshot(path=str(tmp_path / "checked.png"), full_page=True)  # kept for a human look

    got, possible = map(float, SCORE.search(text).groups())  # type: ignore[union-attr]
    assert possible == spec.max_score and got < possible
    # The untouched lab fails the task-1 checks, each shown with its id and the spec's own hint.
    for check in spec.tasks[0].checks[2:]:
        assert check.id in text
        assert " ".join(check.hint.split())[:60] in " ".join(text.split())
    assert "\u2718" in text  # the failed-check mark


def lab_sections(nb: dict[str, Any]) -> list[tuple[str, int]]:
    """(lab id, number of code cells) for each ``labs.start`` cell and the code cells after it, up to the next
    markdown cell: what a learner who jumps straight to the lab runs."""
    cells = nb["cells"]
    out = []
    for i, cell in enumerate(cells):
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        found = START.search(src) if cell["cell_type"] == "code" else None
        if found:
            count = 1
            for later in cells[i + 1:]:
                if later["cell_type"] != "code":
                    break
                count += 1
            out.append((found.group(1), count))
    return out


START = re.compile(r"labs\.start\(\s*['\"]([\w-]+)['\"]")
WITH_LABS = [p.name for p in sorted(COURSE.glob("[0-9][0-9]*-*.ipynb"))
             if lab_sections(json.loads(p.read_text(encoding="utf-8")))]


@pytest.mark.parametrize("name", WITH_LABS)
def test_only_the_lab_cells_run_in_a_fresh_kernel_without_errors(name: str, cluster_env: Path, lab: Lab,
                                                                  tmp_path: Path) -> None:  # fmt: skip
    """Each notebook opened in JupyterLab with a new kernel; only its lab cells run (no cell above them), and the
    saved notebook has no error output and a report for every lab."""
    nb = json.loads((COURSE / name).read_text(encoding="utf-8"))
    for cell in nb["cells"]:  # a clean copy: saved outputs would hide what this run prints
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    (lab.root / name).write_text(json.dumps(nb))
    sections = lab_sections(nb)
    with notebook_page(lab, name, tmp_path) as page:
        for lab_id, count in sections:
            cell = page.locator(".jp-Notebook .jp-CodeCell", has_text=f'labs.start("{lab_id}")')
            cell.scroll_into_view_if_needed()
            cell.locator(".jp-InputArea-editor").click()
            for _ in range(count):
                page.keyboard.press("Shift+Enter")
                time.sleep(1.0)  # let the kernel turn busy before waiting for idle
                wait_for_idle_kernel(lab, name, timeout=600)
        deadline = time.monotonic() + 120
        saved: dict[str, Any] = {}
        while time.monotonic() < deadline:  # save (again, if a busy machine swallowed the keypress) until on disk
            page.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
            page.keyboard.press("Escape")
            page.keyboard.press("Control+s")
            for _ in range(20):
                time.sleep(0.5)
                saved = json.loads((lab.root / name).read_text(encoding="utf-8"))
                if any(c.get("execution_count") for c in saved["cells"] if c["cell_type"] == "code"):
                    break
            else:
                continue
            break

    ran = [c for c in saved["cells"] if c["cell_type"] == "code" and c.get("execution_count")]
    assert len(ran) == sum(n for _, n in sections), f"{name}: ran {len(ran)} cells"
    errors = [o for c in ran for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{name}: {[(e['ename'], e['evalue']) for e in errors]}"
    stderr = "".join("".join(o.get("text", "")) for c in ran for o in c.get("outputs", []) if o.get("name") == "stderr")
    assert "Traceback" not in stderr, stderr[-2000:]
    html = "".join("".join(o.get("data", {}).get("text/html", "")) for c in ran for o in c.get("outputs", []))
    if any(".check(" in "".join(c["source"]) for c in ran):  # a check cell right under the lab's start cell
        assert html.count("&#10008;") + html.count("&#10004;") > 0, f"{name}: no lab report rendered"
