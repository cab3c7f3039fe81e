"""The kind backend drives the real kind CLI; a recording fake ``docker`` shows what kind was asked to do.

There is no Docker engine and no node image here, so bring-up must fail once kind tries to run kubeadm inside a
node container. Everything before that is real kind acting on our generated config: pulling the pinned node image,
creating the network, running one container per node with the API server bound to 127.0.0.1, and writing each
worker's kubeadm config with our labels and taints. After the failure the half-built cluster must be gone.
The kind binary is the pinned one from the user cache (built from the Go module proxy on first use), so this file
is in the ``build`` tier (``make test-build``), not in ``unit``.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from cluster import errors, fleet, versions
from cluster.backends import kindtool
from cluster.backends.kind import KindBackend
from cluster.progress import LogProgress

FAKE = Path(__file__).parent.parent / "fixtures" / "fakedocker" / "docker.py"
CLUSTER_LABEL = "io.x-k8s.kind.cluster"


@dataclass(frozen=True)
class Call:
    argv: list[str]
    parent: list[str]
    stdin: str | None

    @property
    def by_kind_create(self) -> bool:
        return self.parent[:3] == ["kind", "create", "cluster"]

    @property
    def by_kind_delete(self) -> bool:
        return self.parent[:3] == ["kind", "delete", "cluster"]


@dataclass(frozen=True)
class FakeDocker:
    folder: Path

    def calls(self) -> list[Call]:
        path = self.folder / "calls.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [Call(**json.loads(line)) for line in lines]

    def state(self) -> dict[str, Any]:
        path = self.folder / "state.json"
        return json.loads(path.read_text()) if path.exists() else {"containers": {}, "networks": {}, "images": []}


@pytest.fixture(scope="module")
def kind_binary() -> Path:
    path = kindtool.ensure_kind()
    assert kindtool.reported_version(path) == versions.KIND_VERSION
    return path


@pytest.fixture
def fake_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind_binary: Path) -> FakeDocker:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    docker = bindir / "docker"
    docker.write_text(f"#!{sys.executable}\n" + FAKE.read_text())
    docker.chmod(docker.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DOCKER_DIR", str(tmp_path / "docker"))
    monkeypatch.setenv("GPULAB_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("FAKE_DOCKER_DAEMON", raising=False)
    return FakeDocker(tmp_path / "docker")


def _runs(calls: list[Call]) -> dict[str, list[str]]:
    """Container name -> the argv of the `docker run` that created it."""
    return {c.argv[c.argv.index("--name") + 1]: c.argv for c in calls if c.argv[:1] == ["run"]}


def _opt_values(argv: list[str], opt: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == opt]


def _kubeadm_configs(calls: list[Call]) -> dict[str, list[dict[str, Any]]]:
    """Node -> the kubeadm config documents kind wrote into it (through `docker exec -i ... cp /dev/stdin`)."""
    out = {}
    for c in calls:
        if c.argv[:1] == ["exec"] and c.argv[-3:] == ["cp", "/dev/stdin", "/kind/kubeadm.conf"]:
            node = c.argv[-4]
            assert c.stdin is not None
            out[node] = [d for d in YAML(typ="safe").load_all(c.stdin) if d]
    return out


def _join_registration(docs: list[dict[str, Any]]) -> dict[str, Any]:
    join = next(d for d in docs if d["kind"] == "JoinConfiguration")
    registration: dict[str, Any] = join["nodeRegistration"]
    return registration


def _kubelet_arg(registration: dict[str, Any], name: str) -> str:
    return str(next(a["value"] for a in registration["kubeletExtraArgs"] if a["name"] == name))


def test_failed_bring_up_shows_what_kind_asked_of_docker_and_deletes_the_half_built_cluster(
        fake_docker: FakeDocker, tmp_path: Path) -> None:
    be = KindBackend("gpulab")
    with pytest.raises(errors.ClusterError) as info:
        be.up(fleet.load("starter"), LogProgress())
    message = str(info.value)
    assert "kind could not create cluster 'gpulab'" in message
    assert "no real node image" in message  # the fake's honest refusal to run kubeadm, relayed by kind
    assert "--retain" in message  # the next step for someone debugging a real failure

    calls = fake_docker.calls()
    assert ["pull", versions.KIND_NODE_IMAGE] in [c.argv for c in calls]
    assert any(c.argv[:2] == ["network", "create"] and c.argv[-1] == "kind" for c in calls)

    runs = _runs(calls)
    workers = [f"gpulab-worker{'' if i == 1 else i}" for i in range(1, 7)]
    assert sorted(runs) == sorted(["gpulab-control-plane", *workers])
    for name, argv in runs.items():
        assert _opt_values(argv, "--hostname") == [name]
        assert f"{CLUSTER_LABEL}=gpulab" in _opt_values(argv, "--label")
        assert argv[-1] == versions.KIND_NODE_IMAGE
        role = "control-plane" if name.endswith("control-plane") else "worker"
        assert f"io.x-k8s.kind.role={role}" in _opt_values(argv, "--label")
    published = [a for a in runs["gpulab-control-plane"] if a.startswith("--publish=")]
    assert len(published) == 1 and re.fullmatch(r"--publish=127\.0\.0\.1:\d+:6443/TCP", published[0])
    assert not any(a.startswith("--publish") for w in workers for a in runs[w])

    configs = _kubeadm_configs(calls)
    assert sorted(configs) == sorted(runs)
    for worker, fleet_node in zip(workers, fleet.load("starter").node_names()):
        registration = _join_registration(configs[worker])
        labels = dict(kv.split("=", 1) for kv in _kubelet_arg(registration, "node-labels").split(","))
        assert labels["gpulab.dev/fleet-node"] == fleet_node
        assert labels["gpulab.dev/pool"] == fleet_node.rsplit("-", 1)[0]
        taints = registration.get("taints", [])
        if fleet_node == "cpu-0":
            assert taints == []
        else:
            assert taints == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]

    # kind removes its own nodes on failure; our backend then runs `kind delete cluster` as well
    removed = [c for c in calls if c.argv[:3] == ["rm", "-f", "-v"] and c.by_kind_create]
    assert removed and sorted(removed[0].argv[3:]) == sorted(runs)
    assert any(c.by_kind_delete and c.argv[:2] == ["ps", "-a"] for c in calls)
    assert fake_docker.state()["containers"] == {}
    assert not (tmp_path / "state" / "gpulab").exists()  # a fresh, failed cluster leaves no state behind
    kept = tmp_path / "state" / "gpulab.kind-create-failed.log"  # ... but its kind output, named in the error
    assert str(kept) in message and "kubeadm init" in kept.read_text()


def test_retain_keeps_the_half_built_nodes_and_the_state(fake_docker: FakeDocker, tmp_path: Path) -> None:
    be = KindBackend("gpulab")
    with pytest.raises(errors.ClusterError):
        be.up(fleet.load("starter"), LogProgress(), retain=True)
    calls = fake_docker.calls()
    create = [c for c in calls if c.by_kind_create]
    assert create and create[0].parent[-1] == "--retain"
    assert not any(c.argv[:1] == ["rm"] for c in calls)
    assert not any(c.by_kind_delete for c in calls)
    assert len(fake_docker.state()["containers"]) == 7
    state = json.loads((tmp_path / "state" / "gpulab" / "state.json").read_text())
    assert state["backend"] == "kind" and state["fleet"] == "starter" and state["created"] is False
    cfg = YAML(typ="safe").load(be.config_path().read_text())
    assert cfg["apiVersion"] == "kind.x-k8s.io/v1alpha4" and len(cfg["nodes"]) == 7
    assert be.status().problems == ["kind cluster 'gpulab' is not running (run `gpulab up`)"]


def test_a_fleet_beyond_the_worker_limit_fails_before_docker_is_asked_anything(fake_docker: FakeDocker) -> None:
    with pytest.raises(errors.ConfigError, match="at most 8 workers"):
        KindBackend("gpulab").up(fleet.scaled(12), LogProgress())
    assert fake_docker.calls() == []


def test_a_docker_daemon_that_does_not_answer_gets_one_message_with_the_fix(
        fake_docker: FakeDocker, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FAKE_DOCKER_DAEMON", "down")
    with pytest.raises(errors.BackendUnavailable) as info:
        KindBackend("gpulab").up(None, LogProgress())
    message = str(info.value)
    assert "daemon is not answering" in message and "Cannot connect to the Docker daemon" in message
    assert "systemctl start docker" in message and "--backend local" in message
    assert not (tmp_path / "state" / "gpulab").exists()


def test_no_docker_on_path_gets_one_message_with_the_fix(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("GPULAB_STATE_DIR", str(tmp_path / "state"))
    with pytest.raises(errors.BackendUnavailable) as info:
        KindBackend("gpulab").up(None, LogProgress())
    message = str(info.value)
    assert "`docker` is not on PATH" in message and "https://docs.docker.com/get-docker/" in message
    assert not (tmp_path / "state" / "gpulab").exists()
