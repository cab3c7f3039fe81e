"""The local backend runs a real control plane: the real scheduler places pods and the cluster survives a dead
component and a stopped heartbeat (tenant RBAC and loopback-only listening: tests/e2e/test_isolation.py)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from cluster import binaries, errors, fleet as fleet_mod, gobuild, pki as pki_mod, seed
from cluster.backends import local as local_backend
from cluster.backends.local import LocalBackend
from cluster.kube import restmapper
from cluster.kube.client import Client
from cluster.progress import LogProgress
from cluster.testing import LocalCluster, wait_for
from gpu_e2e import gpu_operator
from prerequisites import require

__all__ = ["gpu_operator"]


def _pod(name: str, **spec: object) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "3600"]}], **spec}}


def test_status_json_lists_every_fleet_node_ready(local_cluster: LocalCluster) -> None:
    out = local_cluster.gpulab("status", "--json")
    data = json.loads(out.stdout)
    assert data["healthy"] is True
    names = {n["name"] for n in data["nodes"]}
    assert names == {"cpu-0", "t4-0", "l40s-0", "a100-0", "a100-1", "h100-0"}
    assert all(n["ready"] for n in data["nodes"])
    a100 = next(n for n in data["nodes"] if n["name"] == "a100-0")
    assert "nvidia.com/gpu=present:NoSchedule" in a100["taints"]
    got = local_cluster.kubectl("get", "nodes", "-o", "name")
    assert "node/h100-0" in got.stdout
    version = local_cluster.kubectl("version", "-o", "json")
    assert json.loads(version.stdout)["serverVersion"]["gitVersion"] == "v1.36.3"


def test_recorded_discovery_matches_the_live_api_server(local_cluster: LocalCluster) -> None:
    """cluster/kube/discovery.json (the REST mapping used before a cluster is contacted) is what our API server
    serves; the live mapper resolves built-in kinds and the ClusterPolicy CRD the same way."""
    recorded = json.loads(restmapper.RECORDED_FILE.read_text())["groupVersions"]
    with local_cluster.client() as c:
        for gv, listing in recorded.items():
            live = restmapper.resources_of(c.get(f"/api/{gv}" if "/" not in gv else f"/apis/{gv}"), gv)
            assert live == restmapper.resources_of(listing, gv), gv
        from_crds = {crd["spec"]["group"] for crd in
                     c.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions").get("items", [])}
        # CRDs come and go with the operator and with labs (06b installs prometheus-operator's): not built in
        built_in = {g["groupVersion"] for group in c.get("/apis")["groups"] for g in group["versions"]
                    if group["name"] not in from_crds}
        assert built_in | {"v1"} == set(recorded)
        assert c.mapper.lookup("resource.k8s.io/v1", "ResourceSlice") == \
            restmapper.recorded().lookup("resource.k8s.io/v1", "ResourceSlice")


def test_the_cluster_policy_crd_resolves_through_discovery(local_cluster: LocalCluster, gpu_operator: Client) -> None:
    """A CRD resolves like a built-in kind, from the server's answers, and as recorded from our CRD file."""
    with local_cluster.client() as c:
        got = c.mapper.mapping("nvidia.com/v1", "ClusterPolicy")
        assert got == restmapper.recorded().mapping("nvidia.com/v1", "ClusterPolicy")
        assert c.get(got.path("cluster-policy"))["kind"] == "ClusterPolicy"


def test_real_scheduler_binds_and_pod_agent_runs(local_cluster: LocalCluster, namespace: str) -> None:
    pod = _pod("placed", nodeSelector={"gpulab.dev/pool": "a100"},
               tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
    with local_cluster.client() as c:
        c.create(f"/api/v1/namespaces/{namespace}/pods", pod)
        got = wait_for(lambda: (p := c.get(f"/api/v1/namespaces/{namespace}/pods/placed"))["status"].get("phase")
                       == "Running" and p, what="pod Running")
    assert got["spec"]["nodeName"] in ("a100-0", "a100-1")
    assert got["status"]["podIP"]
    assert got["status"]["containerStatuses"][0]["ready"] is True


def test_pod_that_fits_nowhere_gets_the_schedulers_event(local_cluster: LocalCluster, namespace: str) -> None:
    pod = _pod("nowhere", nodeSelector={"gpulab.dev/pool": "a100"})  # no toleration for the GPU taint
    with local_cluster.client() as c:
        c.create(f"/api/v1/namespaces/{namespace}/pods", pod)

        def failed_event() -> str | None:
            evs = c.get(f"/api/v1/namespaces/{namespace}/events", fieldSelector="involvedObject.name=nowhere")
            msgs = [e["message"] for e in evs["items"] if e["reason"] == "FailedScheduling"]
            return msgs[0] if msgs else None

        message = wait_for(failed_event, what="FailedScheduling event")
        assert c.get(f"/api/v1/namespaces/{namespace}/pods/nowhere")["status"]["phase"] == "Pending"
    assert re.match(r"0/6 nodes are available: ", message), message
    assert "node(s) had untolerated taint(s)" in message
    assert "node(s) didn't match Pod's node affinity/selector" in message


def test_job_pods_complete(local_cluster: LocalCluster, namespace: str) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
           "spec": {"template": {"metadata": {"annotations": {"gpulab.dev/run-seconds": "1"}},
                                 "spec": {"restartPolicy": "Never", "containers": [
                                     {"name": "main", "image": "busybox:1.36", "command": ["true"]}]}}}}
    with local_cluster.client() as c:
        c.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", job)
        wait_for(lambda: c.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/once").get("status", {}).get("succeeded"),
                 timeout=60, what="Job succeeded")


def test_killed_apiserver_is_reported_and_restored_with_objects(local_cluster: LocalCluster, namespace: str) -> None:
    with local_cluster.client() as c:
        c.create(f"/api/v1/namespaces/{namespace}/configmaps",
                 {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "keep-me"}, "data": {"a": "1"}})
    be = local_cluster.backend
    pid = be.component_pid("kube-apiserver")  # its own process, or kube-control-plane's
    assert pid
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: be.component_pid("kube-apiserver") is None, what="apiserver gone")
    out = local_cluster.gpulab("status", check=False)
    assert out.returncode != 0
    assert "kube-apiserver is not running" in out.stdout
    local_cluster.gpulab("up")
    with local_cluster.client() as c:
        assert c.get(f"/api/v1/namespaces/{namespace}/configmaps/keep-me")["data"] == {"a": "1"}
    assert json.loads(local_cluster.gpulab("status", "--json").stdout)["healthy"] is True


def test_stopped_heartbeat_turns_node_notready_via_lifecycle_controller(local_cluster: LocalCluster) -> None:
    local_cluster.gpulab("node", "heartbeat", "cpu-0", "off")
    try:
        with local_cluster.client() as c:
            def unready() -> dict[str, object] | None:
                node = c.get("/api/v1/nodes/cpu-0")
                ready = next(x for x in node["status"]["conditions"] if x["type"] == "Ready")
                taints = {t["key"] for t in node["spec"].get("taints", [])}
                return node if ready["status"] == "Unknown" and "node.kubernetes.io/unreachable" in taints else None

            node = wait_for(unready, timeout=60, what="cpu-0 NotReady")
            ready = next(x for x in node["status"]["conditions"] if x["type"] == "Ready")  # type: ignore[index]
            assert ready["reason"] == "NodeStatusUnknown"
    finally:
        local_cluster.gpulab("node", "heartbeat", "cpu-0", "on")
    with local_cluster.client() as c:
        wait_for(lambda: all(x["status"] == "True" for x in c.get("/api/v1/nodes/cpu-0")["status"]["conditions"]
                             if x["type"] == "Ready")
                 and not any(t["key"].startswith("node.kubernetes.io/") for t in
                             c.get("/api/v1/nodes/cpu-0")["spec"].get("taints", [])),
                 timeout=60, what="cpu-0 Ready again")


def test_up_again_is_a_noop(local_cluster: LocalCluster) -> None:
    before = {c.name: c.pid for c in local_cluster.backend.components()}
    started = time.monotonic()
    local_cluster.gpulab("up")
    assert time.monotonic() - started < 20
    assert {c.name: c.pid for c in local_cluster.backend.components()} == before


def test_port_already_taken_is_avoided(tmp_path: object) -> None:
    """A second cluster whose saved apiserver port is occupied picks another free port."""
    from pathlib import Path

    root = Path(str(tmp_path))
    be = LocalBackend("porttest", root)
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    taken = blocker.getsockname()[1]
    be.dir.mkdir(parents=True)
    (be.dir / "state.json").write_text(json.dumps({"backend": "local", "ports": {"apiserver": taken}}))
    try:
        rec = be.record()
        assert rec is not None
        ports = local_backend._Ports.choose(be, rec.ports)
        assert ports["apiserver"] != taken
        assert len(set(ports.values())) == len(ports)
    finally:
        blocker.close()


def test_fleet_mismatch_is_refused(local_cluster: LocalCluster) -> None:
    from cluster import fleet

    try:
        local_cluster.backend.up(fleet.load("platform"), LogProgress())
    except errors.ClusterError as exc:
        assert "already runs fleet 'starter'" in str(exc)
    else:
        raise AssertionError("expected a ClusterError")


def test_seeded_cluster_has_bootstrap_objects_and_trusts_only_its_own_client_ca(local_cluster: LocalCluster) -> None:
    """The session cluster started from the etcd bootstrap seed (cluster/seed.py): the API server's bootstrap
    objects are all there, and the seed's client CA was pruned from the published bundle."""
    with local_cluster.client() as c:
        cm = c.get("/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication")
        own_ca = (local_cluster.backend.dir / "pki" / "ca.crt").read_text()
        assert cm["data"]["client-ca-file"].strip() == own_ca.strip()
        assert cm["data"]["client-ca-file"].count("BEGIN CERTIFICATE") == 1
        for path in ("/apis/rbac.authorization.k8s.io/v1/clusterroles/system:kube-scheduler",
                     "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/system:kube-controller-manager",
                     "/apis/scheduling.k8s.io/v1/priorityclasses/system-node-critical",
                     "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/exempt",
                     "/api/v1/namespaces/kube-node-lease", "/api/v1/namespaces/default/services/kubernetes"):
            assert c.exists(path), path
    be = local_cluster.backend
    ports = _saved_ports(be)
    specs = be._specs(binaries.ensure(LogProgress()), pki_mod.Pki(be.dir / "pki"), ports, 6)
    assert (seed.seed_path(specs["kube-apiserver"].argv) / "member" / "snap" / "db").is_file()


def test_unusable_seed_falls_back_to_an_empty_etcd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A seed without etcd's database (a broken cache) is not used: the cluster bootstraps from an empty etcd."""
    broken = tmp_path / "broken-seed"
    (broken / "member" / "wal").mkdir(parents=True)
    monkeypatch.setattr(seed, "seed_path", lambda argv: broken)
    be = LocalBackend("fallback", tmp_path / "state")
    try:
        st = be.up(fleet_mod.scaled(2), LogProgress())
        assert all(n.ready for n in st.nodes) and len(st.nodes) == 2
        with_ca = be.dir / "pki" / "ca.crt"
        with Client.from_kubeconfig(be.kubeconfig()) as c:
            cm = c.get("/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication")
            assert cm["data"]["client-ca-file"].strip() == with_ca.read_text().strip()
            assert c.exists("/apis/rbac.authorization.k8s.io/v1/clusterroles/cluster-admin")
    finally:
        be.down(purge=True)


def _placed_by_a_deployment(c: Client, name: str) -> str:
    """A Deployment's pod bound to a node: the controller manager made it, the scheduler placed it."""
    pod_spec: dict[str, object] = {**_pod(name)["spec"], "tolerations": [{"operator": "Exists"}]}  # type: ignore[dict-item]
    c.create("/apis/apps/v1/namespaces/default/deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}}})

    def bound() -> str | None:
        pods = c.get("/api/v1/namespaces/default/pods", labelSelector=f"app={name}")["items"]
        return next((p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")), None)

    node: str = wait_for(bound, timeout=60, what=f"deployment {name}'s pod bound")
    return node


def _gone(pid: int) -> bool:
    import psutil

    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def test_up_moves_a_running_cluster_between_the_two_control_plane_layouts(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster started with the API server, controller manager and scheduler as three processes (before
    kube-control-plane, or where it is not built) moves to the one process at the next `up`, keeping its objects,
    and back again when the binary is gone."""
    bins = binaries.ensure(LogProgress())
    require(bins.path(gobuild.extra_binary_name(local_backend.COMBINED)).is_file(),
            "kube-control-plane is not built (`gpulab binaries ensure` builds it where Go is installed)")
    three = LocalBackend._processes
    monkeypatch.setattr(LocalBackend, "_processes", lambda self, bins, specs: specs)
    be = LocalBackend("layouts", tmp_path / "state")
    try:
        be.up(fleet_mod.scaled(2), LogProgress())
        old = {name: be.sup.pid(name) for name in local_backend.HOSTED}
        assert all(old.values()) and be.sup.pid(local_backend.COMBINED) is None, old
        with Client.from_kubeconfig(be.kubeconfig()) as c:
            c.create("/api/v1/namespaces/default/configmaps",
                     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kept"}, "data": {"a": "1"}})
            _placed_by_a_deployment(c, "before")

        monkeypatch.setattr(LocalBackend, "_processes", three)
        st = be.up(fleet_mod.scaled(2), LogProgress())
        assert st.healthy and all(n.ready for n in st.nodes), st.problems
        combined = be.sup.pid(local_backend.COMBINED)
        assert combined and all(be.sup.pid(name) is None for name in local_backend.HOSTED)
        assert all(_gone(pid) for pid in old.values() if pid), old
        assert {c.name: c.pid for c in be.components() if c.name in local_backend.HOSTED} == \
            dict.fromkeys(local_backend.HOSTED, combined)
        with Client.from_kubeconfig(be.kubeconfig()) as c:
            assert c.get("/api/v1/namespaces/default/configmaps/kept")["data"] == {"a": "1"}
            _placed_by_a_deployment(c, "after")

        monkeypatch.setattr(LocalBackend, "_processes", lambda self, bins, specs: specs)
        st = be.up(fleet_mod.scaled(2), LogProgress())
        assert st.healthy, st.problems
        assert be.sup.pid(local_backend.COMBINED) is None and _gone(combined)
        assert all(be.sup.pid(name) for name in local_backend.HOSTED)
        with Client.from_kubeconfig(be.kubeconfig()) as c:
            _placed_by_a_deployment(c, "back")
    finally:
        be.down(purge=True)


def test_binaries_ensure_prepares_the_seed_that_up_uses(local_cluster: LocalCluster) -> None:
    out = local_cluster.gpulab("binaries", "ensure").stdout
    line = next(x for x in out.splitlines() if x.startswith("etcd bootstrap seed: "))
    prepared = Path(line.split(": ", 1)[1])
    be = local_cluster.backend
    ports = _saved_ports(be)
    specs = be._specs(binaries.ensure(LogProgress()), pki_mod.Pki(be.dir / "pki"), ports, 6)
    assert prepared == seed.seed_path(specs["kube-apiserver"].argv)
    assert (prepared / "member" / "snap" / "db").is_file()


def test_doctor_reports_the_seed_and_a_healthy_cluster(local_cluster: LocalCluster,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # one table row per line
    rows = {line.split("│")[1].strip(): line for line in local_cluster.gpulab("doctor").stdout.splitlines()
            if line.count("│") >= 3}
    seed_row = rows["etcd bootstrap seed (faster fresh starts)"]
    assert "absent" not in seed_row and "seeds" in seed_row
    combined_row = next(line for key, line in rows.items() if key.startswith("kube-control-plane"))
    assert "absent" not in combined_row and "kube-control-plane-" in combined_row
    assert "healthy" in rows["local cluster"]


@pytest.mark.parametrize("argv,says", [
    (["--component=kube-scheduler"], "the first component must be --component=kube-apiserver"),
    (["--component=kube-apiserver", "--component=kube-proxy"], 'unknown component "kube-proxy"'),
    (["--component=kube-apiserver", "--component=kube-apiserver"], 'component "kube-apiserver" given twice'),
    (["--component=kube-apiserver", "--component=kube-scheduler"], "--ready-kubeconfig is needed"),
    (["--v=2", "--component=kube-apiserver"], 'unexpected argument "--v=2" before the first --component='),
])
def test_kube_control_plane_refuses_bad_usage_in_one_line(argv: list[str], says: str) -> None:
    binary = binaries.ensure(LogProgress()).path(gobuild.extra_binary_name(local_backend.COMBINED))
    proc = subprocess.run([str(binary), *argv], capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("kube-control-plane: ")
    assert says in proc.stderr and proc.stderr.count("\n") == 1


def _saved_ports(be: LocalBackend) -> dict[str, int]:
    rec = be.record()
    assert rec is not None, f"{be.dir} has no state record"
    return dict(rec.ports)
