"""Replay plans: the learner's files and recorded actions, confined to what the lab allows, in solve order.

No cluster here: what gets replayed and what is refused (with a note) is decided before anything is applied.
The replay itself, on the grader's cluster, is tested in tests/e2e/test_replay_grading.py.
"""

from __future__ import annotations

import dataclasses

from pathlib import Path

import labs
from labs import replay, steps

LAB = "04a-time-slicing"
SOLUTION = Path(labs.get(LAB).directory) / "solution"
SOLVED_ACTIONS = [
    {"action": "label", "node": "t4-0", "key": "nvidia.com/device-plugin.config", "value": "timeslice-4"},
    {"action": "policy", "field": "devicePlugin.config", "value": {"name": "device-plugin-config", "default": "timeslice-4"}},
]


def solution_files(lab_id: str = LAB) -> dict[str, bytes]:
    spec = labs.get(lab_id)
    return {n: (spec.directory / "solution" / n).read_bytes() for n in spec.files}


def test_solved_work_is_replayed_in_the_order_of_the_solve_steps() -> None:
    p = replay.plan(labs.get(LAB), solution_files(), SOLVED_ACTIONS)
    kinds = [a.kind for a in p.acts]
    assert p.notes == ()
    assert kinds == ["apply", "label", "policy", "wait", "apply", "apply", "apply", "wait", "apply", "wait", "apply"]
    applied = [a.describe for a in p.acts if a.kind == "apply"]
    assert applied[0] == "apply ConfigMap gpu-operator/device-plugin-config from device-plugin-config.yaml"
    assert applied[-1] == "apply Pod lab-04a/inference-worker-5 from worker-5.yaml"
    assert {a.data["as"] for a in p.acts if a.kind == "apply"} == {"grader", "learner"}
    # clusterpolicy-patch.yaml is what the learner patched with: the recorded policy action carries it
    assert not any("clusterpolicy-patch" in a.describe for a in p.acts)


def test_actions_outside_the_lab_are_refused_with_a_note() -> None:
    forged = [
        {"action": "label", "node": "h100-0", "key": "nvidia.com/device-plugin.config", "value": "x"},
        {"action": "label", "node": "t4-0", "key": "node-role.kubernetes.io/control-plane", "value": ""},
        {"action": "policy", "field": "operator.defaultRuntime", "value": "runc"},
        {"action": "operator", "installed": False},
        {"action": "fault", "node": "t4-0", "kind": "gpu-unhealthy", "gpu": 0},
        {"action": "label", "node": "t4-0", "key": "nvidia.com/device-plugin.config", "value": "bad value!"},
        {"action": "capacity", "node": "t4-0", "nvidia.com/gpu.shared": 4},
    ]
    p = replay.plan(labs.get(LAB), {}, forged)
    assert [a for a in p.acts if a.kind != "wait"] == []
    assert len(p.notes) == len(forged) + 4  # + the four applied files that are missing
    assert any("does not let you label h100-0" in n for n in p.notes)
    assert any("install or remove the GPU Operator" in n for n in p.notes)
    assert any("unknown action" in n for n in p.notes)


def test_manifests_are_confined_to_the_labs_namespaces_and_named_objects() -> None:
    spec = labs.get(LAB)
    escalation = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                  "metadata": {"name": "me"}, "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"}}
    assert replay.confine(spec, escalation)[0] == ""
    assert replay.confine(spec, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "kube-system"}})[0] == ""
    assert replay.confine(spec, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "lab-04a"}})[0] == ""
    assert replay.confine(spec, {"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": "other", "namespace": "gpu-operator"}})[0] == ""
    assert replay.confine(spec, {"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": "device-plugin-config", "namespace": "gpu-operator"}})[0] == "grader"
    assert replay.confine(spec, {"apiVersion": "apps/v1", "kind": "Deployment",
                                 "metadata": {"name": "d", "namespace": "lab-04a"}})[0] == "learner"
    files = dict(solution_files())
    files["worker-5.yaml"] += b"---\n" + b"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n" \
        b"metadata: {name: me}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n" \
        b"subjects: [{kind: Group, name: 'system:authenticated', apiGroup: rbac.authorization.k8s.io}]\n"
    p = replay.plan(spec, files, SOLVED_ACTIONS)
    assert any("ClusterRoleBinding" in n for n in p.notes)
    assert not any("ClusterRoleBinding" in a.describe for a in p.acts)


def test_every_lab_solution_replays_without_notes() -> None:
    """The plan of each lab's own solution (with the actions its solve steps take) refuses nothing."""
    for lab_id in labs.list_labs():
        spec = labs.get(lab_id)
        actions = replay.solve_actions(spec)
        p = replay.plan(spec, solution_files(lab_id), actions)
        assert p.notes == (), (lab_id, p.notes)


def test_a_recorded_rollout_restart_is_replayed_after_the_fix_it_loads() -> None:
    """A lab whose fix needs `kubectl rollout restart` (the plugin reads its ConfigMap only when it starts; a failed
    MIG manager tries a label again only in a new pod): the restart is an action the bundle records, replayed where
    the solution restarts, after the files before it; other DaemonSets are refused. Lab 06 with such a step."""
    base = labs.get("06-troubleshooting")
    at_fix = next(i for i, s in enumerate(base.solve) if isinstance(s, steps.Apply) and s.file.endswith("legacy.yaml"))
    spec = dataclasses.replace(base, solve=(*base.solve[:at_fix + 1], steps.Restart("nvidia-mig-manager"),
                                            *base.solve[at_fix + 1:]))
    restart = {"action": "restart", "daemonset": "nvidia-mig-manager"}
    assert restart in replay.solve_actions(spec)
    p = replay.plan(spec, solution_files("06-troubleshooting"), replay.solve_actions(spec))
    assert p.notes == ()
    describes = [a.describe for a in p.acts]
    at = describes.index("rollout restart daemonset/nvidia-mig-manager")
    assert any(d.startswith("apply Deployment lab-06/legacy-infer") for d in describes[:at])
    without = replay.plan(spec, solution_files("06-troubleshooting"),
                          [a for a in replay.solve_actions(spec) if a != restart])
    assert not any(a.kind == "restart" for a in without.acts)
    other = replay.plan(spec, {}, [{"action": "restart", "daemonset": "nvidia-dcgm-exporter"}])
    assert not any(a.kind == "restart" for a in other.acts)
    assert any("does not let you restart daemonset nvidia-dcgm-exporter" in n for n in other.notes)


def test_two_broken_gpus_of_one_node_are_two_faults_and_a_repeat_is_one() -> None:
    """Lab 01 breaks GPUs 3 and 6 of h100-0: both are replayed; the same action twice is replayed once."""
    spec = labs.get("01-device-plugins")
    actions = [{"action": "fault", "node": "h100-0", "kind": "gpu-unhealthy", "gpu": g} for g in (3, 6, 6)]
    acts, notes = replay.validate_actions(spec, actions)
    assert [a.data["gpu"] for a in acts if a.kind == "fault"] == [3, 6] and not notes


def test_a_repaired_host_is_replayed_as_cleared_not_broken_again() -> None:
    """Lab 06's incident is repaired with `gpulab fault clear`: the replay starts from the setup (fault present),
    so the clearing is an action of its own, replayed where the solution clears it."""
    spec = labs.get("06-troubleshooting")
    cleared = {"action": "fault", "node": "h100-0", "kind": "nouveau-bound", "gpu": None, "present": False}
    assert cleared in replay.solve_actions(spec)
    p = replay.plan(spec, solution_files("06-troubleshooting"), replay.solve_actions(spec))
    faults = [a for a in p.acts if a.kind == "fault"]
    assert [(a.describe, a.data["present"]) for a in faults] == [("fault nouveau-bound cleared on h100-0", False)]


def test_a_flood_and_finalizers_are_left_out_of_the_plan() -> None:
    """A workload asking for more pods than a replay may create is not applied (the budget counts every object's
    pods, so two half-floods are caught too); finalizers are dropped from an object and its pod template."""
    files = solution_files()
    files["worker-5.yaml"] += (
        b"---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: flood, namespace: lab-04a}\n"
        b"spec: {replicas: 1500, selector: {matchLabels: {app: f}}, template: {metadata: {labels: {app: f}},"
        b" spec: {containers: [{name: c, image: x}]}}}\n"
        b"---\napiVersion: batch/v1\nkind: Job\nmetadata: {name: half, namespace: lab-04a}\n"
        b"spec: {completions: 40, template: {spec: {restartPolicy: Never, containers: [{name: c, image: x}]}}}\n"
        b"---\napiVersion: batch/v1\nkind: Job\nmetadata: {name: other-half, namespace: lab-04a}\n"
        b"spec: {parallelism: 40, template: {spec: {restartPolicy: Never, containers: [{name: c, image: x}]}}}\n"
        b"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: held, namespace: lab-04a,"
        b" finalizers: [example.com/hold]}\n")
    p = replay.plan(labs.get(LAB), files, SOLVED_ACTIONS)
    applied = {a.data["object"]["metadata"]["name"]: a.data["object"] for a in p.acts if a.kind == "apply"}
    assert "flood" not in applied and "half" in applied and "other-half" not in applied
    assert any("asks for 1500 pods" in n for n in p.notes) and any("other-half" in n for n in p.notes)
    assert "finalizers" not in applied["held"]["metadata"]
    assert any("finalizers are not replayed" in n for n in p.notes)
    assert sum(replay.pods_asked(o) for o in applied.values()) <= replay.MAX_REPLAY_PODS


def test_every_act_the_planner_makes_has_an_executor() -> None:
    """Each stage knows every kind the one before makes: the validators' and the planner's kinds are executed."""
    from labs.replay import execute, planner

    made = set(planner.VALIDATORS) | {"apply", "wait"}
    assert made <= set(execute.EXECUTORS), made - set(execute.EXECUTORS)
    for lab_id in labs.list_labs():
        spec = labs.get(lab_id)
        kinds = {a.kind for a in replay.plan(spec, solution_files(lab_id), replay.solve_actions(spec)).acts}
        assert kinds <= set(execute.EXECUTORS), (lab_id, kinds)
