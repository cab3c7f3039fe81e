"""A lab's ``spec.backends.kind`` (what kind grades instead of a check it cannot produce) is read strictly by
``labs.loader``: an unknown field, a check the lab does not have, a capability kind does not lack (with a
did-you-mean), a missing or needless ``then``, and a ``gradedOn`` that is not one cluster check are each reported,
all at once, with their paths."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from ruamel.yaml import YAML

import labs
from cluster import errors
from labs import loader


def _with_backends(tmp_path: Path, lab_id: str, backends: object) -> Path:
    folder = tmp_path / lab_id
    shutil.copytree(labs.get(lab_id).directory, folder)
    yaml = YAML(typ="safe", pure=True)
    doc = yaml.load((folder / "lab.yaml").read_text(encoding="utf-8"))
    doc["spec"]["backends"] = backends
    with (folder / "lab.yaml").open("w", encoding="utf-8") as f:
        yaml.dump(doc, f)
    return folder


def test_the_shipped_differences_load_as_cluster_checks() -> None:
    spec = labs.get("05-dra")
    assert set(spec.backends["kind"]) == {"workers-run-on-the-a100s", "burst-job-runs"}
    d = spec.backends["kind"]["burst-job-runs"]
    assert d.lacks == "dra-kubelet-plugin" and d.then == "" and not d.only and d.rule.cluster


def test_every_problem_is_reported_with_its_path(tmp_path: Path) -> None:
    folder = _with_backends(tmp_path, "05-dra", {
        "kind": {
            "no-such-check": {"lacks": "dra-kubelet-plugin", "gradedOn": {"pod": {"namespace": "lab-05", "name": "x"}}},
            "burst-job-runs": {"lacks": "dra-kubelet-plugn", "gradedOn": {"pod": {"namespace": "lab-05", "name": "x"}},
                               "extra": 1},
            "workers-run-on-the-a100s": {"lacks": "topology-manager-admission",
                                         "gradedOn": {"pod": {"namespace": "lab-05", "name": "x"}, "lint": {}}},
        },
        "local": {},
    })
    with pytest.raises(errors.ConfigError) as caught:
        loader.load(folder)
    said = "\n".join(caught.value.problems)
    assert "spec.backends.local: unknown field (allowed: kind)" in said
    assert "spec.backends.kind.no-such-check: 'no-such-check' is not a check of this lab" in said
    assert "spec.backends.kind.burst-job-runs.extra: unknown field" in said
    assert "did you mean 'dra-kubelet-plugin'?" in said
    assert "spec.backends.kind.workers-run-on-the-a100s.then: is needed" in said
    assert "spec.backends.kind.workers-run-on-the-a100s.gradedOn: needs exactly one check kind" in said


def test_a_then_the_reason_does_not_use_is_refused(tmp_path: Path) -> None:
    folder = _with_backends(tmp_path, "05-dra", {"kind": {"burst-job-runs": {
        "lacks": "dra-kubelet-plugin", "then": "it runs", "only": "yes",
        "gradedOn": {"pod": {"namespace": "lab-05", "name": "burst-job"}}}}})
    with pytest.raises(errors.ConfigError) as caught:
        loader.load(folder)
    said = "\n".join(caught.value.problems)
    assert "spec.backends.kind.burst-job-runs.then: is not used by this reason" in said
    assert "spec.backends.kind.burst-job-runs.only: must be true or false" in said
