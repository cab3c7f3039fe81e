"""A class on one host, end to end: a real JupyterHub (PAM logins to real system accounts, LocalProcessSpawner,
configurable-http-proxy) with an instructor and three learners, driven in Debian's Chromium.

The instructor logs in and, in nbgrader's formgrader, generates and releases lab 01's assignment (the class's
nbgrader config makes Release refuse anything but the notebook). Each learner logs in, starts lab 01 from the
course notebook (their own lab cluster starts on first use) and presses Check, fetches the assignment from the
Assignments tab, runs its collect cell and submits it there. The instructor, back in formgrader, collects,
presses Autograde for each submission (the class's config grades by replaying the learner's evidence on a
cluster the instructor's server starts; the notebook is not executed, so the lab's comment-only task cells get
no points for an untouched lab), generates and releases feedback. Learners fetch their feedback; the class
report (``gpulab class report`` as root: it reads each learner's answer store with its owner's rights, which
the instructor's account does not have; the instructor opens it in the browser as a hub service, a learner is
refused it) lists the three learners with their scores. Learners take their turns
and stop their servers (from the hub's home page; their clusters stop with them), so one lab cluster runs at a
time, then the instructor's grader cluster.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from class_hub import CHROMIUM, Hub, running_class

from labs.classroom import accounts, hubclient, runtime

pytestmark = [pytest.mark.browser, pytest.mark.timeout(1500)]

LAB = "01-device-plugins"
NOTEBOOK = "course/01-gpu-fundamentals-device-plugins.ipynb"
SCORE = re.compile(rf"{LAB}: (\d+(?:\.\d+)?)/(\d+(?:\.\d+)?)")


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    with running_class(tmp_path_factory.mktemp("class-rt"), "gplrt", 3, browser=True) as running:
        yield running


def _wait_idle(page: object, hub: Hub, user: str, name: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    states: list[str] = []
    while time.monotonic() < deadline:
        resp = page.request.get(f"{hub.url}/user/{user}/api/sessions")  # type: ignore[attr-defined]
        states = [s["kernel"]["execution_state"] for s in resp.json() if s.get("path", "").endswith(name)]
        if states and all(state == "idle" for state in states):
            return
        time.sleep(0.5)
    raise AssertionError(f"{user}'s kernel for {name} did not become idle ({states})")


def _login(page: object, hub: Hub, user: str) -> None:
    page.goto(f"{hub.url}/hub/login")  # type: ignore[attr-defined]
    page.fill("#username_input", user)  # type: ignore[attr-defined]
    page.fill("#password_input", hub.password)  # type: ignore[attr-defined]
    page.click("#login_submit")  # type: ignore[attr-defined]


def _run_cell(page: object, text: str) -> object:
    cell = page.locator(".jp-Notebook:visible .jp-CodeCell", has_text=text).first  # type: ignore[attr-defined]
    cell.scroll_into_view_if_needed()
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")  # type: ignore[attr-defined]
    return cell


def _learner_checks_lab(page: object, hub: Hub, user: str) -> float:
    """Log in, open the course notebook, start the lab, press Check; seconds from login to the lab set up."""
    from playwright.sync_api import expect

    started = time.monotonic()
    _login(page, hub, user)
    page.wait_for_url(f"**/user/{user}/lab**", timeout=120_000)  # type: ignore[attr-defined]
    page.goto(f"{hub.url}/user/{user}/lab/tree/{NOTEBOOK}")  # type: ignore[attr-defined]
    page.locator(".jp-Notebook:visible .jp-Cell").first.wait_for(state="visible", timeout=120_000)  # type: ignore[attr-defined]
    _wait_idle(page, hub, user, Path(NOTEBOOK).name)
    cell = _run_cell(page, f'labs.start("{LAB}")')
    widget = cell.locator(".jp-OutputArea")  # type: ignore[attr-defined]
    expect(widget).to_contain_text(f"Lab {LAB}", timeout=300_000)
    ready = time.monotonic() - started
    widget.get_by_role("button", name="Check").click()
    expect(widget).to_contain_text(SCORE, timeout=180_000)
    expect(widget).to_contain_text("Some checks fail")
    return ready


def _fetch_and_submit(page: object, hub: Hub, user: str) -> None:
    """From the Assignments tab: fetch the released lab, run its collect cell, submit."""
    from playwright.sync_api import expect

    page.goto(f"{hub.url}/user/{user}/lab")  # type: ignore[attr-defined]
    page.locator("#jp-main-dock-panel").wait_for(timeout=120_000)  # type: ignore[attr-defined]
    page.get_by_role("menuitem", name="Nbgrader").click()  # type: ignore[attr-defined]
    page.get_by_role("menuitem", name="Assignment List").click()  # type: ignore[attr-defined]
    released = page.locator("#released_assignments_list")  # type: ignore[attr-defined]
    try:
        expect(released).to_contain_text(LAB, timeout=60_000)
    except AssertionError as failed:
        raise AssertionError(f"{failed}\n{_what_the_learners_nbgrader_lists(page, hub, user)}") from None
    released.get_by_role("button", name="Fetch").click()
    fetched = page.locator("#fetched_assignments_list")  # type: ignore[attr-defined]
    expect(fetched).to_contain_text(LAB, timeout=60_000)
    # The notebook's collect cell writes evidence.json beside it (the lab was started on this learner's cluster).
    page.goto(f"{hub.url}/user/{user}/lab/tree/{LAB}/{LAB}.ipynb")  # type: ignore[attr-defined]
    page.locator(".jp-Notebook:visible .jp-Cell").first.wait_for(state="visible", timeout=120_000)  # type: ignore[attr-defined]
    _wait_idle(page, hub, user, f"{LAB}.ipynb")
    _run_cell(page, "import labs")
    collect = _run_cell(page, "labs.attach(LAB).submit(EVIDENCE)")
    expect(collect.locator(".jp-OutputArea")).to_contain_text("Evidence written", timeout=120_000)  # type: ignore[attr-defined]
    page.get_by_role("menuitem", name="Nbgrader").click()  # type: ignore[attr-defined]
    page.get_by_role("menuitem", name="Assignment List").click()  # type: ignore[attr-defined]
    fetched = page.locator("#fetched_assignments_list")  # type: ignore[attr-defined]
    expect(fetched).to_contain_text(LAB, timeout=60_000)
    fetched.get_by_role("button", name="Submit").first.click()
    expect(page.locator("#submitted_assignments_list")).to_contain_text(LAB, timeout=60_000)  # type: ignore[attr-defined]


def _what_the_learners_nbgrader_lists(page: object, hub: Hub, user: str) -> str:
    """Where an empty Assignments tab comes from: the tab's course button, and what nbgrader's own list says as the
    learner with the server's nbgrader settings (the tab asks the server's nbgrader extension for the same)."""
    course = page.locator("#course_list_default").inner_text()  # type: ignore[attr-defined]
    # nbgrader lists an assignment as fetched, not released, when a folder of its name is in the server's root.
    fetched = page.locator("#fetched_assignments_list").inner_text()  # type: ignore[attr-defined]
    in_home = (accounts.home(user) / LAB).exists()
    listed = accounts.run_as(user, [str(runtime.bin_dir(hub.folder) / "nbgrader"), "list"], check=False,
                             env={"JUPYTER_CONFIG_PATH": str(hub.folder / "jupyter")})
    outbound = sorted(str(p.relative_to(hub.folder)) for p in (hub.folder / "exchange").glob("*/outbound/*"))
    return (f"course button: {course!r}; fetched list: {fetched!r}; ~{user}/{LAB} exists: {in_home}; "
            f"outbound: {outbound}; nbgrader list as {user} (exit {listed.returncode}):\n"
            f"{listed.stdout}{listed.stderr}")


def _stop_from_home(page: object, hub: Hub, user: str) -> None:
    """Stop My Server on the hub's home page; the learner's lab cluster stops with the server."""
    page.goto(f"{hub.url}/hub/home")  # type: ignore[attr-defined]
    page.click("#stop")  # type: ignore[attr-defined]
    deadline = time.monotonic() + 120
    while hub.processes_of(user) and time.monotonic() < deadline:
        time.sleep(1)
    assert not hub.processes_of(user), hub.processes_of(user)


def _formgrader_press(page: object, row: object, column: str, what: str) -> str:
    """Press one of formgrader's row buttons and return the text of its success dialog."""
    row.locator(f"td.{column} a").click()  # type: ignore[attr-defined]
    dialog = page.locator("#success-modal, #error-modal").last  # type: ignore[attr-defined]
    dialog.wait_for(state="visible", timeout=600_000)
    text = dialog.inner_text()
    assert dialog.get_attribute("id") == "success-modal", f"formgrader could not {what}:\n{text}"
    return str(text)


async def _learner_gets_report(hub: Hub) -> int:
    """The HTTP status a logged-in learner gets for the class report page."""
    async with hubclient.HubSession(hub.url, hub.learners[0], hub.password) as session:
        await session.login()
        return (await session.http.request("GET", f"{hub.url}/services/class-report/")).status


def _instructor_page(browser: object, hub: Hub) -> object:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})  # type: ignore[attr-defined]
    page = context.new_page()
    page.set_default_timeout(120_000)
    _login(page, hub, hub.instructor)
    page.wait_for_url(f"**/user/{hub.instructor}/lab**", timeout=120_000)
    return page


def _assignment_row(page: object, hub: Hub) -> object:
    page.goto(f"{hub.url}/user/{hub.instructor}/formgrader/manage_assignments")  # type: ignore[attr-defined]
    row = page.locator("#main-table tr", has_text=LAB).first  # type: ignore[attr-defined]
    row.wait_for(state="visible", timeout=120_000)
    return row


def _instructor_releases(page: object, hub: Hub) -> None:
    from playwright.sync_api import expect

    _formgrader_press(page, _assignment_row(page, hub), "assign", "generate the student version")
    row = _assignment_row(page, hub)
    _formgrader_press(page, row, "release", "release the assignment")
    status = _assignment_row(page, hub).locator("td.status")  # type: ignore[attr-defined]
    expect(status).to_contain_text("released", timeout=60_000)


def _instructor_grades(page: object, hub: Hub) -> dict[str, tuple[float, float]]:
    """Collect, Autograde each submission, generate and release feedback; the scores formgrader shows."""
    from playwright.sync_api import expect

    _formgrader_press(page, _assignment_row(page, hub), "collect", "collect")
    scores: dict[str, tuple[float, float]] = {}
    for user in hub.learners:
        page.goto(f"{hub.url}/user/{hub.instructor}/formgrader/manage_submissions/{LAB}")  # type: ignore[attr-defined]
        row = page.locator("#main-table tr", has_text=user).first  # type: ignore[attr-defined]
        row.wait_for(state="visible", timeout=120_000)
        _formgrader_press(page, row, "autograde", f"autograde {user}")
        page.reload()  # type: ignore[attr-defined]
        score = page.locator("#main-table tr", has_text=user).first.locator("td.score")  # type: ignore[attr-defined]
        expect(score).to_contain_text("/", timeout=60_000)
        got, possible = (float(x) for x in score.inner_text().split("/"))
        scores[user] = (got, possible)
    _formgrader_press(page, _assignment_row(page, hub), "generate-feedback", "generate feedback")
    _formgrader_press(page, _assignment_row(page, hub), "release-feedback", "release feedback")
    return scores


def test_a_class_of_three_runs_labs_submits_and_gets_graded(hub: Hub, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
    try:
        _test_in_browser(browser, hub, tmp_path)
    finally:
        browser.close()
        pw.stop()


def _test_in_browser(browser: object, hub: Hub, tmp_path: Path) -> None:
    instructor = _instructor_page(browser, hub)
    try:
        _instructor_releases(instructor, hub)
    except Exception:
        instructor.screenshot(path=str(tmp_path / "failure-release.png"), full_page=True)  # type: ignore[attr-defined]
        print(f"screenshot in {tmp_path}\nhub log:\n{hub.log_tail()}")
        raise
    exchange = hub.folder / "exchange" / "gpulab" / "outbound" / LAB
    assert sorted(p.name for p in exchange.iterdir()) == [f"{LAB}.ipynb"]  # no solutions, no bundles
    inbound = hub.folder / "exchange" / "gpulab" / "inbound"
    assert not inbound.stat().st_mode & 0o004  # learners cannot list each other's submissions
    listed = accounts.run_as(hub.learners[0], ["ls", str(inbound)], check=False)
    assert listed.returncode != 0, listed.stdout

    # One learner after another, each stopping their server at the end: one lab cluster at a time.
    ready: dict[str, float] = {}
    for user in hub.learners:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})  # type: ignore[attr-defined]
        page = context.new_page()
        page.set_default_timeout(120_000)
        try:
            ready[user] = _learner_checks_lab(page, hub, user)
            assert hub.cluster_processes_of(user), f"{user}'s lab cluster is not running as {user}"
            _fetch_and_submit(page, hub, user)
            _stop_from_home(page, hub, user)
        except Exception:
            page.screenshot(path=str(tmp_path / f"failure-{user}.png"), full_page=True)
            print(f"screenshot in {tmp_path}\nhub log:\n{hub.log_tail()}")
            raise
        context.close()
    print("login to lab ready (browser), seconds:", json.dumps({u: round(s, 1) for u, s in ready.items()}))
    try:
        scores = _instructor_grades(instructor, hub)
    except Exception:
        instructor.screenshot(path=str(tmp_path / "failure-grade.png"), full_page=True)  # type: ignore[attr-defined]
        print(f"screenshot in {tmp_path}\nhub log:\n{hub.log_tail()}")
        raise
    # The negative check: nbgrader's own Autograde would give the untouched lab's comment-only task cells every
    # point; replay grading gives some (the lab's starting state passes a few checks), never all.
    assert set(scores) == set(hub.learners), scores
    for user, (got, possible) in scores.items():
        assert possible > 0 and 0 <= got < possible, (user, got, possible)
    course = accounts.home(hub.instructor) / "course"
    for user in hub.learners:
        assert (course / "feedback" / user / LAB / f"{LAB}.html").is_file()
        fetched = accounts.run_as(user, [str(runtime.bin_dir(hub.folder) / "nbgrader"), "fetch_feedback",
                                         LAB], env={"JUPYTER_CONFIG_PATH": str(hub.folder / "jupyter")}, check=False)
        assert fetched.returncode == 0, fetched.stdout + fetched.stderr
        assert list((accounts.home(user) / LAB / "feedback").rglob(f"{LAB}.html")), fetched.stdout + fetched.stderr

    # Quiz answers in each learner's own store, written as the learner through the quiz session code (the quiz
    # widget's browser test covers answering by hand); the third learner's store claims to be the first's.
    python = str(runtime.bin_dir(hub.folder) / "python")
    for user, who in zip(hub.learners, (*hub.learners[:2], hub.learners[0])):
        code = ("import quizzes; from quizzes import store, testing; testing.fill_store(store.default_path(), "
                f"{who!r}, quizzes.builtin_banks()[:2], seed='class')")
        accounts.run_as(user, [python, "-c", code])

    # The instructor opens the class report in the browser (a hub service, /services/class-report/); a learner is
    # refused it. `gpulab class report` (root) prints the same text.
    instructor.goto(f"{hub.url}/services/class-report/")  # type: ignore[attr-defined]
    page_text = str(instructor.locator("#class-report").inner_text(timeout=120_000))  # type: ignore[attr-defined]
    with ThreadPoolExecutor(1) as other:  # Playwright's sync API holds this thread's event loop
        assert other.submit(asyncio.run, _learner_gets_report(hub)).result() == 403
    report = hub.gpulab("class", "report")
    assert report.returncode == 0, report.stdout + report.stderr
    for text in (page_text, report.stdout):
        assert "Class of 3 learner(s)" in text
        assert "Quizzes: 3 answer store(s) found" in text
        assert f"2 learner(s): {hub.learners[0]}, {hub.learners[1]}" in text  # the forged rows refused
        assert "Left out of the quiz report" in text
    table = page_text.split("Quizzes:")[0]
    rows = [line for line in table.splitlines() if line.startswith(hub.learners)]
    assert len(rows) == 3, page_text
    assert rows == [line for line in report.stdout.split("Quizzes:")[0].splitlines() if line.startswith(hub.learners)]
    for line in rows:  # each learner's lab 01 score: the untouched lab gets some, never all, of its points
        score = line.split()[1]
        got, possible = map(float, score.split("/"))
        assert 0 <= got < possible, line
