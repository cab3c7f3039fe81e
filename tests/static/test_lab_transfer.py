"""Labs ask for transfer: no lab is solvable by copying a code cell of its module, and at most 20 % of a lab's
points come from answers the learner merely writes down (``labs.audit``; ``gpulab lab audit`` prints the same).

``NOT_YET`` names the labs still being reworked, with what the audit finds today; it must stay exact (a lab that
passes must leave the list), so the list only shrinks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from labs import audit, catalog

NOT_YET: dict[str, str] = {
}

POD = """apiVersion: v1
kind: Pod
metadata: {name: demo, namespace: m01}
spec:
  containers:
  - name: cuda
    image: nvidia/cuda:12.4.1-base-ubuntu22.04
    resources: {limits: {nvidia.com/gpu: 1}}
"""
CONFIG = """apiVersion: v1
kind: ConfigMap
metadata: {name: demo-config, namespace: gpu-operator}
data:
  shared: |-
    version: v1
    sharing:
      timeSlicing:
        resources:
        - {name: nvidia.com/gpu, replicas: 4}
"""


def _notebook(folder: Path, *cells: str) -> Path:
    nb = {"cells": [{"cell_type": "code", "source": c, "metadata": {}, "outputs": [], "execution_count": None}
                    for c in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = folder / "99-module.ipynb"
    path.write_text(json.dumps(nb))
    return path


def test_the_audit_finds_a_renamed_copy_in_a_python_string_a_heredoc_or_an_applied_file(tmp_path: Path) -> None:
    (tmp_path / "demo.yaml").write_text(CONFIG)
    nb = _notebook(tmp_path, f'apply("""{POD}""")', "%%bash\nkubectl apply -f demo.yaml",
                   f"%%bash\ncat <<EOF | kubectl apply -f -\n{POD.replace('demo', 'other')}EOF\n")
    shown = {fp: cell for cell, obj in audit.module_objects(nb) for fp in audit.fingerprints(obj)}
    renamed = POD.replace("name: demo", "name: lab-pod").replace("m01", "lab-01")
    import yaml
    assert any(fp in shown for fp in audit.fingerprints(yaml.safe_load(renamed)))
    # the same config under another key and another ConfigMap name is still the demo's config
    moved = CONFIG.replace("shared: |-", "tier-a: |-").replace("demo-config", "lab-config")
    assert any(shown.get(fp) == 1 for fp in audit.fingerprints(yaml.safe_load(moved)))
    # a real change (two GPUs, another image) is new
    changed = renamed.replace("nvidia.com/gpu: 1", "nvidia.com/gpu: 2")
    assert not any(fp in shown for fp in audit.fingerprints(yaml.safe_load(changed)))
    assert sorted({cell for cell, _ in audit.module_objects(nb)}) == [0, 1, 2]


def test_answer_share_and_live_share_are_counted_by_points_and_checks() -> None:
    spec = catalog.get("05-dra")
    fig = audit.figures(spec)
    assert fig.points == spec.max_score and fig.checks == len(spec.checks)
    assert 0 < fig.live_checks < fig.checks and 0 <= fig.answer_points <= fig.points


@pytest.mark.parametrize("lab_id", catalog.ids())
def test_every_lab_asks_for_transfer(lab_id: str) -> None:
    problems = audit.figures(catalog.get(lab_id)).problems
    if lab_id in NOT_YET:
        assert problems, f"{lab_id} now passes the audit: remove it from NOT_YET"
    else:
        assert not problems, f"{lab_id}: " + "; ".join(problems)


def test_not_yet_names_only_labs_that_exist() -> None:
    assert set(NOT_YET) <= set(catalog.ids())
