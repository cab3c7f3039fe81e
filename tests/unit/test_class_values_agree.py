"""course/class/z2jh-values.yaml says what the kind class tier runs (tests/class_tier.py, deployed by
tests/kind/test_class_on_kind.py), and the two agree on each point: the image, the resources, the on-demand lab
cluster, the exchange volume, the culler, the grading config and Pod Security. The values also pass the chart's own
schema (tests/fixtures/z2jh/values.schema.yaml, from the chart's commit), as `helm install` checks them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import class_tier
import z2jh_chart

ROOT = Path(__file__).resolve().parents[2]
CLASS = ROOT / "course" / "class"
TAG = "c0ffee0"


def _tier() -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    vals = class_tier.values(TAG)
    objects = class_tier.hub(vals, "t" * 64)
    config = next(o for o in objects if o["kind"] == "ConfigMap")
    return vals, json.loads(config["data"]["spawner.json"]), objects


def test_the_values_pass_the_chart_schema_and_a_misspelt_key_does_not() -> None:
    vals = class_tier.values(TAG)
    assert z2jh_chart.schema_problems(vals) == []
    wrong = z2jh_chart.helm_merge(vals, {"singleuser": {"memory": {"guarntee": "1G"}}})
    assert any("'guarntee' was unexpected" in p for p in z2jh_chart.schema_problems(wrong))


def test_the_image_is_the_one_the_build_makes() -> None:
    vals, spawner, _ = _tier()
    ours = z2jh_chart.load_yaml(class_tier.VALUES)["singleuser"]["image"]
    assert spawner["KubeSpawner"]["image"] == f"{ours['name']}:{TAG}" == class_tier.learner_image(vals)
    assert spawner["KubeSpawner"]["image_pull_policy"] == ours["pullPolicy"] == "IfNotPresent"
    script = (CLASS / "build-image.sh").read_text(encoding="utf-8")
    assert '"${prefix}gpulab-$target:$TAG"' in script and "for target in hub learner" in script
    assert ours["name"] == "gpulab-learner"
    assert class_tier.grader(vals)["spec"]["containers"][0]["image"] == class_tier.learner_image(vals)


def test_the_resources_are_the_values_and_fit_the_measured_footprint() -> None:
    vals, spawner, _ = _tier()
    ks = spawner["KubeSpawner"]
    ours = z2jh_chart.load_yaml(class_tier.VALUES)["singleuser"]
    assert (ks["mem_guarantee"], ks["mem_limit"]) == (ours["memory"]["guarantee"], ours["memory"]["limit"])
    assert (ks["cpu_guarantee"], ks["cpu_limit"]) == (ours["cpu"]["guarantee"], ours["cpu"]["limit"])
    # The measured idle learner pod (docs/class-mode.md's figures from the kind tier) fits the guarantee.
    doc = (ROOT / "docs" / "class-mode.md").read_text(encoding="utf-8")
    measured = re.search(r"idle learner pod[^|]*\| (\d+) MiB", doc)
    assert measured is not None, "docs/class-mode.md has no measured idle learner pod figure"
    guarantee = int(ours["memory"]["guarantee"].rstrip("M"))
    assert int(measured.group(1)) < guarantee, (measured.group(0), guarantee)


def test_the_lab_cluster_starts_on_demand_in_the_pod() -> None:
    _, spawner, _ = _tier()
    assert spawner["KubeSpawner"]["environment"]["GPULAB_CLUSTER_ON_DEMAND"] == "1"
    containerfile = (CLASS / "Containerfile").read_text(encoding="utf-8")
    learner = containerfile[containerfile.index("AS learner"):]
    assert "GPULAB_CLUSTER_ON_DEMAND=1" in learner


def test_the_exchange_is_the_one_claim_at_nbgrader_s_root() -> None:
    vals, spawner, _ = _tier()
    claim = class_tier.exchange_claim("standard")
    ks = spawner["KubeSpawner"]
    assert ks["volumes"]["nbgrader-exchange"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    mounts = {m["name"]: m["mountPath"] for m in ks["volume_mounts"].values()}
    config = (CLASS / "nbgrader_config.py").read_text(encoding="utf-8")
    assert f'c.Exchange.root = "{mounts["nbgrader-exchange"]}"' in config
    assert mounts["nbgrader-exchange"] == class_tier.EXCHANGE_MOUNT
    grader = class_tier.grader(vals)["spec"]
    assert {v["name"]: v.get("persistentVolumeClaim", {}).get("claimName") for v in grader["volumes"]}[
        "exchange"] == claim["metadata"]["name"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    exchange_pv = class_tier.volumes("standard", ["ann", "bob"])[-1]["spec"]
    assert exchange_pv["accessModes"] == ["ReadWriteMany"]
    assert exchange_pv["claimRef"]["name"] == claim["metadata"]["name"]


def test_the_culler_runs_with_the_values_settings() -> None:
    _, spawner, _ = _tier()
    ours = z2jh_chart.load_yaml(class_tier.VALUES)["cull"]
    command = spawner["_services"]["culler"]["command"]
    assert command[:3] == ["python3", "-m", "jupyterhub_idle_culler"]
    assert f"--timeout={ours['timeout']}" in command and f"--cull-every={ours['every']}" in command
    assert ("--cull-users" in command) == ours["users"]
    assert spawner["_roles"][0]["services"] == ["jupyterhub-idle-culler"]


def test_the_grading_config_is_the_safe_one() -> None:
    config = (CLASS / "nbgrader_config.py").read_text(encoding="utf-8")
    assert "nbsafe.configure(c)" in config
    install = (CLASS / "install.sh").read_text(encoding="utf-8")
    assert 'install -D -m 644 "$SRC/course/class/nbgrader_config.py" /etc/jupyter/nbgrader_config.py' in install
    # Nothing in the values mounts another nbgrader config over the image's.
    assert "nbgrader_config" not in json.dumps(z2jh_chart.load_yaml(class_tier.VALUES).get("singleuser", {}))


def test_pod_security_and_scheduling_match_the_tier() -> None:
    vals, spawner, objects = _tier()
    ks = spawner["KubeSpawner"]
    assert class_tier.namespace()["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert ks["container_security_context"]["capabilities"] == {"drop": ["ALL"]}
    assert ks["uid"] == 1000 and ks["allow_privilege_escalation"] is False
    assert ks["init_containers"] == []  # no privileged metadata-blocking container
    assert "scheduler_name" not in ks  # the tier runs no user scheduler, and the values turn it off
    hub = next(o for o in objects if o["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert hub["securityContext"]["runAsNonRoot"] is True
    assert hub["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_each_learner_gets_a_uid_of_their_own_in_the_tier_as_in_the_values() -> None:
    """The values' extraConfig (one uid per learner, tests/unit/test_class_learner_uids.py) reaches the tier's hub
    unchanged, the learner image's collect knows learners by that uid, and the tier's volumes are made for it."""
    vals, spawner, _ = _tier()
    ours = z2jh_chart.load_yaml(class_tier.VALUES)["hub"]["extraConfig"]
    assert spawner["_extra_config"] == ours and "gpulab-learner-uids" in ours
    hub_config = (CLASS / "hub_config.py").read_text(encoding="utf-8")
    assert 'for _key, _code in sorted(_extra_config.items()):' in hub_config
    config = (CLASS / "nbgrader_config.py").read_text(encoding="utf-8")
    assert 'c.CheckedCollect.learner_uids = "by-name"' in config
    from labs.classroom import kubeuids

    folders = class_tier.host_folders(["ann"])
    assert f"-g {kubeuids.learner_uid('ann')} {class_tier.HOST_DIR}/home-ann" in folders
    assert f"-o {kubeuids.INSTRUCTOR_UID} -g 100 {class_tier.HOST_DIR}/exchange" in folders
