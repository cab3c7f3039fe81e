"""The attach backend records a kubeconfig, refuses to tear anything down, and guards destructive steps.

These tests need no cluster: they cover what attach decides before it talks to one. Talking to a real cluster is
in tests/e2e/test_attach_backend.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from cluster import backends, errors, fleet, pki
from cluster.backends import guard
from cluster.backends.attach import AttachBackend
from cluster.backends.local import LocalBackend
from cluster.kube import kubeconfig
from cluster.progress import LogProgress


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "state"
    monkeypatch.setenv("GPULAB_STATE_DIR", str(root))
    return root


def make_kubeconfig(folder: Path, *, second_context: bool = False) -> Path:
    """A kubeconfig for an unreachable server (TEST-NET-3), optionally with a second context using relative paths."""
    folder.mkdir(parents=True, exist_ok=True)
    ca = folder / "ca.pem"
    shutil.copy(pki.ensure(folder / "pki").ca_cert, ca)
    path = kubeconfig.write(folder / "config", server="https://203.0.113.10:6443", ca_file=ca, user="alice",
                            token="t0ken", cluster_name="shared")
    if second_context:
        doc = YAML(typ="safe").load(path.read_text())
        doc["clusters"].append({"name": "other", "cluster": {"server": "https://203.0.113.11:6443",
                                                             "certificate-authority": "ca.pem"}})
        doc["contexts"].append({"name": "bob@other", "context": {"cluster": "other", "user": "alice"}})
        yaml = YAML(typ="safe")
        yaml.default_flow_style = False
        with path.open("w") as f:
            yaml.dump(doc, f)
    return path


def test_configure_records_the_kubeconfig_and_current_finds_attach(state: Path, tmp_path: Path) -> None:
    path = make_kubeconfig(tmp_path / "kube")
    be = AttachBackend()
    assert be.configure(path) == path.resolve()
    data = json.loads((state / "gpulab" / "state.json").read_text())
    assert data == {"backend": "attach", "kubeconfig": str(path.resolve())}  # no context: the file's current one
    assert backends.current().name == "attach"
    assert be.kubeconfig() == path.resolve()  # the current context is the one chosen: no copy needed


def test_a_missing_kubeconfig_or_context_is_a_clear_error_and_records_nothing(state: Path, tmp_path: Path) -> None:
    be = AttachBackend()
    with pytest.raises(errors.ClusterError, match="does not exist"):
        be.configure(tmp_path / "nope")
    with pytest.raises(errors.ConfigError, match="no context named 'missing'"):
        be.configure(make_kubeconfig(tmp_path / "kube"), "missing")
    assert not (state / "gpulab" / "state.json").exists()


def test_choosing_another_context_writes_a_copy_that_selects_it(state: Path, tmp_path: Path) -> None:
    """So that `gpulab env` points kubectl at the same cluster gpulab uses."""
    path = make_kubeconfig(tmp_path / "kube", second_context=True)
    be = AttachBackend()
    be.configure(path, "bob@other")
    pinned = be.kubeconfig()
    assert pinned == state / "gpulab" / "attach.kubeconfig"
    assert pinned.stat().st_mode & 0o077 == 0
    doc = YAML(typ="safe").load(pinned.read_text())
    assert doc["current-context"] == "bob@other"
    other = next(c["cluster"] for c in doc["clusters"] if c["name"] == "other")
    assert other["certificate-authority"] == str((tmp_path / "kube" / "ca.pem").resolve())
    assert kubeconfig.load(pinned).server == "https://203.0.113.11:6443"


def test_up_before_configure_and_up_with_a_fleet_say_what_to_do(state: Path, tmp_path: Path) -> None:
    be = AttachBackend()
    with pytest.raises(errors.ClusterError, match="no cluster is attached") as info:
        be.up(None, LogProgress())
    assert "--backend attach --kubeconfig" in str(info.value)
    be.configure(make_kubeconfig(tmp_path / "kube"))
    with pytest.raises(errors.ClusterError, match="cannot create fleet 'starter'"):
        be.up(fleet.load("starter"), LogProgress())


def test_status_of_an_unreachable_cluster_is_a_problem_not_a_crash(state: Path, tmp_path: Path) -> None:
    be = AttachBackend()
    assert not be.status().exists
    be.configure(make_kubeconfig(tmp_path / "kube"))
    st = be.status()
    assert st.exists and not st.healthy
    assert st.problems and "does not answer" in st.problems[0]


def test_a_kubeconfig_with_a_broken_certificate_gets_a_clear_error(state: Path, tmp_path: Path) -> None:
    path = make_kubeconfig(tmp_path / "kube")
    be = AttachBackend()
    be.configure(path)
    (tmp_path / "kube" / "ca.pem").write_text("not a certificate\n")
    kubeconfig.write(path, server="https://203.0.113.10:6443", ca_file=tmp_path / "kube" / "ca.pem", user="alice",
                     token="t0ken", cluster_name="shared")
    with pytest.raises(errors.ClusterError, match="cannot use the certificates named in"):
        be.up(None, LogProgress())
    assert "cannot use the certificates" in be.status().problems[0]


def test_down_refuses_and_down_purge_only_forgets(state: Path, tmp_path: Path) -> None:
    path = make_kubeconfig(tmp_path / "kube")
    before = path.read_bytes()
    be = AttachBackend()
    be.configure(path)
    with pytest.raises(errors.CourseError, match="not gpulab's to stop") as info:
        be.down()
    assert "gpulab down --purge" in str(info.value)
    assert be.configured()
    be.down(purge=True)
    assert not be.configured() and not (state / "gpulab").exists()
    assert path.read_bytes() == before  # the learner's kubeconfig is never touched


def test_attach_will_not_hide_a_lab_cluster_of_another_backend(state: Path, tmp_path: Path) -> None:
    (state / "gpulab").mkdir(parents=True)
    (state / "gpulab" / "state.json").write_text(json.dumps({"backend": "local", "ports": {"apiserver": 1}}))
    with pytest.raises(errors.ClusterError, match="another backend"):
        AttachBackend().configure(make_kubeconfig(tmp_path / "kube"))
    assert json.loads((state / "gpulab" / "state.json").read_text())["backend"] == "local"


def test_guard_refuses_destructive_steps_on_attach_only(state: Path, tmp_path: Path) -> None:
    with pytest.raises(errors.CourseError, match="refusing to taint every GPU node"):
        guard.refuse_if_attach(AttachBackend(), "taint every GPU node")
    guard.refuse_if_attach(LocalBackend("gpulab", state), "taint every GPU node")  # allowed on our own cluster


# --- the guard in production: labs, lab steps and the CLI refuse on attach before they touch the cluster ----------

class _NoCluster:
    """Stands in for every way gpulab reaches a cluster: any use means the refusal came too late."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("the cluster was contacted before the attach guard refused")


@pytest.fixture
def attached(state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An attached (foreign, unreachable) cluster recorded as the current one; contacting it fails the test."""
    path = make_kubeconfig(tmp_path / "kube")
    AttachBackend().configure(path)
    from cluster.kube import client as client_mod

    monkeypatch.setattr(client_mod.Client, "from_kubeconfig", classmethod(lambda cls, *a, **k: _NoCluster()))
    return path


def test_owner_tells_clusters_gpulab_made_from_everyone_elses(state: Path, tmp_path: Path) -> None:
    ours = tmp_path / "ours" / "gpulab"
    ours.mkdir(parents=True)
    (ours / "state.json").write_text(json.dumps({"backend": "local"}))
    (ours / "admin.kubeconfig").write_text("")
    assert guard.owner(ours / "admin.kubeconfig").name == "local"
    assert guard.owner(ours / "tenants" / "t.kubeconfig").name == "attach"  # a tenant's view is not an admin's
    foreign = make_kubeconfig(tmp_path / "kube")
    assert guard.owner(foreign).name == "attach"
    assert guard.owner().name == "local"  # nothing recorded: the default backend
    AttachBackend().configure(foreign)
    assert guard.owner().name == "attach" and guard.owner(foreign).name == "attach"


@pytest.mark.parametrize("lab_id", ["01-device-plugins", "02-gpu-operator", "02b-operator-values", "03-scheduling",
                                    "03b-topology-manager", "04a-time-slicing",
                                    "04b-operator-time-slicing", "04c-per-node-sharing", "04d-mig", "05-dra",
                                    "06-troubleshooting"])
def test_every_lab_refuses_setup_solve_reset_and_stop_on_attach(attached: Path, tmp_path: Path, lab_id: str) -> None:
    """Every lab puts the GPU stack, the GPU nodes or cluster-scoped objects in its scope: none may start on
    someone else's cluster, whether it is the current backend or a kubeconfig handed to ``labs.start``. Solving
    is refused too where the solution labels nodes, patches the ClusterPolicy or applies NVIDIA-named or
    cluster-scoped objects (02, 03 and 03b only apply pods and quotas in their own namespaces)."""
    from labs import catalog, runtime

    assert lab_id in catalog.ids()
    for kubeconfig_path in (None, attached):
        lab = runtime.Lab(catalog.get(lab_id), tmp_path / "work" / lab_id, kubeconfig_path)
        actions = [(lab.setup, "set up"), (lab.reset, "reset"), (lab.stop, "stop")]
        if lab_id not in ("02-gpu-operator", "03-scheduling", "03b-topology-manager"):
            actions.append((lab.solve, "solve"))
        for action, verb in actions:
            with pytest.raises(errors.CourseError, match=f"refusing to {verb} lab {lab_id}, which would") as info:
                action()
            assert "gpulab down --purge" in str(info.value)
        assert not (tmp_path / "work").exists(), "files were copied although the lab was refused"
    with pytest.raises(errors.CourseError, match="refusing to set up lab 01-device-plugins, which would remove the "
                                                 "GPU Operator"):
        runtime.start("01-device-plugins", workdir=tmp_path / "w")


def test_each_cluster_wide_step_refuses_on_attach_when_it_runs(tmp_path: Path) -> None:
    """The steps check again when they run (a step list built by hand goes through no lab)."""
    from graders import FleetFacts
    from labs import steps

    lab_dir = tmp_path / "lab"
    lab_dir.mkdir()
    (lab_dir / "policy.yaml").write_text("apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: x}\n")
    (lab_dir / "pod.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: lab}\n")
    refused = [steps.Operator(True), steps.Operator(False), steps.Label("t4-0", "k", "v"),
               steps.Fault("a100-1", "gpu-unhealthy", 0, True), steps.Policy({"mig": {"strategy": "mixed"}}),
               steps.Delete("/apis/scheduling.k8s.io/v1/priorityclasses/urgent"),
               steps.Delete("/api/v1/namespaces/gpu-operator/configmaps/default-mig-parted-config"),
               steps.Apply("policy.yaml", (), lab_dir)]
    ctx = steps.StepContext(_NoCluster.__new__(_NoCluster), lab_dir, FleetFacts(name="none", nodes=()),  # type: ignore[arg-type]
                            guard.Owner("attach"))
    for step in refused:
        assert step.cluster_change(), step
        with pytest.raises(errors.CourseError, match="refusing to"):
            step.run(ctx)
    assert steps.Delete("/api/v1/namespaces/lab/pods/p").cluster_change() is None
    assert steps.Apply("pod.yaml", (), lab_dir).cluster_change() is None


CLI_REFUSALS = {
    ("gpu-operator", "install"): "install the GPU Operator",
    ("gpu-operator", "uninstall"): "uninstall the GPU Operator",
    ("fault", "inject", "a100-1", "gpu-unhealthy"): "inject fault gpu-unhealthy on node a100-1",
    ("fault", "clear", "a100-1", "gpu-unhealthy"): "clear fault gpu-unhealthy on node a100-1",
    ("node", "heartbeat", "t4-0", "off"): "turn the heartbeat of node t4-0 off",
    ("lab", "start", "04a-time-slicing"): "set up lab 04a-time-slicing",
}


@pytest.mark.parametrize("args", sorted(CLI_REFUSALS))
def test_cli_commands_that_change_the_cluster_refuse_on_attach(attached: Path, args: tuple[str, ...],
                                                               tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from labs.cli import main as cli_main

    assert cli_main.main([*args, *(["--dir", str(tmp_path / "w")] if args[0] == "lab" else [])]) == 1
    err = capsys.readouterr().err
    assert f"refusing to {CLI_REFUSALS[args]}" in err and err.count("error:") == 1, err


def test_applying_a_learners_nvidia_named_file_refuses_on_attach(attached: Path, tmp_path: Path) -> None:
    """A lab started earlier on a lab cluster of one's own, then the state dir attached elsewhere: `gpulab lab
    apply` would put the learner's device-plugin ConfigMap into the attached cluster's gpu-operator namespace."""
    from labs import catalog, runtime

    lab = runtime.Lab(catalog.get("04a-time-slicing"), tmp_path / "work", None)
    lab.workdir.mkdir(parents=True)
    (lab.workdir / "device-plugin-config.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: device-plugin-config, namespace: gpu-operator}\n"
        "data: {timeslice-4: 'version: v1'}\n")
    with pytest.raises(errors.CourseError, match="refusing to apply device-plugin-config.yaml, which would apply "
                                                 "ConfigMap gpu-operator/device-plugin-config"):
        lab.apply("device-plugin-config.yaml")
