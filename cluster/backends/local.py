"""The ``local`` backend: a real control plane as local processes on 127.0.0.1, with simulated nodes.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler run from the pinned binaries with a generated
PKI, RBAC and the default admission plugins (ResourceQuota included); the node and pod agents play the kubelets.
The API server, controller manager and scheduler share one process (``kube-control-plane``, built from the same
upstream modules) when that binary is built, as it is wherever Go is; else each runs from its own binary.
Bring-up is an ordered list of small steps; every step is idempotent, so ``up`` on a running cluster is a no-op
and ``up`` after a crash restarts only what died, with etcd's data (every object) intact.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from collections.abc import Mapping
from typing import Any


from cluster import (binaries, errors, fleet as fleet_mod, gobuild, ops, pki as pki_mod, progress as progress_mod,
                     safefs, seed, settings, staterecord, versions)
from cluster.backends import steps as steps_mod
from cluster.backends.base import ClusterStatus, ComponentStatus, StateDir
from cluster.kube import http as kube_http, kubeconfig
from cluster.kube.client import Client
from cluster.sim import nodes as sim_nodes
from cluster.supervisor import ProcessSpec, Supervisor, free_port

log = logging.getLogger(__name__)

CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
# One process for the API server, controller manager and scheduler (cluster/gosrc/kube-control-plane): each is
# upstream's own command with its own flags, and one Go runtime and one copy of the code they share instead of
# three cut an idle lab cluster's RSS by about a third (issue 17; docs/local-backend.md). Without Go (binaries
# downloaded, not built) the three run from their own binaries as separate processes.
COMBINED = "kube-control-plane"
HOSTED = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
# Every process name the supervisor may know for a local cluster's control plane, in either layout.
CONTROL_PLANE_PROCESSES = (*CONTROL_PLANE, COMBINED)
AGENTS = ("sim-agents",)
# The agents' separate processes of older gpulab versions: stopped by `up` and `down` of a cluster they still run in.
OLD_AGENTS = ("node-agent", "pod-agent", "gpu-stack")
STARTED_FIRST = ("etcd", "kube-apiserver", COMBINED, "sim-agents")
# The controller manager's controllers that labs need: all on-by-default ones but those of volumes, services'
# endpoints, autoscaling, certificate signing requests and storage versions, which no lab uses and some of which
# poll while idle (the attach-detach reconciler every 100 ms, the autoscaler every 15 s). Names:
# `kube-controller-manager --help`, --controllers.
KCM_CONTROLLERS = ("*", *(f"-{c}-controller" for c in (
    "persistentvolume-attach-detach", "persistentvolume-binder", "persistentvolume-expander",
    "persistentvolume-protection", "persistentvolumeclaim-protection", "ephemeral-volume",
    "volumeattributesclass-protection", "endpoints", "endpointslice", "endpointslice-mirroring",
    "horizontal-pod-autoscaler", "ttl", "certificatesigningrequest-approving", "certificatesigningrequest-cleaner",
    "certificatesigningrequest-signing", "podcertificaterequest-cleaner",
    "kube-apiserver-serving-clustertrustbundle-publisher", "legacy-serviceaccount-token-cleaner",
    "storage-version-migrator", "storageversion-garbage-collector", "validatingadmissionpolicy-status")))
# The Go runtime of the control-plane programs collects garbage when the heap has grown by half since the last
# collection instead of doubled (https://go.dev/doc/gc-guide, GOGC): a smaller resident set for an idle lab
# cluster, at a CPU cost that is small while it is idle.
# Each program runs Go code on one OS thread at a time (GOMAXPROCS=1; https://pkg.go.dev/runtime, "Environment
# Variables"): with one P the runtime has no second processor to wake and spin looking for work each time a timer
# or a watch event wakes a goroutine. Measured on the two-core development machine under `cluster-slot --all`,
# idle starter cluster, 3 runs each (issue 17): the whole cluster's idle CPU 27.5/28.9/31.0 -> 19.0/21.8/24.2
# millicores (min/median/max, the API server included: 9.2 -> 6.8; the controller manager 7.8 -> 5.5, etcd 9.0 -> 6.7).
# The API server has its own setting below.
GO_ENV = (("GOGC", "50"), ("GOMAXPROCS", "1"))
# The API server holds most of a lab cluster's private memory: its heap may grow by a quarter between collections.
# GOGC=10 saved another ~11 MiB but cost ~2 millicores of idle CPU and ~1.3 s of start-up (3.58 -> 4.88 s median of
# four starts): not taken. The API server keeps the default GOMAXPROCS (one per core): with 1 its idle CPU was
# ~1.7 m lower but the cluster's start ~0.8 s slower (3.43 -> 4.25 s median of four starts, quiet machine), since
# its start-up work is the critical path and runs on both cores.
APISERVER_GO_ENV = (("GOGC", "25"),)
# kube-control-plane: the API server's setting (its start-up is the critical path, its heap the largest part); it
# sets GOMAXPROCS itself, one processor while idle and every core while busy (cluster/gosrc/kube-control-plane).
COMBINED_GO_ENV = APISERVER_GO_ENV
# Built-in API versions that no lab, notebook, grader or the simulated GPU stack uses, and whose controllers are
# off (KCM_CONTROLLERS): HorizontalPodAutoscaler and CertificateSigningRequest. Each served version costs the API
# server its REST storage, OpenAPI models and discovery entries (measured, issue 17: ~6 MiB of the
# idle API server's RSS for these three, and the start-up work to build them),
# and the garbage collector's and quota controller's monitors one informer per resource. --runtime-config:
# `kube-apiserver --help`; group/version names: the API groups' register.go in k8s.io/api. resource.k8s.io (DRA),
# policy (the scheduler's preemption reads PodDisruptionBudgets), storage.k8s.io (the scheduler's volume plugins'
# informers), node.k8s.io (the RuntimeClass admission plugin), admissionregistration.k8s.io (the webhook admission
# plugins), flowcontrol (priority and fairness), events.k8s.io (the scheduler's events), networking.k8s.io
# (Service IP allocation) and discovery.k8s.io stay.
DISABLED_APIS = ("autoscaling/v1", "autoscaling/v2", "certificates.k8s.io/v1")
MIN_FREE_FRESH_MIB = 160  # etcd's first WAL segment (64 MiB) and snapshot, PKI, logs, with room to grow
# A restart writes state.json, kubeconfigs and logs, and etcd preallocates its next 64 MiB WAL segment at every
# start (go.etcd.io/etcd/server/v3/storage/wal/file_pipeline.go: the pipeline allocates a segment ahead and removes
# it at stop), so a restart needs that room again even though the stop gave it back.
MIN_FREE_MIB = 80
CERT_WARNING = 86400.0  # `status` reports certificates that expire within a day
# ClusterRoleBindings that give gpulab's own identities their rights (instead of the unrevocable system:masters):
# binding name -> group in the client certificate (cluster/pki.py)
IDENTITY_BINDINGS = {"gpulab:cluster-admins": pki_mod.ADMIN_GROUP, "gpulab:sim-agents": pki_mod.AGENT_GROUP}
_CRB = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"


def heartbeat_timing(node_count: int) -> tuple[float, int]:
    """(lease renewal period, node-monitor grace period) for a fleet size.

    Small fleets renew every 10 s, as a kubelet does (a quarter of its 40 s lease: k8s.io/kubernetes
    pkg/kubelet/nodelease), and a stopped heartbeat shows NotReady within about 40 s; renewing every 5 s made the
    lease writes most of an idle lab cluster's CPU (issue 17). Large fleets renew less often (at most ~40
    renewals a second) with a grace period of three periods plus 5 s, so a laptop is not kept busy.
    """
    renew = max(10.0, node_count / 40.0)
    return renew, max(40, int(renew * 3) + 5)


def identity_binding(name: str, group: str) -> dict[str, Any]:
    """A ClusterRoleBinding of ``cluster-admin`` to a certificate group of ours (revoked by deleting it)."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": {"gpulab.dev/identity": "true"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]}


class LocalBackend(StateDir):
    name = "local"

    def __init__(self, cluster_name: str = "gpulab", root: Path | None = None) -> None:
        super().__init__(cluster_name, root)
        self.sup = Supervisor(self.dir)

    # --- state -------------------------------------------------------------------------------------------

    def _kc(self, who: str) -> Path:
        return self.dir / "kubeconfigs" / f"{who}.kubeconfig"

    def server(self) -> str:
        rec = self.record()
        port = rec.ports.get("apiserver") if rec else None
        if not port:
            raise errors.ClusterError("no local cluster has been created yet", hint="gpulab up")
        return f"https://127.0.0.1:{port}"

    # --- bring-up steps ----------------------------------------------------------------------------------

    def _scheduler_config(self) -> Path:
        return self.dir / "kube-scheduler.yaml"

    def _specs(self, bins: binaries.Binaries, pki: pki_mod.Pki, ports: dict[str, int],
               node_count: int) -> dict[str, ProcessSpec]:
        d = self.dir
        renew, grace = heartbeat_timing(node_count)
        etcd_url = f"https://127.0.0.1:{ports['etcd']}"
        peer_url = f"https://127.0.0.1:{ports['etcd-peer']}"
        # Health probes stay open, as upstream's default; /metrics is left to delegated authentication and
        # authorization (a SubjectAccessReview to the API server), so an anonymous scrape is refused.
        allow = "--authorization-always-allow-paths=/healthz,/readyz,/livez"
        return {
            "etcd": ProcessSpec("etcd", (
                str(bins.path("etcd")), "--name=gpulab", f"--data-dir={d / 'etcd'}",
                f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=gpulab={peer_url}", "--quota-backend-bytes=4294967296",
                "--auto-compaction-retention=1", "--unsafe-no-fsync", "--log-level=warn",
                # One member on loopback: a 200 ms election timeout makes it leader in ~0.1 s instead of ~0.6 s.
                # The tick (heartbeat interval) is the longest etcd allows for it (a fifth: go.etcd.io/etcd/server/v3
                # embed/config.go): etcd wakes 25 times a second while idle, not 50 as with 20 ms, which cost an
                # idle lab cluster ~4 millicores (issue 17).
                "--heartbeat-interval=40", "--election-timeout=200",
                # Client-certificate authentication on the client and peer ports, as kubeadm sets etcd up: only
                # certificates of the etcd CA (the API server's etcd client certificate) get in.
                f"--cert-file={pki.cert('etcd-server')}", f"--key-file={pki.key('etcd-server')}",
                "--client-cert-auth=true", f"--trusted-ca-file={pki.etcd_ca_cert}",
                f"--peer-cert-file={pki.cert('etcd-peer')}", f"--peer-key-file={pki.key('etcd-peer')}",
                "--peer-client-cert-auth=true", f"--peer-trusted-ca-file={pki.etcd_ca_cert}",
            ), GO_ENV),
            "kube-apiserver": ProcessSpec("kube-apiserver", (
                str(bins.path("kube-apiserver")), "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
                f"--secure-port={ports['apiserver']}", f"--etcd-servers={etcd_url}",
                f"--etcd-cafile={pki.etcd_ca_cert}", f"--etcd-certfile={pki.cert('apiserver-etcd-client')}",
                f"--etcd-keyfile={pki.key('apiserver-etcd-client')}",
                f"--encryption-provider-config={pki.encryption_config}",
                "--endpoint-reconciler-type=none", "--service-cluster-ip-range=10.96.0.0/16",
                f"--tls-cert-file={pki.serving_cert}", f"--tls-private-key-file={pki.serving_key}",
                f"--client-ca-file={pki.ca_cert}", f"--service-account-key-file={pki.sa_pub}",
                f"--service-account-signing-key-file={pki.sa_key}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--kubelet-client-certificate={pki.client_cert('apiserver-kubelet-client')}",
                f"--kubelet-client-key={pki.client_key('apiserver-kubelet-client')}",
                # Every connection to a node stays on loopback and needs no DNS: the API server dials a node's
                # InternalIP (127.1.x.y) at its kubelet port, never its Hostname (the default list starts with
                # Hostname, which it would look up in the machine's DNS), and checks the simulated kubelet's serving
                # certificate against the cluster CA (docs/local-backend.md, "Node addresses").
                "--kubelet-preferred-address-types=InternalIP",
                f"--kubelet-certificate-authority={pki.ca_cert}",
                "--authorization-mode=Node,RBAC", "--allow-privileged=true", "--profiling=false",
                "--enable-admission-plugins=NodeRestriction", "--event-ttl=2h", "--v=1",
                # Idle cost (issue 17): no per-resource object counts and database size polled from etcd for
                # metrics (one etcd request per resource type a minute); 0 disables both
                # (k8s.io/apiserver pkg/server/options/etcd.go). List requests then get the minimum
                # priority-and-fairness seats, which is all a lab cluster's lists need.
                "--etcd-count-metric-poll-period=0", "--etcd-db-metric-poll-interval=0",
                # No watch cache: lists and watches are served by etcd directly
                # (k8s.io/apiserver pkg/server/options/etcd.go, --watch-cache). A lab cluster holds a few
                # hundred objects, so etcd serves them at once, and the API server keeps no second copy of each
                # resource type's objects and recent events.
                "--watch-cache=false",
                # Labs write no ValidatingAdmissionPolicy or MutatingAdmissionPolicy: their admission plugins
                # (and the CEL environments they build) are left out; webhooks, Pod Security, quota and the
                # other default plugins stay.
                "--disable-admission-plugins=ValidatingAdmissionPolicy,MutatingAdmissionPolicy",
                f"--runtime-config={','.join(f'{gv}=false' for gv in DISABLED_APIS)}",
            ), APISERVER_GO_ENV),
            "kube-controller-manager": ProcessSpec("kube-controller-manager", (
                str(bins.path("kube-controller-manager")), f"--kubeconfig={self._kc('controller-manager')}",
                f"--authentication-kubeconfig={self._kc('controller-manager')}",
                f"--authorization-kubeconfig={self._kc('controller-manager')}",
                "--bind-address=127.0.0.1", f"--secure-port={ports['controller-manager']}", "--leader-elect=false",
                f"--root-ca-file={pki.ca_cert}", f"--service-account-private-key-file={pki.sa_key}",
                f"--cluster-signing-cert-file={pki.ca_cert}", f"--cluster-signing-key-file={pki.ca_key}",
                "--use-service-account-credentials=true", "--node-monitor-period=5s",
                # The default 20 requests a second made lifting 1,000 new nodes' not-ready taints take ~50 s.
                "--kube-api-qps=1000", "--kube-api-burst=2000",
                # A quota created together with its pods can be recounted from a pod cache that has not seen them
                # yet (upstream race); only the periodic full recount repairs it, by default after 5 minutes.
                "--resource-quota-sync-period=15s",
                f"--node-monitor-grace-period={grace}s", "--profiling=false", allow, "--v=1",
                f"--controllers={','.join(KCM_CONTROLLERS)}",
            ), GO_ENV),
            "kube-scheduler": ProcessSpec("kube-scheduler", (
                str(bins.path("kube-scheduler")), f"--config={self._scheduler_config()}",
                f"--authentication-kubeconfig={self._kc('scheduler')}",
                f"--authorization-kubeconfig={self._kc('scheduler')}",
                "--bind-address=127.0.0.1", f"--secure-port={ports['scheduler']}",
                "--profiling=false", allow, "--v=1",
            ), GO_ENV),
            # The node agent, the pod agent and the GPU stack share one Python process (cluster/sim/agents.py).
            "sim-agents": ProcessSpec("sim-agents", (
                sys.executable, "-m", "cluster.sim.agents", f"--kubeconfig={self._kc('agent')}",
                f"--fleet={d / 'fleet.yaml'}", f"--lease-seconds={grace}", f"--renew-every={renew}",
                f"--device-checkpoint={d / 'kubelet' / 'device-checkpoint.json'}",
                f"--kubelet-port={ports['kubelet']}", f"--kubelet-pki={pki.kubelet_dir}",
                f"--client-ca={pki.ca_cert}", f"--pod-logs={d / 'kubelet' / 'pod-logs'}",
            )),
        }

    def _wait_http(self, name: str, url: str, timeout: float, client_cert: tuple[str, str] | None = None,
                   ca: str | None = None) -> None:
        """Wait for ``url`` to answer ok while process ``name`` runs; its log's end when it exits first."""
        deadline = time.monotonic() + timeout
        last = ""
        with kube_http.probe(ca=ca, client_cert=client_cert) as http:
            while time.monotonic() < deadline:
                if not self.sup.pid(name):
                    tail = self.sup.log_tail(name)
                    if "no space left on device" in tail:
                        raise errors.ClusterError(
                            f"{name} exited during start-up: no space left on the device that holds the cluster "
                            f"state under {self.dir}",
                            hint=f"free some space there (`df -h {self.dir}`), then `gpulab up` again; the "
                            f"component's log: {self.sup.log_dir / (name + '.log')}",
                        )
                    ended = self.sup.how_it_ended(name)
                    raise errors.ClusterError(
                        f"{name} exited during start-up{f' ({ended})' if ended else ''}:\n{tail}",
                        hint=f"see {self.sup.log_dir / (name + '.log')}; a port clash or a corrupt state dir "
                        "are the usual causes (`gpulab down --purge` starts afresh)",
                    )
                last = http.check(url)
                if not last:
                    return
                time.sleep(0.05)
        raise errors.ClusterError(f"{name} did not become healthy within {timeout:.0f} s ({last})",
                                  hint=f"see {self.sup.log_dir / (name + '.log')}")

    def _wait_api_ready(self, ports: dict[str, int], pki: pki_mod.Pki, prog: progress_mod.Progress,
                        process: str = "kube-apiserver") -> None:
        """etcd healthy (with the API server's etcd client certificate), then the API server's /readyz (as the
        admin, over TLS)."""
        etcd_client = (str(pki.cert("apiserver-etcd-client")), str(pki.key("apiserver-etcd-client")))
        self._wait_http("etcd", f"https://127.0.0.1:{ports['etcd']}/health", 30, etcd_client, str(pki.etcd_ca_cert))
        prog.advance(detail="etcd")
        admin = (str(pki.client_cert("admin")), str(pki.client_key("admin")))
        self._wait_http(process, f"https://127.0.0.1:{ports['apiserver']}/readyz", 90, admin,
                        str(pki.ca_cert))

    def steps(self) -> list[steps_mod.Step]:
        """The bring-up, in order (see the classes below): one small step per concern."""
        return [steps_mod.FleetStep("local", "gpulab up"), _Binaries(), _Pki(self), _Ports(self),
                _Kubeconfigs(self), _Seed(self), _ControlPlane(self), _WaitNodes(self), _Workloads(self)]
        # The GPU stack needs no step of its own here: local runs it inside the sim-agents process (one Python
        # process for node agent, pod agent and GPU stack saves about 95 MiB per learner); kind runs the same
        # ``cluster.sim.gpu.stack`` as a host process through ``steps.GpuStackStep``.

    def _processes(self, bins: binaries.Binaries, specs: dict[str, ProcessSpec]) -> dict[str, ProcessSpec]:
        """What runs: the components' specs, with the API server, controller manager and scheduler as one
        ``kube-control-plane`` process when that binary is built (each keeps its own flags; the process starts the
        other two once the API server is ready, reading /readyz with the controller manager's kubeconfig)."""
        combined = bins.path(gobuild.extra_binary_name(COMBINED))
        if not combined.is_file():
            return specs
        argv = [str(combined), f"--ready-kubeconfig={self._kc('controller-manager')}"]
        for name in HOSTED:
            argv += [f"--component={name}", *specs[name].argv[1:]]
        out = {name: spec for name, spec in specs.items() if name not in HOSTED}
        out[COMBINED] = ProcessSpec(COMBINED, tuple(argv), COMBINED_GO_ENV)
        return out

    def component_pid(self, component: str) -> int | None:
        """The pid of the process a component runs in (its own, or kube-control-plane's), or None."""
        return self.sup.pid(component) or (self.sup.pid(COMBINED) if component in HOSTED else None)

    def _device_checkpoint(self) -> Path:
        return self.dir / "kubelet" / "device-checkpoint.json"

    def up(self, fl: fleet_mod.Fleet | None, prog: progress_mod.Progress, *, retain: bool = False) -> ClusterStatus:
        # etcd preallocates its 64 MiB write-ahead log and panics without room for it: say so before writing.
        fresh = not self.exists()
        self.ensure_space(MIN_FREE_FRESH_MIB if fresh else MIN_FREE_MIB,
                          "a new local cluster" if fresh else "restarting the local cluster")
        # The state folder must be ours (cluster.safefs), and one command at a time works on it: a second `up`
        # waits for the first and then finds the cluster up.
        with self.writing(), self.locked("gpulab up"):
            fresh = not self.exists()
            ctx = steps_mod.Context(self, prog, fl, record=self.record())
            with self.writing():
                steps_mod.bring_up(self.steps(), ctx, fresh=fresh, retain=retain,
                                   teardown=lambda: self.down(purge=True))
        return self.status()

    def prepare(self, prog: progress_mod.Progress) -> str:
        """The etcd bootstrap seed for these binaries (``gpulab binaries ensure`` makes it, so the first ``up`` is
        fast too)."""
        made = self.prepare_seed(binaries.ensure(prog), prog)
        return (f"etcd bootstrap seed: {made}" if made else
                "etcd bootstrap seed: could not be made (see the warning); `gpulab up` will try again")

    def doctor(self) -> list[tuple[str, str, str]]:
        found = binaries.cached()
        rows = [(f"control-plane binaries {versions.KUBERNETES_VERSION}", str(found.directory) if found else "missing",
                 "" if found else "gpulab binaries ensure")]
        if found:
            seed_dir = self.seed_location(found)
            rows.append(("etcd bootstrap seed (faster fresh starts)", str(seed_dir) if seed_dir.exists() else "absent",
                         "" if seed_dir.exists() else "gpulab binaries ensure (or the next `gpulab up` makes it)"))
            combined = found.path(gobuild.extra_binary_name(COMBINED))
            rows.append((f"{COMBINED} (API server, controller manager and scheduler in one process; less memory)",
                         str(combined) if combined.is_file() else "absent: three separate processes",
                         "" if combined.is_file() else "install Go >= 1.26, then gpulab binaries ensure"))
        return rows

    def _all_components(self) -> list[str]:
        return list(OLD_AGENTS) + list(reversed(AGENTS)) + list(reversed(CONTROL_PLANE_PROCESSES))

    @classmethod
    def seed_location(cls, bins: binaries.Binaries) -> Path:
        """Where the etcd bootstrap seed for these binaries and this backend's API server flags is (or will be)."""
        probe = cls("seed-probe", Path(tempfile.gettempdir()))
        ports = {k: 0 for k in ("etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler", "kubelet")}
        specs = probe._specs(bins, pki_mod.Pki(probe.dir / "pki"), ports, 1)
        return seed.seed_path(specs["kube-apiserver"].argv)

    @classmethod
    def prepare_seed(cls, bins: binaries.Binaries, prog: progress_mod.Progress) -> Path | None:
        """Make the etcd bootstrap seed now (``gpulab binaries ensure`` does), so the first ``up`` is fast too.

        Returns the seed's path, or None when it could not be made (``up`` will then try again).
        """
        path = cls.seed_location(bins)
        if not path.exists():
            try:
                cls._make_seed(bins, path, prog)
            except (errors.CourseError, OSError) as exc:
                log.warning("could not make the etcd bootstrap seed (%s); new clusters start from an empty etcd", exc)
                return None
        return path

    @staticmethod
    def _make_seed(bins: binaries.Binaries, path: Path, prog: progress_mod.Progress) -> None:
        prog.start("bootstrapping etcd once for this Kubernetes version (later clusters start from it)")
        scratch = Path(tempfile.mkdtemp(prefix="gpulab-seed-"))
        maker = LocalBackend("seed", scratch)
        try:
            maker.claim()
            pki = pki_mod.ensure(maker.dir / "pki")
            ports = _Ports.choose(maker, {})
            server = f"https://127.0.0.1:{ports['apiserver']}"
            _Kubeconfigs.write_kubeconfigs(maker, pki, server)
            specs = maker._specs(bins, pki, ports, 1)
            maker.sup.start(specs["etcd"])
            maker.sup.start(specs["kube-apiserver"])
            maker._wait_api_ready(ports, pki, prog)
            with Client.from_kubeconfig(maker.kubeconfig()) as client:
                ensure_identity_bindings(maker, client, pki, server)  # so fresh clusters need no break-glass
                seed.check_no_secrets(client)
            maker.sup.stop("kube-apiserver")
            maker.sup.stop("etcd")
            seed.store(maker.dir / "etcd", path)
        finally:
            maker.sup.stop_all(["kube-apiserver", "etcd"])
            shutil.rmtree(scratch, ignore_errors=True)
            prog.finish()

    # --- status, down, logs, tenants --------------------------------------------------------------------

    def components(self) -> list[ComponentStatus]:
        out = []
        for name in (*CONTROL_PLANE, *AGENTS):
            own, pid = self.sup.pid(name), self.component_pid(name)
            detail = "not running" if pid is None else "" if own else f"in {COMBINED}"
            out.append(ComponentStatus(name, pid is not None, pid, None if pid is None else True, detail))
        return out

    def status(self) -> ClusterStatus:
        if not self.exists():
            return ClusterStatus("local", False, None, None, problems=["no local cluster (run `gpulab up`)"])
        rec = self.record()
        comps = self.components()
        problems = [f"{c.name} is not running" for c in comps if not c.running]
        nodes = []
        if any(c.name == "kube-apiserver" and c.running for c in comps):
            try:
                with Client.from_kubeconfig(self.kubeconfig(), timeout=5) as client:
                    nodes = ops.list_nodes(client)
            except errors.CourseError as exc:
                problems.append(f"API server not answering: {exc.message}")
        problems += [f"node {n.name} is NotReady" for n in nodes if not n.ready]
        problems += self._certificate_problems()
        return ClusterStatus("local", True, self.server(), str(self.kubeconfig()), comps, nodes,
                             rec.fleet if rec else None, problems)

    def _certificate_problems(self) -> list[str]:
        now = time.time()
        soon = sorted((when.timestamp(), name) for name, when in pki_mod.expiry(self.dir / "pki").items()
                      if when.timestamp() - now < CERT_WARNING)
        if not soon:
            return []
        when, name = soon[0]
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(when))
        verb = "expired" if when < now else "expires"
        return [f"the cluster's certificates ({', '.join(n for _, n in soon)}) {verb} at {stamp}: `gpulab up` renews "
                "them and restarts the components"]

    def down(self, *, purge: bool = False) -> None:
        if not os.path.lexists(self.dir):
            # The state folder was removed under a running cluster (rm -rf): there is nothing to lock or purge,
            # but its programs still run from where it was, and down must stop them (the supervisor's safety net).
            self.sup.stop_all([])
            return
        if not safefs.looks_like_state(self.dir):
            if purge:
                self.purge_state()  # refuses, saying why
            return  # nothing of ours can run from a folder that is not a state folder
        if purge and not safefs.is_marked(self.dir) and not safefs.only_state_entries(self.dir):
            # An older gpulab's unmarked folder with more in it than gpulab writes: stopped, never adopted (which
            # would mark it) and deleted on the word of its state.json alone.
            self.sup.stop_all(self._all_components())
            raise errors.ClusterError(
                f"{self.dir} holds files gpulab did not write beside an older gpulab's state.json; its cluster is "
                "stopped, and gpulab does not delete the folder",
                hint=f"look inside {self.dir}, then delete it yourself")
        with self.locked("gpulab down --purge" if purge else "gpulab down"):
            self.sup.stop_all(self._all_components())
            if purge:
                self.purge_state()

    def tenant_kubeconfig(self, namespace: str) -> Path:
        pki = pki_mod.Pki(self.dir / "pki")
        dest = self.dir / "tenants" / f"{namespace}.kubeconfig"
        with Client.from_kubeconfig(self.kubeconfig()) as client, self.writing():
            return ops.tenant_kubeconfig(client, namespace, dest, server=self.server(), ca_file=pki.ca_cert)

    def collect_logs(self, dest: Path) -> list[Path]:
        dest.mkdir(parents=True, exist_ok=True)
        out = []
        for f in sorted(self.sup.log_dir.glob("*.log")):
            shutil.copy2(f, dest / f.name)
            out.append(dest / f.name)
        return out


# --- the local bring-up's own steps (the shared ones are in cluster.backends.steps) -----------------------------
# Start-up order is tuned for two cores, where every program's own start-up work competes with the API server's:
# only etcd, the API server and the sim-agents process (whose node agent must register the nodes the moment the API
# server is ready; it loads the pod agent and GPU stack after that) start at once; the controller manager when the
# API server is ready (it would otherwise poll for it only once a second); the scheduler once the nodes are Ready.
# kube-control-plane starts its controller manager and scheduler itself, as soon as its API server is ready.


class _Binaries:
    title = "binaries"

    def run(self, ctx: steps_mod.Context) -> None:
        ctx.bins = binaries.ensure(ctx.prog)


class _LocalStep:
    def __init__(self, be: LocalBackend) -> None:
        self.be = be

    @staticmethod
    def _need(ctx: steps_mod.Context) -> tuple[binaries.Binaries, pki_mod.Pki]:
        if ctx.bins is None or ctx.pki is None:
            raise errors.ClusterError("bring-up steps ran out of order", hint="a bug in gpulab: report it")
        return ctx.bins, ctx.pki


class _Pki(_LocalStep):
    """The cluster's PKI, with each simulated node's kubelet serving certificate (made, or renewed when near
    expiry; running components then restart to load it)."""

    title = "PKI"

    def run(self, ctx: steps_mod.Context) -> None:
        ctx.pki = pki_mod.ensure(self.be.dir / "pki", sim_nodes.plan_addresses(ctx.need_fleet()))
        self.restart_for_renewed(self.be, ctx.pki)

    @staticmethod
    def restart_for_renewed(be: LocalBackend, pki: pki_mod.Pki) -> None:
        """Running components read their certificates at start: after a renewal they are restarted (once every
        week or so, on `up`)."""
        if not pki.renewed:
            return
        running = [n for n in be._all_components() if be.sup.pid(n)]
        if running:
            log.warning("renewed the cluster's certificates (%s); restarting %s to load them",
                        ", ".join(pki.renewed), ", ".join(running))
            be.sup.stop_all(be._all_components())


class _Ports(_LocalStep):
    title = "ports"

    def run(self, ctx: steps_mod.Context) -> None:
        ctx.ports = self.choose(self.be, ctx.record.ports if ctx.record else {})
        ctx.server = f"https://127.0.0.1:{ctx.ports['apiserver']}"

    @staticmethod
    def choose(be: LocalBackend, old: Mapping[str, int]) -> dict[str, int]:
        """Keep each saved port unless its component is down and something else took it."""
        owner = {"etcd": "etcd", "etcd-peer": "etcd", "apiserver": "kube-apiserver",
                 "controller-manager": "kube-controller-manager", "scheduler": "kube-scheduler",
                 "kubelet": "sim-agents"}
        ports: dict[str, int] = {}
        for key, component in owner.items():
            # The simulated kubelets listen on the nodes' addresses (127.1.x.y), where another cluster of this host
            # may hold a port that 127.0.0.1 has free; every cluster's first node is 127.1.0.1, so look there.
            host = sim_nodes.FIRST_NODE_IP if key == "kubelet" else "127.0.0.1"
            if old.get(key) and be.component_pid(component):
                ports[key] = old[key]
            else:
                port = free_port(old.get(key), host)
                while port in ports.values():
                    port = free_port(host=host)
                ports[key] = port
        return ports


class _Kubeconfigs(_LocalStep):
    """Kubeconfigs and the scheduler's configuration file; then the state (ports, fleet, version) is recorded."""

    title = "kubeconfigs"

    def run(self, ctx: steps_mod.Context) -> None:
        bins, pki = self._need(ctx)
        fl = ctx.need_fleet()
        self.write_kubeconfigs(self.be, pki, ctx.server)
        self.write_scheduler_config(self.be)
        old = ctx.record
        ctx.record = staterecord.StateRecord(
            "local", fleet=(old.fleet if old else None) or fl.name, ports=dict(ctx.ports),
            kubernetes=versions.KUBERNETES_VERSION, extra=old.extra if old else {})
        self.be.save(ctx.record)
        ctx.specs = self.be._processes(bins, self.be._specs(bins, pki, ctx.ports, fl.node_count))

    @staticmethod
    def write_kubeconfigs(be: LocalBackend, pki: pki_mod.Pki, server: str) -> None:
        kubeconfig.write(be.kubeconfig(), server=server, ca_file=pki.ca_cert, user="gpulab-admin",
                         cert_file=pki.client_cert("admin"), key_file=pki.client_key("admin"),
                         cluster_name=be.cluster_name)
        for who in ("controller-manager", "scheduler", "agent"):
            kubeconfig.write(be._kc(who), server=server, ca_file=pki.ca_cert, user=who,
                             cert_file=pki.client_cert(who), key_file=pki.client_key(who),
                             cluster_name=be.cluster_name)

    @staticmethod
    def write_scheduler_config(be: LocalBackend) -> None:
        """The scheduler's configuration file: its identity, no leader election, and a client rate (500/s, burst
        1,000) that lets it bind a DaemonSet's pods across a 1,000-node fleet without queueing behind the default
        50 requests a second."""
        be._scheduler_config().write_text(
            "apiVersion: kubescheduler.config.k8s.io/v1\n"
            "kind: KubeSchedulerConfiguration\n"
            "clientConnection:\n"
            f"  kubeconfig: {json.dumps(str(be._kc('scheduler')))}\n"
            "  qps: 500\n"
            "  burst: 1000\n"
            "leaderElection:\n"
            "  leaderElect: false\n"
        )


class _Seed(_LocalStep):
    """A new cluster's etcd starts from the bootstrap seed (see ``cluster.seed``)."""

    title = "seed"

    def run(self, ctx: steps_mod.Context) -> None:
        bins, _ = self._need(ctx)
        ctx.seeded = not (self.be.dir / "etcd").exists() and self.from_seed(self.be, bins, ctx.prog)

    @staticmethod
    def from_seed(be: LocalBackend, bins: binaries.Binaries, prog: progress_mod.Progress) -> bool:
        """Start a new cluster's etcd from the bootstrap seed (made once per version; see ``cluster.seed``)."""
        if not settings.current().etcd_seed:
            return False
        path = be.prepare_seed(bins, prog)
        return path is not None and seed.restore(path, be.dir / "etcd")


def ensure_identity_bindings(be: LocalBackend, admin: Client, pki: pki_mod.Pki, server: str) -> None:
    """The admin's and agents' ClusterRoleBindings (to ``cluster-admin``) exist; made when missing.

    They are normally already there (the etcd seed carries them, and a running cluster keeps them); when they
    are not (no seed, or someone deleted one to revoke the admin), only a break-glass ``system:masters``
    certificate, valid for minutes and deleted right after, can create them, as kubeadm's ``super-admin.conf``
    does for ``kubeadm:cluster-admins``. The owner, who holds the CA key, can always grant again; `up` does.
    """
    missing = list(IDENTITY_BINDINGS)
    try:
        missing = [n for n in IDENTITY_BINDINGS if not admin.exists(f"{_CRB}/{n}")]
    except errors.ApiError as exc:
        if exc.status != 403:
            raise
    if not missing:
        return
    certs = kubeconfig.certs_dir(be.kubeconfig())
    cert, key = pki_mod.break_glass(pki, certs)
    try:
        conn = kubeconfig.Connection(server=server, ca_file=str(pki.ca_cert), cert_file=str(cert),
                                     key_file=str(key))
        with Client(conn, timeout=10) as glass:
            for name in missing:
                log.info("creating ClusterRoleBinding %s (break-glass certificate)", name)
                try:
                    glass.create(_CRB, identity_binding(name, IDENTITY_BINDINGS[name]))
                except errors.Conflict:
                    pass
    finally:
        cert.unlink(missing_ok=True)
        key.unlink(missing_ok=True)
    # The API server's RBAC authorizer sees new bindings through its informer, a moment later.
    deadline = time.monotonic() + 10
    while True:
        try:
            admin.get(f"{_CRB}/{missing[0]}")
            return
        except errors.ApiError as exc:
            if exc.status != 403 or time.monotonic() > deadline:
                raise
        time.sleep(0.05)


class _ControlPlane(_LocalStep):
    """etcd, the API server and the node agent at once; then identities, the controller manager, tenant RBAC."""

    title = "control plane"

    def run(self, ctx: steps_mod.Context) -> None:
        _, pki = self._need(ctx)
        ctx.prog.start("starting the control plane", len(ctx.specs))
        # A cluster started before the agents became one process, or with the other control-plane layout (the
        # binaries were built or removed since): its old processes make way.
        combined = COMBINED in ctx.specs
        replaced = HOSTED if combined else (COMBINED,)
        for old in (*OLD_AGENTS, *replaced):
            self.be.sup.stop(old)
        for name in STARTED_FIRST:
            if name in ctx.specs:
                self.be.sup.start(ctx.specs[name])
        self.be._wait_api_ready(ctx.ports, pki, ctx.prog, COMBINED if combined else "kube-apiserver")
        with Client.from_kubeconfig(self.be.kubeconfig()) as client:
            ensure_identity_bindings(self.be, client, pki, ctx.server)
            if ctx.seeded:
                seed.prune_client_ca(client, pki.ca_cert.read_text())
            ctx.prog.advance(detail="kube-apiserver")
            if "kube-controller-manager" in ctx.specs:  # else it starts inside kube-control-plane by itself
                self.be.sup.start(ctx.specs["kube-controller-manager"])
            ctx.prog.advance(detail="kube-controller-manager")
            ops.ensure_tenant_rbac(client)


class _WaitNodes(_LocalStep):
    """Every fleet node Ready. When waiting fails, the rest is still started, so `gpulab status` shows it all."""

    title = "wait for nodes"

    def run(self, ctx: steps_mod.Context) -> None:
        fl = ctx.need_fleet()
        ctx.prog.start(f"waiting for {fl.node_count} nodes to be Ready")
        try:
            with Client.from_kubeconfig(self.be.kubeconfig()) as client:
                ops.wait_nodes_ready(client, set(fl.node_names()), timeout=max(60.0, fl.node_count * 0.3))
        except BaseException:
            for spec in ctx.specs.values():
                self.be.sup.start(spec)
            raise


class _Workloads(_LocalStep):
    """What places pods: the scheduler, once the nodes are Ready (the sim-agents process, which runs the pod
    agent and the GPU stack, started with the control plane)."""

    title = "scheduler"

    def run(self, ctx: steps_mod.Context) -> None:
        for name in ctx.specs:  # the scheduler; and anything a failed earlier start left stopped
            self.be.sup.start(ctx.specs[name])
        ctx.prog.finish()
