"""One way per concern (issue 29 item 4), read from the source with ``ast``: each of these has one home, and a
second copy anywhere else in the library fails here. HTTP libraries and ``urllib.request`` are held to
``cluster.kube`` by an import-linter contract too; this test also holds the two modules that contract lets import
``urllib`` to ``urllib.parse``."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("cluster", "graders", "labs", "quizzes")


def _sources() -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
            for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _imported(text: str) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def _attributes(text: str) -> set[str]:
    """Dotted ``a.b`` names used in the module (``difflib.get_close_matches``)."""
    return {f"{n.value.id}.{n.attr}" for n in ast.walk(ast.parse(text))
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}


def test_only_cluster_kube_fetches_urls() -> None:
    """Outside ``cluster/kube/`` no module imports ``urllib.request``, ``urllib.error`` or ``http.client``:
    only ``urllib.parse`` (a URL taken apart, nothing sent)."""
    bad = {path: sorted(m for m in _imported(text) if (m.startswith(("urllib", "http.")) or m == "http")
                        and not m.startswith("urllib.parse"))
           for path, text in _sources().items() if not path.startswith("cluster/kube/")}
    assert {p: m for p, m in bad.items() if m} == {}


def test_did_you_mean_only_through_strict_closest() -> None:
    users = {path for path, text in _sources().items()
             if "difflib.get_close_matches" in _attributes(text) or "difflib.get_close_matches" in _imported(text)}
    assert users == {"cluster/strict.py"}


def test_default_folders_only_in_settings() -> None:
    """The XDG defaults (platformdirs) are chosen in ``cluster/settings.py`` alone."""
    users = {path for path, text in _sources().items() if any(m.startswith("platformdirs") for m in _imported(text))}
    assert users == {"cluster/settings.py"}


def test_the_clusterpolicy_path_is_spelt_once() -> None:
    spelt = {path for path, text in _sources().items() if "nvidia.com/v1/clusterpolicies" in text}
    assert spelt == {"cluster/sim/gpu/names.py"}


def test_one_copy_of_the_payload_accessors() -> None:
    """``as_map``, ``as_list``, ``as_str`` and ``dig`` are defined once (``graders/manifests.py``, ``graders/view.py``)."""
    defined: dict[str, set[str]] = {}
    for path, text in _sources().items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef) and node.name in ("as_map", "as_list", "as_str", "dig"):
                defined.setdefault(node.name, set()).add(path)
    assert defined == {"as_map": {"graders/manifests.py"}, "as_list": {"graders/manifests.py"},
                       "as_str": {"graders/manifests.py"}, "dig": {"graders/view.py"}}


def test_one_polling_loop_for_the_settle_waits() -> None:
    """The four settle loops go through ``cluster.poll.until``; none of them sleeps on its own."""
    sources = _sources()
    for path in ("labs/runtime.py", "labs/grading.py", "labs/replay/settle.py", "graders/live.py"):
        assert "poll.until" in sources[path], path
        assert "time.sleep" not in _attributes(sources[path]), path


def test_one_evaluate_path() -> None:
    """A check's outcome becomes a scored ``Check`` in ``labs.grading.evaluate`` only; ``labs.runtime`` (a
    learner's Check button, kind's graded-on-what-kind-produces) calls it and evaluates no rule itself."""
    sources = _sources()
    assert "rule.evaluate(" not in sources["labs/runtime.py"]
    assert "grading.evaluate(" in sources["labs/runtime.py"]
    scored = {path for path, text in sources.items() if "Check(c.id, outcome.passed" in text
              or "Check(spec.id, outcome.passed" in text}
    assert scored == {"labs/grading.py"}


def test_the_state_record_has_one_reader_and_one_writer() -> None:
    """``state.json`` is spelt, opened and parsed only in ``cluster/staterecord.py`` (issue 29 item 2): the
    backends, ``detect``, the guard and ``safefs`` go through ``staterecord.read``/``write``. The one other
    spelling allowed is ``safefs.STATE_ENTRIES``, the list of names gpulab writes into a state folder."""
    found = {}
    for path, text in _sources().items():
        if path == "cluster/staterecord.py":
            continue
        spelt = [n.lineno for n in ast.walk(ast.parse(text))
                 if isinstance(n, ast.Constant) and n.value == "state.json"]
        if path == "cluster/safefs.py":
            spelt = spelt[1:] if "STATE_ENTRIES" in text else spelt
        if spelt:
            found[path] = spelt
    assert not found, f"state.json named outside cluster/staterecord.py: {found}"
