"""A learner takes a quiz through the session and the ipywidgets view: feedback, retries, resume, no tracebacks."""

from __future__ import annotations

from pathlib import Path

import ipywidgets as w
import pytest

import quizzes
from quizzes import bank, errors, model, session, store, testing

pytestmark = pytest.mark.unit
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "quizzes"


@pytest.fixture()
def demo() -> model.Bank:
    return bank.load_bank(FIXTURES / "valid-minimal.yaml")


def test_pre_quiz_allows_one_attempt_and_reveals_the_answer(tmp_path: Path, demo: model.Bank) -> None:
    with store.Store.open(tmp_path / "s.sqlite3") as opened:
        quiz = session.QuizSession(demo, "pre", "ann", opened)
        result = quiz.submit("q3", 11.0)
        assert (result.grade.correct, result.attempts_left, result.finished) == (False, 0, True)
        assert result.grade.feedback == ("The numbers multiply; they do not add.",)
        assert result.reveal == ("The answer is 28 pods.", "7 x 4 = 28.")
        assert quiz.problem_with("q3", 28.0) == "This question is closed: no attempt is left."
        with pytest.raises(errors.QuizError, match="closed"):
            quiz.submit("q3", 28.0)


def test_post_quiz_allows_retries_and_counts_the_best(tmp_path: Path, demo: model.Bank) -> None:
    with store.Store.open(tmp_path / "s.sqlite3") as opened:
        quiz = session.QuizSession(demo, "post", "ann", opened)
        first = quiz.submit("q2", ["a", "k"])
        assert (first.grade.score, first.attempts_left, first.finished, first.reveal) == (0.0, 2, False, ())
        second = quiz.submit("q2", ["a", "e"])
        assert (second.grade.score, second.finished) == (1.0, True)
        points, answered, total = quiz.score()
        assert (points, answered, total) == (1.0, 1, 8)


def test_a_reopened_session_resumes_from_the_store(tmp_path: Path, demo: model.Bank) -> None:
    path = tmp_path / "s.sqlite3"
    with store.Store.open(path) as opened:
        session.QuizSession(demo, "post", "ann", opened).submit("q1", ["b"])
    with store.Store.open(path) as opened:
        again = session.QuizSession(demo, "post", "ann", opened)
        assert [a.response for a in again.attempts("q1")] == [["b"]]
        assert again.attempts_left("q1") == 2
        last = again.last_feedback("q1")
        assert last is not None and last.grade.feedback == ("B is second.",)


def test_a_learner_id_is_required(tmp_path: Path, demo: model.Bank) -> None:
    with store.Store.open(tmp_path / "s.sqlite3") as opened, pytest.raises(errors.QuizError, match="learner id"):
        session.QuizSession(demo, "pre", "  ", opened)


def test_widget_uses_real_focusable_controls(tmp_path: Path) -> None:
    quiz = quizzes.quiz_widget("sharing", "post", "ann", store_path=tmp_path / "s.sqlite3")
    kinds = {v.slot.item.type: v.control for v in quiz.items}
    assert isinstance(kinds[model.ItemType.SINGLE], w.RadioButtons)
    assert isinstance(kinds[model.ItemType.MANIFEST], w.RadioButtons)
    assert isinstance(kinds[model.ItemType.NUMERIC], w.FloatText)
    multiple = kinds[model.ItemType.MULTIPLE]
    assert isinstance(multiple, w.VBox)
    assert all(isinstance(c, w.Checkbox) and c.description for c in multiple.children[1:])
    for view in quiz.items:
        assert isinstance(view.submit, w.Button) and view.submit.description == "Submit answer"
        if isinstance(view.control, w.RadioButtons):
            assert view.control.index is None  # nothing pre-selected
            assert all(label for label, _ in view.control.options)


def test_widget_submit_saves_and_shows_the_explanation(tmp_path: Path, demo: model.Bank) -> None:
    path = tmp_path / "s.sqlite3"
    quiz = quizzes.quiz_widget("demo", "post", "ann", store_path=path, bank_file=FIXTURES / "valid-minimal.yaml")
    view = quiz.view("q1")
    view.submit.click()  # nothing chosen: a learner mistake, said in words
    assert "Choose an option first." in view.feedback.value
    view.control.value = "b"
    view.submit.click()
    assert "Not right." in view.feedback.value and "B is second." in view.feedback.value
    assert "2 attempts left" in view.feedback.value and view.submit.description == "Try again"
    view.control.value = "a"
    view.submit.click()
    assert "Correct." in view.feedback.value and view.submit.disabled and view.control.disabled
    numeric = quiz.view("q3")
    numeric.control.value = 28
    numeric.submit.click()
    assert "7 x 4 = 28." in numeric.feedback.value
    assert "2 of 8 answered" in quiz.summary.value
    with store.Store.read_only(path) as reader:
        assert [(a.item, a.attempt, a.correct) for a in reader.answers()] == [
            ("q1", 1, False), ("q1", 2, True), ("q3", 1, True)]  # fmt: skip


def test_widget_reports_a_store_failure_instead_of_raising(tmp_path: Path, demo: model.Bank) -> None:
    quiz = quizzes.quiz_widget("demo", "pre", "ann", store_path=tmp_path / "s.sqlite3",
                               bank_file=FIXTURES / "valid-minimal.yaml")  # fmt: skip
    quiz.session.store.close()  # the store vanished under the kernel
    view = quiz.view("q1")
    view.control.value = "a"
    view.submit.click()
    assert "could not save the answer" in view.feedback.value


def test_finished_quiz_shows_the_learner_view(tmp_path: Path, demo: model.Bank) -> None:
    path = tmp_path / "s.sqlite3"
    testing.fill_store(path, "ann", [demo], pre_skill=0.0, post_skill=1.0)
    quiz = quizzes.quiz_widget("demo", "post", "ann", store_path=path, bank_file=FIXTURES / "valid-minimal.yaml")
    assert "Your quiz results" in quiz.summary.value and "+1.00" in quiz.summary.value
    assert all(v.submit.disabled for v in quiz.items)


def test_grade_from_store_for_an_nbgrader_test_cell(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    testing.fill_store(path, "ann", [bank.get_bank("dra")], pre_skill=0.0, post_skill=1.0)
    result = quizzes.grade_from_store("dra", phase="post", learner="ann", store_path=path, minimum=0.9)
    pre, post = (len(bank.get_bank("dra").items_for(phase)) for phase in ("pre", "post"))
    assert (result.score, result.answered, result.total, result.points(10)) == (1.0, post, post, 10.0)
    # a wrong multi-select answer of the testing kit may leave one right option ticked, so the pre score is low but
    # not always 0
    low = quizzes.grade_from_store("dra", phase="pre", learner="ann", store_path=path)
    assert low.score < 0.5
    expected = rf"ann scored {100 * low.score:.0f}% on the dra pre-quiz \({pre} of {pre} answered\); 50% is needed"
    with pytest.raises(AssertionError, match=expected):
        quizzes.grade_from_store("dra", phase="pre", learner="ann", store_path=path, minimum=0.5)
    with pytest.raises(AssertionError, match="does not exist"):
        quizzes.grade_from_store("dra", learner="ann", store_path=tmp_path / "none.sqlite3")


def test_grade_from_store_finds_the_only_learner_of_a_submission(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPULAB_LEARNER", raising=False)
    path = tmp_path / "quiz-answers.sqlite3"
    testing.fill_store(path, "student-17", [bank.get_bank("dra")], pre_skill=0.0, post_skill=1.0)
    assert quizzes.grade_from_store("dra", store_path=path).learner == "student-17"
    testing.fill_store(path, "student-18", [bank.get_bank("dra")])
    monkeypatch.setenv("GPULAB_LEARNER", "student-18")
    assert quizzes.grade_from_store("dra", store_path=path).learner == "student-18"


def test_learner_id_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPULAB_LEARNER", "from-env")
    assert quizzes.learner_id() == "from-env"
    assert quizzes.learner_id("given") == "given"
