"""A learner opens every course module in JupyterLab (Debian Chromium via Playwright) before running anything: after
the set-up's trust step each saved quiz and lab widget is drawn, a notebook that is not the course's own shows each
widget's fallback instead, no output shows a widget's repr, and JupyterLab does not ask about Jupyter news.

JupyterLab starts as ``make course`` starts it (no news or update flags; the venv's lab settings as the set-up
installs them), with Jupyter folders of its own (the quiz browser test's harness, tests/browser/README.md). No
cluster: nothing runs but the kernels JupyterLab starts on opening a notebook.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from test_quiz_browser import CHROMIUM, Lab, free_port, isolated_env, prerequisites, serve  # noqa: F401

from labs import nboutputs
from quizzes import saved_view

pytestmark = [pytest.mark.browser, pytest.mark.timeout(1200)]

COURSE = Path(__file__).resolve().parents[2] / "course"
MODULES = [p.name for p in nboutputs.notebooks(COURSE)]
NEWS = "Would you like to get notified about official Jupyter news?"
# What showed before: a widget's repr as text, or the widget renderer's own failure lines.
NOT_SHOWN = ("VBox(children=", "HTML(value=", "<style>", "Error displaying widget", "Loading widget...")
UNTRUSTED = "03-scheduling-copy.ipynb"  # a copy that is not the course's own: the trust step leaves it


def widgets(name: str) -> tuple[int, list[str]]:
    """(quiz outputs, the lab titles' headings "Lab ID:") saved in course notebook ``name``."""
    nb = json.loads((COURSE / name).read_text(encoding="utf-8"))
    quizzes, labs = 0, []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            if saved_view.WIDGET_VIEW not in out.get("data", {}):
                continue
            source = "".join(cell["source"])
            if "quizzes.show(" in source:
                quizzes += 1
            else:
                labs.append(source.split('labs.start("', 1)[1].split('"', 1)[0])
    return quizzes, labs


def trust(root: Path, env: dict[str, str]) -> str:
    """The set-up's trust step (`make course` runs it before JupyterLab) for the account whose folders `env` names."""
    done = subprocess.run([str(Path(sys.executable).parent / "gpulab"), "course", "trust", str(root)], env=env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@contextmanager
def jupyterlab(tmp_path: Path, *extra: str, trusted: bool = False) -> Iterator[tuple[Lab, str]]:
    """JupyterLab as `make course` starts it, on a free loopback port with a random token, its own Jupyter folders,
    and the course notebooks copied into its root, with a copy of module 3 that a learner changed beside them;
    the trust step first when ``trusted`` (its output comes with the server)."""
    root = tmp_path / "work"
    root.mkdir()
    for name in MODULES:
        shutil.copy2(COURSE / name, root / name)
    nb = json.loads((COURSE / "03-scheduling.ipynb").read_text(encoding="utf-8"))
    nb["cells"].append({"cell_type": "markdown", "id": "learner-note", "metadata": {}, "source": "my notes"})
    (root / UNTRUSTED).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    env = isolated_env(tmp_path)
    said = trust(root, env) if trusted else ""
    port, token = free_port(), secrets.token_hex(16)
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}", "--port-retries=0",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", *extra]  # fmt: skip
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    server = Lab(url=f"http://127.0.0.1:{port}", token=token, root=root, log=tmp_path / "jupyter.log")
    with serve(cmd, server, env, "/api/status") as started:
        yield started, said


def close_sessions(lab: Lab) -> None:
    """Shut the kernels that opening notebooks started (one per notebook), so ten do not pile up."""
    for session in lab.api("/api/sessions"):
        request = urllib.request.Request(f"{lab.url}/api/sessions/{session['id']}?token={lab.token}", method="DELETE")
        urllib.request.urlopen(request, timeout=30).close()


@contextmanager
def browser_page(lab: Lab, tmp_path: Path) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(120_000)
        try:
            yield page
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            print(f"screenshot: {tmp_path / 'failure.png'}\nserver log:\n{lab.log_tail()}")
            raise
        finally:
            browser.close()


def open_notebook(page: Any, lab: Lab, name: str) -> Any:
    """``name`` opened in a workspace of its own (so earlier notebooks are not restored beside it)."""
    workspace = "fv-" + "".join(c for c in name if c.isalnum())
    page.goto(f"{lab.url}/lab/workspaces/{workspace}/tree/{name}?token={lab.token}", wait_until="domcontentloaded")
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(state="visible", timeout=180_000)
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook")


def shown_outputs(notebook: Any) -> str:
    """The text of every output of the notebook, rendered or not (textContent: off-screen cells count too)."""
    return "\n".join(notebook.locator(".jp-OutputArea-output").all_text_contents())


def test_every_module_opens_with_its_widgets_drawn_and_no_repr_or_news_prompt(prerequisites: None,
                                                                               tmp_path: Path) -> None:
    from playwright.sync_api import expect

    with jupyterlab(tmp_path, trusted=True) as (lab, said):
        assert f"trusted {len(MODULES)} course notebook(s)" in said
        assert f"left untrusted (not the course's own): {lab.root / UNTRUSTED}" in said
        with browser_page(lab, tmp_path) as page:
            seen = {}
            for name in MODULES:
                notebook = open_notebook(page, lab, name)
                quizzes, lab_ids = widgets(name)
                expect(notebook.locator(".jp-OutputArea-output .gpulab-quiz")).to_have_count(quizzes, timeout=120_000)
                for lab_id in lab_ids:
                    expect(notebook.locator(f".jp-OutputArea-output h3:has-text('Lab {lab_id}:')")).to_have_count(1)
                text = shown_outputs(notebook)
                seen[name] = [bad for bad in NOT_SHOWN if bad in text]
                close_sessions(lab)
            assert seen == {name: [] for name in MODULES}
            assert sum(q + len(ls) for q, ls in map(widgets, MODULES)) >= 20  # 29 saved widgets when written
            page.screenshot(path=str(tmp_path / "last-module.png"), full_page=True)  # kept for a human look

            notebook = open_notebook(page, lab, UNTRUSTED)  # not trusted: the fallbacks, as text a learner reads
            quizzes, lab_ids = widgets("03-scheduling.ipynb")
            expect(notebook.get_by_text("Run this cell to take it.", exact=False)).to_have_count(quizzes)
            expect(notebook.locator(".jp-OutputArea-output .gpulab-quiz")).to_have_count(0)
            for lab_id in lab_ids:
                expect(notebook.get_by_text(f"Lab {lab_id}:", exact=False)).to_have_count(1)
            text = shown_outputs(notebook)
            assert [bad for bad in NOT_SHOWN if bad in text] == []
            close_sessions(lab)
            # The news prompt comes a moment after JupyterLab restores; ten notebooks later it would be showing.
            assert page.get_by_text(NEWS).count() == 0


def test_without_the_course_settings_jupyterlab_asks_about_news(prerequisites: None, tmp_path: Path) -> None:
    """The positive control: the same server with an empty lab settings folder shows the prompt the test above
    finds absent, so its absence there is the course's setting and not a prompt the test cannot see."""
    from playwright.sync_api import expect

    (tmp_path / "no-settings").mkdir()
    with jupyterlab(tmp_path, f"--LabApp.app_settings_dir={tmp_path / 'no-settings'}") as (lab, _):
        with browser_page(lab, tmp_path) as page:
            open_notebook(page, lab, MODULES[0])
            expect(page.get_by_text(NEWS)).to_be_visible(timeout=120_000)
            close_sessions(lab)
