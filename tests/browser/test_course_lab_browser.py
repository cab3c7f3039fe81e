"""A learner opens a course notebook in a real JupyterLab (Debian Chromium via Playwright), starts the module's lab,
presses its Check button and reads the findings, graded against a real local cluster.

The JupyterLab harness (temporary dirs, token, process-group cleanup) is the quiz browser test's; see
tests/browser/README.md for the prerequisites. The cluster comes up in a private GPULAB_STATE_DIR that the
server's kernels inherit.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

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
    import time

    deadline = time.monotonic() + timeout
    states: list[str] = []
    while time.monotonic() < deadline:
        states = [s["kernel"]["execution_state"] for s in server.api("/api/sessions") if s.get("path", "").endswith(name)]
        if states and all(state == "idle" for state in states):
            return
        time.sleep(0.5)
    pytest.fail(f"the notebook's kernel did not become idle within {timeout:.0f}s (states: {states})")


def test_learner_checks_a_course_lab_in_jupyterlab_and_sees_findings(cluster_env: Path, lab: Lab,
                                                                      tmp_path: Path) -> None:  # fmt: skip
    from playwright.sync_api import expect, sync_playwright

    shutil.copy(COURSE / NOTEBOOK, lab.root / NOTEBOOK)
    spec = labs.get(LAB_ID)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(120_000)
        try:
            page.goto(f"{lab.url}/lab/tree/{NOTEBOOK}?token={lab.token}", wait_until="domcontentloaded")
            page.locator(".jp-Notebook .jp-Cell").first.wait_for(state="visible", timeout=180_000)
            wait_for_idle_kernel(lab, NOTEBOOK)
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
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            print(f"screenshot: {tmp_path / 'failure.png'}\nserver log:\n{lab.log_tail()}")
            raise
        finally:
            browser.close()

    got, possible = map(float, SCORE.search(text).groups())  # type: ignore[union-attr]
    assert possible == spec.max_score and got < possible
    # The untouched lab fails the task-1 checks, each shown with its id and the spec's own hint.
    for check in spec.tasks[0].checks[2:]:
        assert check.id in text
        assert " ".join(check.hint.split())[:60] in " ".join(text.split())
    assert "\u2718" in text  # the failed-check mark
