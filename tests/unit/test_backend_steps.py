"""Bring-up is an ordered list of small steps behind the backend protocol, shared where backends share a concern;
a failed bring-up of a new cluster is torn down unless retained; backend detection says what it tried."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cluster import backends, errors, fleet, safefs
from cluster.backends import steps
from cluster.backends.attach import AttachBackend
from cluster.backends.kind import KindBackend
from cluster.backends.local import LocalBackend
from cluster.progress import LogProgress


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "state"
    monkeypatch.setenv("GPULAB_STATE_DIR", str(root))
    return root


def test_local_bring_up_is_one_step_per_concern_in_order(tmp_path: Path) -> None:
    assert steps.step_titles(LocalBackend("c", tmp_path).steps()) == [
        "fleet", "binaries", "PKI", "ports", "kubeconfigs", "seed", "control plane", "wait for nodes",
        "scheduler"]  # the pod agent and the GPU stack run in the sim-agents process the control plane step starts


def test_kind_and_local_share_the_fleet_step_and_kind_runs_the_gpu_stack_step(tmp_path: Path) -> None:
    kind = KindBackend("c", tmp_path).steps()
    local = LocalBackend("c", tmp_path).steps()
    assert steps.step_titles(kind) == ["fleet", "plan workers", "docker and kind", "node plugin", "kind config",
                                       "kind create cluster", "fleet nodes", "wait for nodes", "GPU stack"]
    assert [type(s) for s in kind].count(steps.FleetStep) == [type(s) for s in local].count(steps.FleetStep) == 1
    assert [type(s) for s in kind].count(steps.GpuStackStep) == 1
    assert [type(s) for s in local].count(steps.GpuStackStep) == 0  # local: inside sim-agents


def test_gpu_stack_runs_on_kind_against_kinds_api_server_without_the_pod_agents_checkpoint(tmp_path: Path) -> None:
    be = KindBackend("c", tmp_path)
    stack = [s for s in be.steps() if isinstance(s, steps.GpuStackStep)][0]
    assert stack.spec.name == "gpu-stack"
    assert f"--kubeconfig={be.kubeconfig()}" in stack.spec.argv
    assert not any(a.startswith("--device-checkpoint") for a in stack.spec.argv)
    # the devices go to the node plugin in each worker, which registers them with the real kubelet
    assert f"--device-dir={be.devices_dir()}" in stack.spec.argv
    assert "cluster.sim.gpu.stack" in stack.spec.argv
    # the node and pod agents stay local-only: kind's kubelets are real
    assert not any("agent" in t for t in steps.step_titles(be.steps()))


class _Boom:
    title = "boom"

    def run(self, ctx: steps.Context) -> None:
        raise errors.ClusterError("step failed")


class _Mark:
    title = "mark"

    def __init__(self) -> None:
        self.ran = False

    def run(self, ctx: steps.Context) -> None:
        self.ran = True


@pytest.mark.parametrize(("fresh", "retain", "torn_down"), [(True, False, True), (True, True, False),
                                                             (False, False, False)])
def test_a_failed_bring_up_of_a_new_cluster_is_torn_down_unless_retained(
        tmp_path: Path, fresh: bool, retain: bool, torn_down: bool) -> None:
    calls: list[str] = []
    after = _Mark()
    ctx = steps.Context(LocalBackend("c", tmp_path), LogProgress(), None)
    with pytest.raises(errors.ClusterError, match="step failed"):
        steps.bring_up([_Boom(), after], ctx, fresh=fresh, retain=retain, teardown=lambda: calls.append("down"))
    assert calls == (["down"] if torn_down else [])
    assert not after.ran


def test_fleet_step_keeps_the_clusters_fleet_and_refuses_another(tmp_path: Path) -> None:
    be = KindBackend("c", tmp_path)
    ctx = steps.Context(be, LogProgress(), None)
    steps.FleetStep("kind", "gpulab up --backend kind").run(ctx)
    assert ctx.need_fleet().name == "starter"
    assert (be.dir / "fleet.yaml").exists()
    ctx2 = steps.Context(be, LogProgress(), fleet.load("platform"))
    with pytest.raises(errors.ClusterError, match="already runs fleet 'starter'") as exc:
        steps.FleetStep("kind", "gpulab up --backend kind").run(ctx2)
    assert "gpulab up --backend kind --fleet platform" in (exc.value.hint or "")


def test_kind_fleet_too_big_fails_before_docker_and_leaves_no_state(state: Path, tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("apiVersion: gpulab.dev/v1\nkind: Fleet\nmetadata: {name: big}\nspec:\n  pools:\n"
                   "  - {name: cpu, count: 9, cpu: 4, memory: 8Gi}\n")
    be = KindBackend()
    with pytest.raises(errors.ConfigError, match="at most 8 workers"):
        be.up(fleet.load(str(big)), LogProgress())
    assert not be.dir.exists()


def test_detection_without_any_cluster_names_the_default_and_says_why(state: Path) -> None:
    found = backends.detect()
    assert found.backend.name == "local"
    assert "state record" in found.explain() and "default backend 'local'" in found.explain()


def test_detection_follows_the_state_record(state: Path) -> None:
    (state / "gpulab").mkdir(parents=True)
    (state / "gpulab" / ".gpulab-state").write_text(safefs.MARKER_TEXT)
    (state / "gpulab" / "state.json").write_text('{"backend": "kind"}')
    found = backends.detect()
    assert found.backend.name == "kind"
    assert found.tried[-1] == "records backend 'kind'"


@pytest.mark.parametrize("text", ["{not json", '{"backend": "minikube"}', "[]"])
def test_detection_never_falls_back_silently_on_a_bad_state_record(state: Path, text: str) -> None:
    (state / "gpulab").mkdir(parents=True)
    (state / "gpulab" / ".gpulab-state").write_text(safefs.MARKER_TEXT)
    (state / "gpulab" / "state.json").write_text(text)
    with pytest.raises(errors.BackendUnavailable, match="cannot tell which backend") as exc:
        backends.current()
    assert "state record" in exc.value.message
    assert "gpulab down --purge" in (exc.value.hint or "")


def test_every_backend_offers_prepare_and_doctor(state: Path) -> None:
    for name in backends.NAMES:
        rows = backends.get(name).doctor()
        assert rows and all(len(r) == 3 for r in rows)
    assert backends.get("attach").prepare(LogProgress()).startswith("attach:")


def test_up_with_a_kubeconfig_belongs_to_attach(state: Path, tmp_path: Path) -> None:
    from labs.cli.main import cli

    result = CliRunner().invoke(cli, ["up", "--backend", "kind", "--kubeconfig", str(tmp_path / "k")])
    assert result.exit_code == 2
    assert "--backend attach" in result.output
    assert not AttachBackend().configured()


class _Nodes:
    def __init__(self, provider: str | None) -> None:
        self.items = [] if provider is None else [{"spec": {"providerID": provider} if provider else {}}]

    def get(self, path: str, **params: object) -> dict[str, object]:
        if path == "/api/v1/nodes/a100-1":  # a node without labels: a wait for one times out
            return {"metadata": {"name": "a100-1"}, "status": {}}
        assert path == "/api/v1/nodes"
        return {"items": self.items}


@pytest.mark.parametrize(("provider", "kind"), [("kind://docker/gpulab/gpulab-worker", True), ("", False),
                                                (None, False), ("aws:///us-east-1a/i-0abc", False)])
def test_a_kind_cluster_is_told_by_its_nodes_provider_id(provider: str | None, kind: bool) -> None:
    from typing import cast

    from cluster.backends import kind as kind_mod
    from cluster.kube.client import Client

    assert kind_mod.runs_on_kind(cast(Client, _Nodes(provider))) is kind


def test_kind_differences_name_real_checks_and_say_kind() -> None:
    """Every kind difference a lab declares (lab.yaml ``spec.backends.kind``) names a check the lab has, and its
    reason (the kind backend's, for what it lacks) tells the learner it is about kind."""
    import labs
    from cluster.backends import kind as kind_mod

    declared = 0
    for lab_id in labs.list_labs():
        spec = labs.get(lab_id)
        for check_id, d in spec.backends.get("kind", {}).items():
            declared += 1
            assert check_id in {c.id for c in spec.checks}
            assert kind_mod.lacks(d.lacks, d.then).startswith("kind backend difference:")
            assert "{then}" not in kind_mod.lacks(d.lacks, d.then)
    assert declared == 6  # 03b (2), 04f, 05 (2), 07


def test_every_kind_difference_is_graded_on_a_check_kind_can_pass() -> None:
    """Each kind difference names what kind produces instead (``gradedOn``), a cluster check parsed with the lab."""
    import labs

    for lab_id in labs.list_labs():
        for check_id, d in labs.get(lab_id).backends.get("kind", {}).items():
            assert d.rule.cluster, (lab_id, check_id)


def test_a_wait_only_the_pod_agent_satisfies_is_skipped_on_kind(tmp_path: Path) -> None:
    """``notOnKind`` on a lab's wait step: a kind cluster skips it (without reading any node); bad values are refused."""
    from typing import Any, cast

    from cluster.kube.client import Client
    import time

    from labs import steps as lab_steps
    from labs.spec import Problems

    p = Problems()
    raw = {"wait": {"node": {"name": "a100-1", "labels": {"nvidia.com/mig.config.state": "failed"}},
                    "timeout": 60, "notOnKind": True}}
    step = lab_steps.parse(p, "spec.setup[0]", raw, tmp_path)
    assert not p.items and isinstance(step, lab_steps.Wait) and step.not_on_kind
    started = time.monotonic()
    step.run(lab_steps.StepContext(cast(Client, _Nodes("kind://docker/gpulab/gpulab-worker")), tmp_path, cast(Any, None)))
    assert time.monotonic() - started < 5

    bad = Problems()
    lab_steps.parse(bad, "spec.setup[0]", {"wait": {**raw["wait"], "notOnKind": "yes"}}, tmp_path)
    assert any("notOnKind" in item for item in bad.items)


def test_a_wait_for_what_kind_produces_instead_runs_on_kind_only(tmp_path: Path) -> None:
    """``onlyOnKind`` on a lab's wait step: skipped off kind (without reading any node), waited for on kind (it
    reads the node and times out here, where the fake node never shows the label); both switches at once are
    refused, and a difference graded on kind alone (``only``) is part of its lab's declared kind differences."""
    from typing import Any, cast

    import pytest

    from cluster.errors import ClusterError
    from cluster.kube.client import Client
    from labs import steps as lab_steps
    from labs.spec import Problems

    p = Problems()
    raw = {"wait": {"node": {"name": "a100-1", "labels": {"nvidia.com/mig.config.state": "success"}},
                    "timeout": 1, "onlyOnKind": True}}
    step = lab_steps.parse(p, "spec.setup[0]", raw, tmp_path)
    assert not p.items and isinstance(step, lab_steps.Wait) and step.only_on_kind and not step.not_on_kind
    step.run(lab_steps.StepContext(cast(Client, _Nodes("https://127.0.0.1:6443")), tmp_path, cast(Any, None)))
    with pytest.raises(ClusterError):
        step.run(lab_steps.StepContext(cast(Client, _Nodes("kind://docker/gpulab/gpulab-worker")), tmp_path,
                                       cast(Any, None)))

    both = Problems()
    lab_steps.parse(both, "spec.setup[0]", {"wait": {**raw["wait"], "notOnKind": True}}, tmp_path)
    assert any("exclude each other" in item for item in both.items)
    import labs

    for lab_id in labs.list_labs():  # ``only`` is a flag of a declared kind difference, never a list apart
        assert all(isinstance(d.only, bool) for d in labs.get(lab_id).backends.get("kind", {}).values())


def test_every_creating_backend_brings_up_holding_the_state_folder_lock(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``up`` of local and kind runs its steps holding the state folder's lock, so a second ``up`` waits for the
    first (kind's did not before issue 29)."""
    from typing import Any

    created: tuple[KindBackend | LocalBackend, ...] = (KindBackend(root=tmp_path / "kind"),
                                                      LocalBackend(root=tmp_path / "local"))
    for be in created:
        held: list[bool] = []

        def bring_up(steps: Any, ctx: Any, **_: Any) -> None:
            held.append(ctx.backend._lock_depth == 1 and (ctx.backend.dir / ".lock").exists())

        monkeypatch.setattr(steps, "bring_up", bring_up)
        monkeypatch.setattr(type(be), "status", lambda self: None)
        monkeypatch.setattr(type(be), "ensure_space", lambda self, *a: None, raising=False)
        be.up(None, LogProgress())
        assert held == [True], type(be).__name__
