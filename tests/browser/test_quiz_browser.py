"""A learner answers a quiz in a real JupyterLab driven by Chromium, and every answer lands in the SQLite store.

See tests/browser/README.md for the prerequisites (Debian chromium, the playwright python package).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from quizzes import bank
from prerequisites import require

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

CHROMIUM = os.environ.get("GPULAB_CHROMIUM", "/usr/bin/chromium")
SECTION, PHASE, LEARNER = "scheduling", "post", "browser-learner"
FEEDBACK = re.compile(r"Correct\.|Not right\.|Partly right")


@dataclass
class Lab:
    url: str
    token: str
    root: Path
    log: Path

    def api(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.url}{path}?token={self.token}", timeout=10) as response:
            return json.load(response)

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else "(no log)"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_notebook(path: Path, store_path: Path) -> None:
    source = (f"import quizzes\nquizzes.show({SECTION!r}, phase={PHASE!r}, learner={LEARNER!r}, "
              f"store_path={str(store_path)!r})")  # fmt: skip
    notebook = {
        "cells": [{"cell_type": "code", "execution_count": None, "id": "quiz", "metadata": {}, "outputs": [],
                   "source": source}],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }  # fmt: skip
    path.write_text(json.dumps(notebook, indent=1))


@pytest.fixture()
def prerequisites() -> None:
    """Checked before any server starts, so a missing browser is reported first and plainly."""
    require(shutil.which(CHROMIUM) is not None or Path(CHROMIUM).is_file(),
            f"Chromium not found at {CHROMIUM}; install it with: apt-get update && apt-get install -y chromium")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        require(False, "the playwright python package is missing; pip install -e '.[test]' (never playwright install)")


def isolated_env(tmp_path: Path) -> dict[str, str]:
    """The environment for a server and its kernels: Jupyter dirs of its own, no quiz store from the caller."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for var, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"), ("JUPYTER_RUNTIME_DIR", "run"),
                     ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"), ("IPYTHONDIR", "ipython")):  # fmt: skip
        env[var] = str(tmp_path / sub)
    env.pop("GPULAB_QUIZ_DB", None)
    return env


@contextmanager
def serve(cmd: list[str], server: Lab, env: dict[str, str], ready_path: str) -> Iterator[Lab]:
    """Run a server in its own process group until the block ends; always kill the group afterwards."""
    with server.log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=server.root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
    try:
        wait_for_server(server, proc, ready_path)
        yield server
    finally:
        stop(proc)


@pytest.fixture()
def lab(prerequisites: None, tmp_path: Path) -> Iterator[Lab]:
    """JupyterLab on 127.0.0.1, a free port and a random token, in its own temp dirs; always killed after."""
    root = tmp_path / "work"
    root.mkdir()
    port, token = free_port(), secrets.token_hex(16)
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}", "--port-retries=0",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--ServerApp.open_browser=False",
           "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]  # fmt: skip
    if os.geteuid() == 0:  # CI and the dev containers run as root
        cmd.append("--allow-root")
    server = Lab(url=f"http://127.0.0.1:{port}", token=token, root=root, log=tmp_path / "jupyter.log")
    with serve(cmd, server, isolated_env(tmp_path), "/api/status") as started:
        yield started


def wait_for_server(lab: Lab, proc: subprocess.Popen[bytes], ready_path: str, timeout: float = 180.0) -> None:
    """Poll until the server answers ``ready_path`` (any HTTP answer counts when the path has no token check)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the server exited with code {proc.returncode} before it was ready:\n{lab.log_tail()}")
        try:
            with urllib.request.urlopen(f"{lab.url}{ready_path}?token={lab.token}", timeout=10):
                return
        except urllib.error.HTTPError:
            if not lab.token:  # Voila: a 404 for a static path still proves the server is listening
                return
            time.sleep(0.5)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.5)
    pytest.fail(f"the server did not answer within {timeout:.0f}s:\n{lab.log_tail()}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate the server's whole process group (kernels included), escalating to SIGKILL."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)
        except ProcessLookupError:
            pass
    try:  # kernels started by the server live in the same group; make sure none outlives the test
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def wait_for_idle_kernel(lab: Lab, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    states: list[str] = []
    while time.monotonic() < deadline:
        sessions = lab.api("/api/sessions")
        states = [s["kernel"]["execution_state"] for s in sessions if s.get("path", "").endswith("quiz.ipynb")]
        if states and all(state == "idle" for state in states):
            return
        time.sleep(0.5)
    pytest.fail(f"the notebook's kernel did not become idle within {timeout:.0f}s (states: {states}):\n"
                f"{lab.log_tail()}")  # fmt: skip


def stored_rows(store_path: Path) -> list[tuple[str, str, str, str, int, str]]:
    if not store_path.exists():
        return []
    conn = sqlite3.connect(f"{store_path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT learner, section, phase, item, attempt, response FROM answers "
                            "ORDER BY id").fetchall()  # fmt: skip
    finally:
        conn.close()


def answer_question(question: Any, index: int) -> None:
    """Answer one question like a learner: the first one with the keyboard only, the others with the mouse."""
    radios = question.locator("input[type=radio]")
    boxes = question.locator("input[type=checkbox]")
    number = question.locator("input[type=number]")
    submit = question.get_by_role("button", name="Submit answer")
    if radios.count():
        if index == 0:
            radios.first.focus()
            radios.first.press("Space")
        else:
            radios.first.check()
    elif boxes.count():
        boxes.first.check()
    else:
        number.fill("1")
        number.press("Enter")  # FloatText syncs on Enter or blur
    if index == 0:
        submit.focus()
        submit.press("Enter")
    else:
        submit.click()


def test_learner_answers_a_quiz_in_jupyterlab_and_the_store_has_every_answer(lab: Lab, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    store_path = tmp_path / "answers" / "quiz.sqlite3"
    write_notebook(lab.root / "quiz.ipynb", store_path)
    expected_items = {i.id for i in bank.get_bank(SECTION).items_for(PHASE)}

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(90_000)
        try:
            page.goto(f"{lab.url}/lab/tree/quiz.ipynb?token={lab.token}", wait_until="domcontentloaded")
            page.locator(".jp-Notebook .jp-Cell").first.wait_for(state="visible", timeout=180_000)
            wait_for_idle_kernel(lab)
            page.locator(".jp-Notebook .jp-Cell .jp-InputArea-editor").first.click()
            page.keyboard.press("Shift+Enter")
            questions = page.locator(".gpulab-quiz .gq-question")
            expect(questions).to_have_count(len(expected_items), timeout=180_000)
            for index in range(len(expected_items)):
                question = questions.nth(index)
                question.scroll_into_view_if_needed()
                answer_question(question, index)
                expect(question).to_contain_text(FEEDBACK, timeout=60_000)
            expect(page.locator(".gpulab-quiz")).to_contain_text(f"{len(expected_items)} of {len(expected_items)} answered")
            page.screenshot(path=str(tmp_path / "answered.png"), full_page=True)  # kept for a human look
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            print(f"screenshot: {tmp_path / 'failure.png'}\nserver log:\n{lab.log_tail()}")
            raise
        finally:
            browser.close()

    rows = stored_rows(store_path)
    assert {r[3] for r in rows} == expected_items
    assert all(r[:3] == (LEARNER, SECTION, PHASE) and r[4] == 1 for r in rows), rows
    assert len(rows) == len(expected_items)


@pytest.fixture()
def voila(prerequisites: None, tmp_path: Path) -> Iterator[Lab]:
    """Voila serving quiz.ipynb as an app on 127.0.0.1 and a free port; always killed after."""
    require(importlib.util.find_spec("voila") is not None, "voila is missing; pip install -e '.[course]'")
    root = tmp_path / "work"
    root.mkdir()
    store_path = tmp_path / "answers" / "voila.sqlite3"
    write_notebook(root / "quiz.ipynb", store_path)
    port = free_port()
    cmd = [sys.executable, "-m", "voila", "quiz.ipynb", "--no-browser", f"--port={port}", "--Voila.ip=127.0.0.1",
           "--show_tracebacks=True"]  # fmt: skip
    server = Lab(url=f"http://127.0.0.1:{port}", token="", root=root, log=tmp_path / "voila.log")
    with serve(cmd, server, isolated_env(tmp_path), "/voila/static/") as started:
        yield started


def test_the_quiz_works_as_a_voila_app(voila: Lab, tmp_path: Path) -> None:
    """Voila renders the same widgets; one answer submitted in the page is in the store."""
    from playwright.sync_api import expect, sync_playwright

    store_path = tmp_path / "answers" / "voila.sqlite3"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(90_000)
        try:
            page.goto(voila.url, wait_until="domcontentloaded", timeout=180_000)
            question = page.locator(".gpulab-quiz .gq-question.gq-type-single").first
            question.wait_for(state="visible", timeout=180_000)
            answer_question(question, 0)  # keyboard only
            expect(question).to_contain_text(FEEDBACK, timeout=60_000)
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            print(f"screenshot: {tmp_path / 'failure.png'}\nserver log:\n{voila.log_tail()}")
            raise
        finally:
            browser.close()
    rows = stored_rows(store_path)
    assert len(rows) == 1 and rows[0][:3] == (LEARNER, SECTION, PHASE) and rows[0][4] == 1, rows
