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
    assert data == {"backend": "attach", "kubeconfig": str(path.resolve()), "context": None}
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
