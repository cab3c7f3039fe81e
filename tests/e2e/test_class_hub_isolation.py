"""Learners of a one-host class cannot reach each other's lab clusters or files, and an idle server is culled
with its cluster.

Two learners log in through the real hub and start a lab in turn (each cluster starts on first use, as its
learner; learner 1 stops their server first, so one cluster runs at a time). Learner 1, with every credential of
their own cluster, tries learner 2's API server (refused: 401, the
other cluster's CA does not know the certificate), learner 2's etcd (refused in the TLS handshake: etcd wants a
client certificate of its own CA) and learner 2's home, cluster keys and answer store (permission denied).
Each refusal has a positive control against learner 1's own cluster, so the test fails if the probes are
broken rather than refused. Finally ``jupyterhub-idle-culler`` (a hub service, 45 s idle here) stops learner
2's server, and the cluster stops with it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from class_hub import Hub, running_class

from labs.classroom import accounts, hubclient

pytestmark = [pytest.mark.timeout(900)]

LAB = "01-device-plugins"
STATE = Path(".local/state/gpulab/gpulab")


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    with running_class(tmp_path_factory.mktemp("class-iso"), "gpliso", 2, cull_after=45, cull_every=10) as running:
        yield running


def _ports(user: str) -> dict[str, int]:
    ports: dict[str, int] = json.loads((accounts.home(user) / STATE / "state.json").read_text())["ports"]
    return ports


def _curl(user: str, *args: str) -> tuple[int, str]:
    proc = accounts.run_as(user, ["curl", "-sS", "-k", "--max-time", "10", *args], check=False, timeout=30)
    return proc.returncode, proc.stdout + proc.stderr


def _start(hub: Hub, user: str) -> None:
    spawned, ready, run = hubclient.login_to_lab_ready_sync(hub.url, user, hub.password, LAB)
    assert run.status == "ok", run.output
    print(f"{user}: server in {spawned:.1f} s, lab ready {ready:.1f} s after login")
    assert hub.cluster_processes_of(user)


async def _stop(hub: Hub, user: str) -> None:
    async with hubclient.HubSession(hub.url, user, hub.password) as session:
        await session.login()
        await session.stop_server()


def test_learners_are_refused_by_each_others_clusters_and_files_and_idle_servers_are_culled(hub: Hub) -> None:
    one, two = hub.learners
    pki = accounts.home(one) / STATE / "pki"
    admin = ["--cert", str(pki / "admin.crt"), "--key", str(pki / "admin.key")]
    etcd_client = ["--cert", str(pki / "apiserver-etcd-client.crt"), "--key", str(pki / "apiserver-etcd-client.key")]
    status = ["-o", "/dev/null", "-w", "%{http_code}"]

    # Positive controls: learner 1's credentials work on learner 1's own cluster. Then that server (and with it
    # the cluster) stops, so one cluster runs at a time; the credentials stay in learner 1's state dir.
    _start(hub, one)
    mine = _ports(one)
    assert _curl(one, *status, *admin, f"https://127.0.0.1:{mine['apiserver']}/api/v1/namespaces") == (0, "200")
    code, out = _curl(one, *etcd_client, f"https://127.0.0.1:{mine['etcd']}/version")
    assert code == 0 and "etcdserver" in out, out
    asyncio.run(_stop(hub, one))
    assert not hub.cluster_processes_of(one)

    _start(hub, two)
    theirs = _ports(two)
    # The API server: learner 1's admin certificate is unknown to learner 2's cluster; no certificate is no better.
    code, out = _curl(one, *status, *admin, f"https://127.0.0.1:{theirs['apiserver']}/api/v1/namespaces")
    assert out == "401", out
    code, out = _curl(one, *status, f"https://127.0.0.1:{theirs['apiserver']}/api/v1/namespaces")
    assert out in ("401", "403"), out
    # etcd: learner 2's etcd ends the handshake for learner 1's etcd client certificate, and for none.
    for creds in (etcd_client, []):
        code, out = _curl(one, *creds, f"https://127.0.0.1:{theirs['etcd']}/version")
        assert code != 0 and "etcdserver" not in out, out

    # Files: learner 2's home, cluster keys and answer store are closed to learner 1.
    other = accounts.home(two)
    for target in (other, other / STATE / "pki" / "admin.key", other / ".local/share/gpulab/quiz-answers.sqlite3"):
        proc = accounts.run_as(one, ["cat", str(target)] if target != other else ["ls", str(target)], check=False)
        assert proc.returncode != 0 and "Permission denied" in proc.stderr, (target, proc.stdout, proc.stderr)
    assert accounts.run_as(one, ["ls", str(accounts.home(one))], check=False).returncode == 0

    # The exchange, before any release: the course's folder is already the instructor's (class init), so learner
    # 1 can neither plant an outbound of their own in it nor move it away for one of their own.
    course = hub.folder / "exchange" / "gpulab"
    assert accounts.owner_name(course) == hub.instructor and not (course / "outbound").exists()
    for argv in (["mkdir", str(course / "outbound")], ["mv", str(course), str(course) + ".old"]):
        proc = accounts.run_as(one, argv, check=False)
        assert proc.returncode != 0 and any(e in proc.stderr for e in ("Permission denied", "Operation not permitted")), (
            argv, proc.stderr)

    # The idle culler stops learner 2's server (45 s without activity), and the cluster goes with it.
    deadline = time.monotonic() + 240
    while hub.processes_of(two) and time.monotonic() < deadline:
        time.sleep(3)
    assert not hub.processes_of(two), f"still running: {hub.processes_of(two)}\n{hub.log_tail()}"
    assert f"Culling server {two}" in hub.log.read_text(errors="replace")  # the culler did it, not a crash
