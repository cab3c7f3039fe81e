"""Knowledge lives where it is owned (issue 29 item 1): the cluster layer offers capabilities and never names
what belongs to a lab. No file under ``cluster/`` spells a lab id, a lab's namespace or a check id of any lab
(the layers contract in pyproject.toml already keeps ``cluster`` from importing ``labs``); what a lab does
differently on kind is in that lab's lab.yaml (``spec.backends.kind``)."""

from __future__ import annotations

import re
from pathlib import Path

import labs

ROOT = Path(__file__).resolve().parents[2]


def _lab_words() -> set[str]:
    words: set[str] = set()
    for lab_id in labs.list_labs():
        spec = labs.get(lab_id)
        words |= {lab_id, *spec.scope.namespaces, *(c.id for c in spec.checks)}
    return words


def test_the_cluster_layer_names_no_lab_id_namespace_or_check() -> None:
    words = _lab_words()
    assert len(words) > 50  # every lab's id, namespaces and checks were read
    pattern = re.compile("|".join(rf"(?<![\w-]){re.escape(w)}(?![\w-])" for w in sorted(words, key=len, reverse=True)))
    found = {}
    for path in sorted((ROOT / "cluster").rglob("*")):
        if path.suffix in (".py", ".yaml", ".yml", ".json", ".go") and path.is_file():
            hits = sorted(set(pattern.findall(path.read_text(encoding="utf-8", errors="replace"))))
            if hits:
                found[str(path.relative_to(ROOT))] = hits
    assert found == {}


def test_a_lab_word_in_the_cluster_layer_would_be_found(tmp_path: Path) -> None:
    """The search above finds a lab word where it stands alone, not inside a longer name."""
    words = _lab_words()
    pattern = re.compile("|".join(rf"(?<![\w-]){re.escape(w)}(?![\w-])" for w in sorted(words, key=len, reverse=True)))
    assert pattern.findall('ON_KIND = {"05-dra": {"burst-job-runs": {}}}') == ["05-dra", "burst-job-runs"]
    assert pattern.findall("xlab-05-dray") == []
