"""Evidence bundles: canonical bytes, round trips, version errors and hostile files that become findings."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from graders import bundle, view as view_mod
from live_factories import bundle_data, make_event, make_node, make_pod

FIXTURES = Path(__file__).parent.parent / "fixtures" / "explain"


def sample() -> dict[str, Any]:
    return bundle_data(nodes=[make_node("t4-0", gpus=1)], pods=[make_pod("p", gpus=1)],
                       events=[make_event("lab", "p", "FailedScheduling", "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")],
                       manifests={"pod.yaml": "apiVersion: v1\nkind: Pod\n# ünïcode\n"})


def test_round_trip_is_byte_for_byte(tmp_path: Path) -> None:
    data = sample()
    path = bundle.write(tmp_path / "b.json", data)
    loaded = bundle.load(path)
    assert loaded.producer is not None  # write adds who wrote it (tests/unit/test_bundle_producer.py)
    assert bundle.dumps(loaded.to_dict()) == path.read_bytes() == bundle.dumps({**data, **loaded.to_dict()})
    assert bundle.dumps(data) == bundle.dumps({k: v for k, v in loaded.to_dict().items() if k != "producer"})
    assert loaded.lab == "unit" and loaded.namespaces == ("lab",) and "pod.yaml" in loaded.manifests


def test_dumps_does_not_depend_on_key_order() -> None:
    data = sample()
    shuffled = json.loads(json.dumps(data), object_pairs_hook=lambda pairs: dict(reversed(pairs)))
    assert bundle.dumps(shuffled) == bundle.dumps(data)
    assert bundle.dumps(data).endswith(b"\n") and "ünïcode".encode() in bundle.dumps(data)


def test_normalise_drops_volatile_fields_only() -> None:
    pod = make_pod("p", gpus=1)
    pod["metadata"].update(uid="u-1", resourceVersion="42", creationTimestamp="2026-01-01T00:00:00Z",
                           managedFields=[{"manager": "kubectl"}], labels={"app": "x"},
                           annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}", "keep": "1"})
    pod["status"].update(startTime="t", podIP="10.0.0.1", conditions=[{"type": "Ready", "lastTransitionTime": "t"}])
    out = bundle.normalise(pod)
    assert "uid" not in out["metadata"] and "resourceVersion" not in out["metadata"]
    assert "managedFields" not in out["metadata"] and "creationTimestamp" not in out["metadata"]
    assert out["metadata"]["annotations"] == {"keep": "1"} and out["metadata"]["labels"] == {"app": "x"}
    assert out["status"] == {"phase": "Pending", "conditions": [{"type": "Ready"}]}
    assert out["spec"] == pod["spec"]


def test_pod_sketch_keeps_what_the_scheduler_counts() -> None:
    pod = make_pod("other", "team-b", gpus=2, node="a100-0", phase="Running")
    pod["spec"]["containers"][0]["env"] = [{"name": "SECRET", "value": "x"}]
    sketch = bundle.pod_sketch(pod)
    assert sketch["spec"]["nodeName"] == "a100-0" and sketch["status"] == {"phase": "Running"}
    assert sketch["spec"]["containers"] == [{"name": "cuda", "resources": pod["spec"]["containers"][0]["resources"]}]
    assert "SECRET" not in json.dumps(sketch)


def test_actions_round_trip_and_version_one_has_none(tmp_path: Path) -> None:
    """Version 2 carries the learner's actions (replayed by grading); a version-1 bundle reads with none."""
    act = {"action": "label", "node": "t4-0", "key": "nvidia.com/device-plugin.config", "value": "timeslice-4"}
    loaded = bundle.load(bundle.write(tmp_path / "b.json", bundle_data(actions=[act])))
    assert [dict(a) for a in loaded.actions] == [act] and loaded.version == bundle.BUNDLE_VERSION == 2
    old = bundle_data()
    old.pop("actions")
    old["bundleVersion"] = 1
    v1 = bundle.loads(bundle.dumps(old))
    assert v1.actions == () and bundle.dumps(v1.to_dict()) == bundle.dumps(old)
    old["actions"] = [act]
    with pytest.raises(bundle.BundleError) as info:
        bundle.loads(bundle.dumps(old))
    assert "version-1 bundles have none" in info.value.said.message


@pytest.mark.parametrize(("version", "key"), [(0, "bundle/too-old"), (-3, "bundle/too-old"), (99, "bundle/too-new")])
def test_version_errors_are_clear(version: int, key: str) -> None:
    data = sample()
    data["bundleVersion"] = version
    with pytest.raises(bundle.BundleError) as info:
        bundle.loads(bundle.dumps(data), "sub/bundle.json")
    assert info.value.key == key and str(version) in info.value.said.message
    assert str(bundle.BUNDLE_VERSION) in info.value.said.message
    finding = info.value.finding()
    assert finding.rule == "bundle" and finding.file == "sub/bundle.json" and finding.section == "operations"


def _raw(text: str) -> bytes:
    return text.encode()


HOSTILE: list[tuple[str, bytes, str]] = [
    ("empty", b"", "bundle/not-json"),
    ("binary", bytes(range(256)) * 4, "bundle/not-json"),
    ("not an object", b"[1, 2, 3]", "bundle/not-a-bundle"),
    ("other kind", _raw('{"kind": "Pod", "bundleVersion": 1}'), "bundle/not-a-bundle"),
    ("version as text", _raw(f'{{"kind": "{bundle.KIND}", "bundleVersion": "1"}}'), "bundle/not-a-bundle"),
    ("version as bool", _raw(f'{{"kind": "{bundle.KIND}", "bundleVersion": true}}'), "bundle/not-a-bundle"),
    ("NaN", _raw(f'{{"kind": "{bundle.KIND}", "bundleVersion": NaN}}'), "bundle/not-json"),
    ("duplicate keys", _raw(f'{{"kind": "{bundle.KIND}", "kind": "x", "bundleVersion": 1}}'), "bundle/not-json"),
    ("deep nesting", b"[" * 200_000 + b"]" * 200_000, "bundle/invalid"),
    ("huge integer", _raw('{"a": ' + "9" * 50_000 + "}"), "bundle/not-json"),
    ("truncated", bundle.dumps(bundle_data())[:-40], "bundle/not-json"),
]


@pytest.mark.parametrize(("label", "payload", "key"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_bytes_give_a_finding_quickly(tmp_path: Path, label: str, payload: bytes, key: str) -> None:
    path = tmp_path / "b.json"
    path.write_bytes(payload)
    started = time.perf_counter()
    result, found = bundle.read(path)
    assert time.perf_counter() - started < 1.0, label
    assert result is None and len(found) == 1 and found[0].rule == "bundle"
    with pytest.raises(bundle.BundleError) as info:
        bundle.load(path)
    assert info.value.key == key, (label, info.value.said.message)


PRODUCER = {"uid": 1001, "user": "ann", "host": "hub", "at": "2026-11-26T18:00:00Z"}


def _mutated(change: Any) -> bytes:
    data = bundle_data(nodes=[make_node("t4-0", gpus=1)], pods=[make_pod("p")])
    change(data)
    return json.dumps(data).encode()


SHAPES: list[tuple[str, Any, str]] = [
    ("lab missing", lambda d: d.pop("lab"), "lab:"),
    ("scope not a list", lambda d: d["scope"].update(namespaces="lab"), "scope.namespaces"),
    ("bad namespace name", lambda d: d["scope"].update(namespaces=["../etc"]), "scope.namespaces"),
    ("manifest not text", lambda d: d["manifests"].update({"a.yaml": 3}), "manifests['a.yaml']"),
    ("manifest too large", lambda d: d["manifests"].update({"a.yaml": "x" * (bundle.MAX_MANIFEST_BYTES + 1)}), "larger than"),
    ("cluster not an object", lambda d: d.update(cluster=[]), "cluster:"),
    ("nodes not a list", lambda d: d["cluster"].update(nodes={"a": 1}), "cluster.nodes"),
    ("pod without metadata", lambda d: d["cluster"]["pods"].append(["x"]), "cluster.pods[1]"),
    ("pod name a number", lambda d: d["cluster"]["pods"][0]["metadata"].update(name=5), "metadata.name"),
    ("pod outside scope", lambda d: d["cluster"]["pods"][0]["metadata"].update(namespace="kube-system"), "outside"),
    ("unknown cluster key", lambda d: d["cluster"].update(secrets=[]), "unknown keys"),
    ("policy not an object", lambda d: d["cluster"].update(clusterPolicy="x"), "clusterPolicy"),
    ("actions missing", lambda d: d.pop("actions"), "actions: must be a list"),
    ("unknown action", lambda d: d.update(actions=[{"action": "exec", "command": "sh"}]), "actions[0]"),
    ("action not an object", lambda d: d.update(actions=["label"]), "actions[0]"),
    ("too many actions", lambda d: d.update(actions=[{"action": "label"}] * (bundle.MAX_ACTIONS + 1)), "more than"),
    ("producer not an object", lambda d: d.update(producer="ann"), "producer: must be an object"),
    ("producer uid as text", lambda d: d.update(producer={**PRODUCER, "uid": "1001"}), "producer.uid"),
    ("producer uid a boolean", lambda d: d.update(producer={**PRODUCER, "uid": True}), "producer.uid"),
    ("producer name with an escape", lambda d: d.update(producer={**PRODUCER, "user": "ann\x1b[2J"}), "producer.user"),
    ("producer time not UTC", lambda d: d.update(producer={**PRODUCER, "at": "yesterday"}), "producer.at"),
    ("producer unknown field", lambda d: d.update(producer={**PRODUCER, "trusted": True}), "producer.trusted"),
]


@pytest.mark.parametrize(("label", "change", "fragment"), SHAPES, ids=[s[0] for s in SHAPES])
def test_damaged_shapes_are_reported_with_their_path(label: str, change: Any, fragment: str) -> None:
    with pytest.raises(bundle.BundleError) as info:
        bundle.loads(_mutated(change), "b.json")
    assert info.value.key == "bundle/invalid" and fragment in info.value.said.message, info.value.said.message


def test_too_large_file_is_refused_before_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bundle, "MAX_BYTES", 1000)
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 5000)
    _, found = bundle.read(path)
    assert "above the" in found[0].message
    with pytest.raises(bundle.BundleError):
        bundle.write(tmp_path / "out.json", bundle_data(manifests={"a": "x" * 2000}))
    assert not (tmp_path / "out.json").exists()


def test_missing_file_is_a_finding(tmp_path: Path) -> None:
    _, found = bundle.read(tmp_path / "nope.json")
    assert found[0].rule == "bundle" and "cannot be read" in found[0].message


def test_view_keeps_to_its_scope() -> None:
    """Namespaces outside the scope raise OutOfScope; across namespaces the sketches of other pods count."""
    data = bundle_data(pods=[make_pod("p")], other_pods=[bundle.pod_sketch(make_pod("q", "team-b", gpus=1, node="t4-0"))])
    view = bundle.loads(bundle.dumps(data)).view()
    assert [p["metadata"]["name"] for p in view.pods("lab")] == ["p"]
    assert [p["metadata"]["name"] for p in view.pods(None)] == ["p", "q"]
    assert view.live is False and view.cluster_policy() is None
    with pytest.raises(view_mod.OutOfScope):
        view.pods("team-b")
    with pytest.raises(view_mod.OutOfScope):
        view.events("kube-system")
    assert view.configmaps(bundle.OPERATOR_NAMESPACE) == []


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.bundle.json")), ids=lambda p: p.name)
def test_recorded_fixtures_are_canonical(path: Path) -> None:
    """The recorded bundles load, and writing them again gives the same bytes."""
    loaded = bundle.load(path)
    assert bundle.dumps(loaded.to_dict()) == path.read_bytes()
