"""A class on Kubernetes, for real: the class images built offline (``course/class/build-image.sh --offline``)
loaded into a kind cluster made from the project's offline node image; the hub (JupyterHub with KubeSpawner,
configured from course/class/z2jh-values.yaml as the Zero to JupyterHub chart configures it, and
configurable-http-proxy in its pod) deployed in a namespace that enforces Pod Security ``restricted``; two learners
(ann, bob) spawned through the hub's REST API with an admin token. In each learner's pod the lab cluster starts
inside the pod (``GPULAB_CLUSTER_ON_DEMAND``) when the learner starts lab 01 with gpulab's CLI, as a learner at the
pod's terminal would; ann does the lab's first task, bob leaves it untouched; each checks, fetches the released
assignment, writes the evidence and submits through the nbgrader exchange on a shared volume. A grader pod grades
the submissions by replay on a lab cluster of its own; each learner's grade must be the score their own check gave.

Isolation: learner A's pod cannot reach learner B's lab cluster, because B's API server binds to B's pod loopback.
kind's network plugin enforces no NetworkPolicy, so the test proves the loopback binding, with a control: A reaches
B's Jupyter server (which listens on the pod's address) over the same network path.

The figures (spawn to lab-ready, idle memory and CPU of a learner's pod from its cgroup, pods per node that fit the
requests) are written to ``class-figures.json`` in pytest's base temp folder and printed."""

from __future__ import annotations

import json
import math
import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import class_tier
import pytest
from prerequisites import require

from cluster import binaries, fleet as fleet_mod, quantity, versions
from cluster.backends import kindtool
from cluster.backends.kind import KindBackend
from cluster.progress import LogProgress
from labs.classroom import kubeuids

pytestmark = [pytest.mark.timeout(2400)]

ROOT = Path(__file__).resolve().parents[2]
NODE_IMAGE_SCRIPT = ROOT / ".ci" / "kind" / "node-image.sh"
BUILD = ROOT / "course" / "class" / "build-image.sh"
FLEET = ROOT / "tests" / "fixtures" / "fleets" / "class-cpu.yaml"
NS = class_tier.NAMESPACE
LAB = "01-device-plugins"
LEARNERS = ("ann", "bob")


@dataclass
class Tier:
    backend: KindBackend
    kubectl: Path
    vals: dict[str, Any]
    figures: dict[str, Any] = field(default_factory=dict)
    pods: dict[str, str] = field(default_factory=dict)

    def run(self, *args: str, input: str | None = None, timeout: float = 300, check: bool = True,
            ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(self.kubectl), "--kubeconfig", str(self.backend.kubeconfig()), *args],
                              input=input, capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args[:6])} failed ({done.returncode}):\n{done.stdout}\n"
                                 f"{done.stderr}")
        return done

    def apply(self, objects: list[dict[str, Any]]) -> None:
        self.run("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))

    def get(self, *args: str) -> Any:
        return json.loads(self.run("get", "-o", "json", *args).stdout)

    def exec(self, pod: str, script: str, *, input: str | None = None, timeout: float = 600,
             check: bool = True) -> subprocess.CompletedProcess[str]:
        """A shell in the pod's first container, as its user (a learner's own uid; the grader's is the image's
        1000), in its home folder."""
        return self.run("-n", NS, "exec", *(["-i"] if input is not None else []), pod, "--", "bash", "-c",
                        f"cd ~ && {script}", input=input, timeout=timeout, check=check)

    def hub_api(self, method: str, path: str) -> tuple[int, Any]:
        """The hub's REST API with the admin token, from inside the hub's pod (its API is the pod's port 8081)."""
        code = ("import json, os, sys, urllib.request, urllib.error\n"
                f"req = urllib.request.Request('http://127.0.0.1:8081/hub/api{path}', method={method!r}, "
                "headers={'Authorization': 'token ' + os.environ['GPULAB_HUB_ADMIN_TOKEN']})\n"
                "try:\n    r = urllib.request.urlopen(req, timeout=30); body = r.read(); status = r.status\n"
                "except urllib.error.HTTPError as e:\n    body = e.read(); status = e.code\n"
                "print(json.dumps({'status': status, 'body': body.decode() or 'null'}))")
        done = self.run("-n", NS, "exec", "deploy/hub", "--", "python3", "-c", code, timeout=60)
        out = json.loads(done.stdout.strip().splitlines()[-1])
        try:
            return int(out["status"]), json.loads(out["body"])
        except ValueError:
            return int(out["status"]), out["body"]


def _wait(what: str, probe: Any, timeout: float, every: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


@pytest.fixture(scope="module")
def images() -> tuple[str, str]:
    require(binaries.cached() is not None, "control-plane binaries are missing; run: gpulab binaries ensure")
    # Any node image node-image.sh built will do (its label says so): the class tier runs only our own images on
    # it, none of the stand-ins whose list is part of node-image.sh's key.
    ready = subprocess.run(["docker", "image", "inspect", versions.KIND_NODE_IMAGE, "--format",
                            '{{index .Config.Labels "gpulab.key"}}'], capture_output=True, text=True, timeout=120,
                           check=False)
    require(ready.returncode == 0 and ready.stdout.strip() not in ("", "<no value>"),
            f"the offline kind node image is not built or Docker is not answering: run {NODE_IMAGE_SCRIPT} "
            "(CI's .ci/run does)")
    started = time.monotonic()
    built = subprocess.run([str(BUILD), "--offline"], capture_output=True, text=True, timeout=3600, check=False)
    assert built.returncode == 0, f"build-image.sh --offline failed:\n{built.stderr[-4000:]}"
    names = built.stdout.split()
    hub, learner = (next(n for n in names if n.split(":")[0].endswith(f"gpulab-{t}")) for t in ("hub", "learner"))
    print(f"class images {hub} {learner} ready in {time.monotonic() - started:.0f} s")
    return hub, learner


@pytest.fixture(scope="module")
def tier(images: tuple[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tier]:
    hub_image, learner_image = images
    tag = learner_image.rsplit(":", 1)[1]
    vals = class_tier.values(tag)
    assert class_tier.learner_image(vals) == learner_image and class_tier.hub_image(vals) == hub_image
    cached = binaries.cached()
    assert cached is not None
    root = tmp_path_factory.mktemp("gpulab-kind-class")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GPULAB_STATE_DIR", str(root))
        backend = KindBackend(os.environ.get("GPULAB_KIND_CLUSTER", "gpulab-class"), root)
        backend.up(fleet_mod.load(str(FLEET)), LogProgress())
        t = Tier(backend, cached.kubectl, vals)
        try:
            _deploy(t, hub_image, learner_image)
            yield t
        finally:
            _write_figures(t, tmp_path_factory.getbasetemp())
            if os.environ.get("GPULAB_CLASS_KEEP") != "1":
                backend.down(purge=True)


def _node_containers(t: Tier) -> list[str]:
    """The kind nodes' Docker containers (their Kubernetes names are the fleet's, e.g. cpu-0)."""
    done = subprocess.run([str(kindtool.ensure_kind()), "get", "nodes", "--name", t.backend.cluster_name],
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.split()


def _deploy(t: Tier, hub_image: str, learner_image: str) -> None:
    started = time.monotonic()
    kind = kindtool.ensure_kind()
    # Into the nodes that take pods only (the control plane's taint keeps them off it): ~2.4 GB less to import.
    workers = [n for n in _node_containers(t) if not n.endswith("-control-plane")]
    for image in (hub_image, learner_image):
        subprocess.run([str(kind), "load", "docker-image", image, "--name", t.backend.cluster_name,
                        "--nodes", ",".join(workers)], capture_output=True, text=True, timeout=900, check=True)
    t.figures["image_load_s"] = round(time.monotonic() - started, 1)
    # The host folders behind the tier's volumes, on every node (kind's nodes are containers of our Docker).
    for node in _node_containers(t):
        subprocess.run(["docker", "exec", node, "sh", "-c", class_tier.host_folders(LEARNERS)], check=True,
                       timeout=60)
    classes = t.get("storageclasses")["items"]
    default = [c["metadata"]["name"] for c in classes if c["metadata"].get("annotations", {}).get(
        "storageclass.kubernetes.io/is-default-class") == "true"]
    assert default, f"kind made no default StorageClass: {[c['metadata']['name'] for c in classes]}"
    t.apply([class_tier.namespace()])
    t.apply(class_tier.volumes(default[0], LEARNERS))
    t.apply([class_tier.exchange_claim(default[0]), *class_tier.hub_rbac(),
             *class_tier.hub(t.vals, secrets.token_hex(32)), class_tier.grader(t.vals)])
    t.run("-n", NS, "rollout", "status", "deploy/hub", "--timeout=300s", timeout=320)
    t.run("-n", NS, "wait", "--for=condition=Ready", "pod/grader", "--timeout=300s", timeout=320)
    t.figures["deploy_s"] = round(time.monotonic() - started, 1)


def _spawn(t: Tier, user: str) -> str:
    status, _ = t.hub_api("POST", f"/users/{user}")
    assert status in (201, 409), status
    status, body = t.hub_api("POST", f"/users/{user}/server")
    assert status in (201, 202), (status, body)

    def ready() -> bool:
        _, info = t.hub_api("GET", f"/users/{user}")
        return bool(info.get("servers", {}).get("", {}).get("ready"))
    _wait(f"{user}'s server", ready, 600, every=2)
    pods = t.get("-n", NS, "pods", "-l", f"component=singleuser-server,hub.jupyter.org/username={user}")["items"]
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    return str(pods[0]["metadata"]["name"])


def _score(report: Any) -> tuple[float, float]:
    return float(report["score"]), float(report["max_score"])


def _cgroup_sample(t: Tier, pod: str) -> dict[str, float]:
    """The learner container's cgroup as the pod sees it: v2 (memory.current, cpu.stat) or v1 (this machine's)."""
    script = ("if [ -f /sys/fs/cgroup/memory.current ]; then "
              "echo mem $(cat /sys/fs/cgroup/memory.current); echo anon $(awk '$1==\"anon\"{print $2}' /sys/fs/cgroup/memory.stat);"
              " echo cpu_us $(awk '$1==\"usage_usec\"{print $2}' /sys/fs/cgroup/cpu.stat); else "
              "echo mem $(cat /sys/fs/cgroup/memory/memory.usage_in_bytes); "
              "echo anon $(awk '$1==\"total_rss\"{print $2}' /sys/fs/cgroup/memory/memory.stat); "
              "echo cpu_us $(( $(cat /sys/fs/cgroup/cpuacct/cpuacct.usage 2>/dev/null || cat /sys/fs/cgroup/cpu,cpuacct/cpuacct.usage) / 1000 )); fi")
    out = t.exec(pod, script).stdout.split()
    sample = {k: float(v) for k, v in zip(out[::2], out[1::2])}
    sample["at"] = time.monotonic()
    return sample


def test_two_learners_run_a_lab_in_their_pods_submit_and_are_graded_by_replay(tier: Tier) -> None:
    t = tier
    # The instructor releases the lab from the grader pod, with the course folder the image carries.
    released = t.exec("grader", "cp -r /opt/gpulab/src/course/nbgrader ~/course && cd ~/course && python3 -c "
                      f"\"from pathlib import Path; from labs.classroom import loop; loop.release(Path('.'), '{LAB}')\"")
    outbound = t.exec("grader", f"ls {class_tier.EXCHANGE_MOUNT}/gpulab/outbound/{LAB}").stdout.split()
    assert outbound == [f"{LAB}.ipynb"], (outbound, released.stdout)

    checked: dict[str, tuple[float, float]] = {}
    for user in LEARNERS:
        started = time.monotonic()
        pod = t.pods[user] = _spawn(t, user)
        spawned = time.monotonic() - started
        spec = t.get("-n", NS, "pod", pod)["spec"]
        container = spec["containers"][0]
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        # A uid, group and fsGroup of the learner's own (the values' hub.extraConfig), as the kernel sees it.
        uid = kubeuids.learner_uid(user)
        assert (container["securityContext"]["runAsUser"], container["securityContext"]["runAsGroup"],
                spec["securityContext"]["fsGroup"]) == (uid, uid, uid), (container["securityContext"],
                                                                         spec["securityContext"])
        assert t.exec(pod, "id -u; id -g").stdout.split() == [str(uid), str(uid)]
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        assert env.get("JUPYTERHUB_USER") == user
        # The lab cluster starts inside the pod on the first lab step (the image's GPULAB_CLUSTER_ON_DEMAND).
        start = t.exec(pod, f"gpulab lab start {LAB}", timeout=900)
        assert f"lab {LAB} is ready" in start.stdout, start.stdout + start.stderr
        t.figures.setdefault("spawn_to_server_ready_s", {})[user] = round(spawned, 1)
        t.figures.setdefault("spawn_to_lab_ready_s", {})[user] = round(time.monotonic() - started, 1)
        if user == "ann":  # the first task done: the render pod written and applied, the scheduler's answer noted
            for name in ("render-job.yaml", "answers.yaml"):
                text = (ROOT / "labs" / LAB / "solution" / name).read_text(encoding="utf-8")
                t.exec(pod, f"cat > gpulab-labs/{LAB}/{name}", input=text)
            applied = t.exec(pod, f"gpulab lab apply {LAB} render-job.yaml")
            assert "ok " in applied.stdout, applied.stdout
        report = json.loads(t.exec(pod, f"gpulab lab check {LAB} --json", timeout=300).stdout)
        checked[user] = _score(report)
        handed = t.exec(pod, f"nbgrader fetch_assignment {LAB} && gpulab lab submit {LAB} --out ~/{LAB}/evidence.json"
                             f" && nbgrader submit {LAB}", timeout=300)
        assert "evidence.json" in handed.stdout, handed.stdout + handed.stderr
    assert checked["ann"][0] > checked["bob"][0], checked  # ann's first task counts
    assert checked["bob"][0] < checked["bob"][1], checked  # the untouched lab never gets every point

    inbound = f"{class_tier.EXCHANGE_MOUNT}/gpulab/inbound"
    listed = t.exec("grader", f"ls -1 {inbound}").stdout.splitlines()
    assert sorted(name.split("+")[0] for name in listed) == sorted(LEARNERS), listed
    bobs = next(name for name in listed if name.startswith("bob+"))

    # ann against bob's work, as another learner would try: even knowing the folder's name (learners cannot list
    # the inbound folder), she can neither change nor remove what bob handed in, and a folder she hands in under
    # his name is refused by collect. Her forgery holds her own evidence, which scores more than his. Nor can she
    # change what the instructor released, or move the course's folder away to put one of her own in its place
    # (nbgrader wants the exchange's root writable by every learner; CheckedRelease made it sticky).
    ann = t.pods["ann"]
    before = t.exec("grader", f"ls -lA --full-time '{inbound}/{bobs}'").stdout
    attempts = {
        "list": f"ls {inbound}",
        "add a file": f"touch '{inbound}/{bobs}/extra.json'",
        "overwrite": f"echo '{{}}' > '{inbound}/{bobs}/evidence.json'",
        "remove": f"rm -rf '{inbound}/{bobs}'",
        "rename": f"mv '{inbound}/{bobs}' '{inbound}/{bobs}.old'",
        # Against the instructor: the release every learner fetches next, and the course's folder.
        "poison the release": f"echo '{{}}' > {class_tier.EXCHANGE_MOUNT}/gpulab/outbound/{LAB}/{LAB}.ipynb",
        "add to the release": f"touch {class_tier.EXCHANGE_MOUNT}/gpulab/outbound/{LAB}/extra.py",
        "move the course away": f"mv {class_tier.EXCHANGE_MOUNT}/gpulab {class_tier.EXCHANGE_MOUNT}/gpulab.old",
    }
    assert t.exec("grader", f"stat -c %a {class_tier.EXCHANGE_MOUNT}").stdout.strip() == "1777"
    for what, script in attempts.items():
        tried = t.exec(ann, script, check=False)
        # EACCES from the folders' modes; EPERM from the sticky bits (CheckedRelease) for the renames.
        assert tried.returncode != 0 and any(
            e in tried.stderr for e in ("Permission denied", "Operation not permitted")), (what, tried.stdout,
                                                                                             tried.stderr)
    forged = t.exec(ann, f"nbgrader submit {LAB} --student=bob", check=False)
    assert forged.returncode == 0, forged.stdout + forged.stderr  # nbgrader takes it; collect must not
    assert t.exec("grader", f"ls -lA --full-time '{inbound}/{bobs}'").stdout == before, "bob's submission changed"
    assert bobs in t.exec("grader", f"ls -1 {inbound}").stdout.splitlines(), "bob's submission is gone"

    # The instructor's collect (the course's CheckedCollect, learner_uids "by-name" in the image's nbgrader
    # config) takes each learner's own folder, by its owner's uid, and refuses ann's one in bob's name.
    t.exec("grader", f"cd ~/course && nbgrader collect {LAB} --update")
    refused = json.loads(t.exec("grader", f"cat ~/course/collect-refused-{LAB}.json").stdout)
    assert [(r["claims"], r["owner"]) for r in refused] == [("bob", f"uid {kubeuids.learner_uid('ann')}")], refused
    started = time.monotonic()
    # Each learner's collected evidence bundle (it holds their files and their actions), named for the learner.
    graded = t.exec("grader", "mkdir -p ~/batch && " + " && ".join(
        f"cp ~/course/submitted/{user}/{LAB}/evidence.json ~/batch/{user}.json" for user in LEARNERS) +
        f" && gpulab grade {LAB} --batch ~/batch --json", timeout=900)
    t.figures["grade_two_by_replay_s"] = round(time.monotonic() - started, 1)
    result = json.loads(graded.stdout[graded.stdout.index("{"):])
    grades = {r["submission"]: (r["score"], r["max_score"]) for r in result["results"]}
    assert result["broken"] == 0, result
    t.figures["grades"] = {"checked_live": checked, "graded_by_replay": grades}
    assert {Path(k).stem: v for k, v in grades.items()} == checked, (grades, checked)


def test_a_learner_cannot_reach_another_learners_lab_cluster(tier: Tier) -> None:
    t = tier
    require(set(t.pods) == set(LEARNERS), "the learners' pods come from the round trip above (run the file whole)")
    ann, bob = t.pods["ann"], t.pods["bob"]
    ann_ip = t.get("-n", NS, "pod", ann)["status"]["podIP"]
    server = t.exec(ann, "python3 -c \"import yaml, subprocess; p = subprocess.run(['gpulab', 'kubeconfig'], "
                         "capture_output=True, text=True).stdout.strip(); "
                         "print(yaml.safe_load(open(p))['clusters'][0]['cluster']['server'])\"").stdout.strip()
    port = int(server.rsplit(":", 1)[1].split("/")[0])
    assert server.startswith("https://127.0.0.1:"), server
    probe = ("python3 -c \"import socket, sys\ntry:\n    socket.create_connection((sys.argv[1], int(sys.argv[2])), "
             "timeout=5).close(); print('connected')\nexcept OSError as e:\n    print(type(e).__name__)\" ")
    assert t.exec(ann, probe + f"127.0.0.1 {port}").stdout.strip() == "connected"  # it runs, on ann's loopback
    assert t.exec(bob, probe + f"{ann_ip} {port}").stdout.strip() == "ConnectionRefusedError"
    assert t.exec(bob, probe + f"{ann_ip} 8888").stdout.strip() == "connected"  # the network path is open

    # Idle footprint of a learner's pod with its lab cluster running, from the container's cgroup.
    first = {u: _cgroup_sample(t, p) for u, p in t.pods.items()}
    time.sleep(30)
    second = {u: _cgroup_sample(t, p) for u, p in t.pods.items()}
    idle = {u: {"memory_mib": round(second[u]["mem"] / 2**20), "anon_rss_mib": round(second[u]["anon"] / 2**20),
                # CPU microseconds per second of wall time, in thousandths of a core.
                "cpu_millicores": round((second[u]["cpu_us"] - first[u]["cpu_us"]) / 1000
                                        / (second[u]["at"] - first[u]["at"]))} for u in t.pods}
    t.figures["idle_learner_pod"] = idle
    node = next(n for n in t.get("nodes")["items"] if not any(
        taint["effect"] == "NoSchedule" for taint in n["spec"].get("taints", [])))
    alloc = node["status"]["allocatable"]
    mem_req = quantity.parse(class_tier.kube_bytes(t.vals["singleuser"]["memory"]["guarantee"])).value
    cpu_req = float(t.vals["singleuser"]["cpu"]["guarantee"])
    t.figures["pods_per_node"] = {
        "node": node["metadata"]["name"], "allocatable_cpu": alloc["cpu"], "allocatable_memory": alloc["memory"],
        "fit_by_memory": math.floor(quantity.parse(alloc["memory"]).value / mem_req),
        "fit_by_cpu": math.floor(quantity.parse(alloc["cpu"]).value / cpu_req)}
    for user, seen in idle.items():  # the values' guarantee holds an idle learner with their lab cluster
        assert seen["memory_mib"] * 2**20 < mem_req, (user, seen)


# Run in a learner's pod: what the hub (its API, with the pod's own JUPYTERHUB_API_TOKEN) and another learner's
# server answer to requests for things that are not this learner's. Redirects are not followed (a 302 to the hub's
# login page is a refusal too, and would otherwise read as the login page's 200).
HUB_PROBE = """
import http.client, json, os, sys, urllib.parse
token = os.environ["JUPYTERHUB_API_TOKEN"]
def call(method, url, token=token):
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    c.request(method, u.path, headers={"Authorization": f"token {token}"} if token else {})
    return c.getresponse().status
api, other, other_server = os.environ["JUPYTERHUB_API_URL"], sys.argv[1], sys.argv[2]
print(json.dumps({
    "own user": call("GET", f"{api}/user"),
    "other user": call("GET", f"{api}/users/{other}"),
    "every user": call("GET", f"{api}/users"),
    "stop other's server": call("DELETE", f"{api}/users/{other}/server"),
    "a token for other": call("POST", f"{api}/users/{other}/tokens"),
    "other's files with own token": call("GET", f"{other_server}/user/{other}/api/contents"),
    "other's files with no token": call("GET", f"{other_server}/user/{other}/api/contents", token=None),
    "other's terminals": call("POST", f"{other_server}/user/{other}/api/terminals"),
}))
"""


def test_a_learners_hub_token_opens_nothing_of_another_learners(tier: Tier) -> None:
    """ann's pod holds ann's hub token (KubeSpawner's JUPYTERHUB_API_TOKEN): with it she reads her own user, and
    the hub refuses her bob's user, the user list, stopping bob's server and a token for bob; bob's server, whose
    address she can reach, refuses her token and no token at all (files and terminals)."""
    t = tier
    require(set(t.pods) == set(LEARNERS), "the learners' pods come from the round trip above (run the file whole)")
    bob_ip = t.get("-n", NS, "pod", t.pods["bob"])["status"]["podIP"]
    t.exec(t.pods["ann"], "cat > /tmp/hub_probe.py", input=HUB_PROBE)
    seen = json.loads(t.exec(t.pods["ann"], f"python3 /tmp/hub_probe.py bob http://{bob_ip}:8888").stdout)
    assert seen.pop("own user") == 200, seen
    assert all(status in (302, 401, 403, 404) for status in seen.values()), seen
    assert t.get("-n", NS, "pod", t.pods["bob"])["status"]["phase"] == "Running"  # bob's server still runs


def _write_figures(t: Tier, base: Path) -> None:
    path = base / "class-figures.json"
    path.write_text(json.dumps(t.figures, indent=1, sort_keys=True), encoding="utf-8")
    print(f"class tier figures ({path}):\n{json.dumps(t.figures, indent=1, sort_keys=True)}")
