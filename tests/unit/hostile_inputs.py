"""A factory of malformed and hostile lint inputs: bombs, huge and binary files, deep nesting, wrong types,
unknown kinds, invalid CEL, confusable Unicode, tabs, duplicate keys, NUL bytes, huge numbers, anchors.

Generated rather than committed, so the corpus stays small in git and easy to extend. Every input is
built to be wrong, so each one must yield at least one finding.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from typing import Any

import yaml

Case = tuple[str, bytes]

_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "victim", "labels": {"app": "x"}},
    "spec": {
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "nodeSelector": {"nvidia.com/gpu.product": "Tesla-T4"},
        "containers": [{"name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
    },
}

_CLAIM = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: c}}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
        selectors:
        - cel:
            expression: {expr}
"""


def _dump(obj: object) -> bytes:
    return yaml.safe_dump(obj, sort_keys=False, allow_unicode=True).encode()


def bombs() -> Iterator[Case]:
    for levels, width in ((9, 9), (10, 10), (6, 20), (30, 2), (64, 2)):
        lines = [f'l0: &l0 [{", ".join(["lol"] * width)}]']
        lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
        yield f"bomb-flow-{levels}x{width}", "\n".join(lines).encode()
    block = ["a0: &a0\n  - lol\n  - lol\n  - lol\n  - lol\n  - lol\n  - lol\n  - lol\n  - lol"]
    for i in range(1, 12):
        block.append(f"a{i}: &a{i}\n" + "".join(f"  - *a{i - 1}\n" for _ in range(8)))
    yield "bomb-block", "\n".join(block).encode()
    keys = "\n".join(f"  k{i}: *base" for i in range(40))
    yield "bomb-merge", (f"base: &base {{x: [1,2,3,4,5,6,7,8,9,10]}}\nm: &m\n  <<: *base\n{keys}\n"
                         "n: &n [*m, *m, *m, *m, *m, *m, *m, *m]\no: &o [*n, *n, *n, *n, *n, *n, *n, *n]\n"
                         "p: [*o, *o, *o, *o, *o, *o, *o, *o]\n").encode()
    embedded = "\n".join(f"    l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 9))
    yield "bomb-in-configmap", (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plugin}\ndata:\n  any: |\n    version: v1\n"
        f"    l0: &l0 [a, a, a, a, a, a, a, a, a, a]\n{embedded}\n    sharing: {{}}\n"
    ).encode()


def huge() -> Iterator[Case]:
    yield "huge-20mb", b"# " + b"x" * (20 * 1024 * 1024) + b"\n"
    yield "huge-just-over-limit", b"a: " + b"b" * (1024 * 1024) + b"\n"
    pods = []
    for i in range(4000):
        pod = copy.deepcopy(_POD)
        pod["metadata"]["name"] = f"p{i}"
        pod["spec"]["tolerations"] = []
        pods.append(pod)
    text = yaml.safe_dump_all(pods, sort_keys=False).encode()
    yield "huge-many-pods-under-limit", text[: 1024 * 1024 - 1]
    yield "huge-many-documents", b"---\n" * 200_000
    yield "huge-long-line", _dump(_POD).replace(b"nvidia.com/gpu: 1", b"nvidia.com/gpu: " + b"1" * 900_000)
    yield "huge-list-items", json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"},
         "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "0.5"}}}]}}
        for i in range(20_000)]}).encode()
    yield "huge-many-keys", ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n"
                             + "".join(f"  k{i}: v\n" for i in range(60_000))).encode()
    yield "huge-long-key", b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  " + b"k" * 500_000 + b": 1\n"


def binary() -> Iterator[Case]:
    rng = random.Random(20261126)
    for i in range(4):
        yield f"binary-random-{i}", bytes(rng.randrange(256) for _ in range(4096 * (i + 1)))
    yield "binary-png", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    yield "binary-gzip", b"\x1f\x8b\x08\x00" + bytes(rng.randrange(256) for _ in range(2000))
    yield "binary-elf", b"\x7fELF\x02\x01\x01" + b"\x00" * 100
    yield "binary-nul-in-middle", _dump(_POD).replace(b"cuda", b"cu\x00da")
    yield "binary-utf16", _dump(_POD).decode().replace("nvidia.com/gpu: 1", "nvidia.com/gpu: 0.5").encode("utf-16")
    yield "binary-latin1", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: café}\n".encode("latin-1")
    yield "binary-control-chars", b"apiVersion: v1\nkind: Pod\x07\nmetadata: {name: p}\n"
    yield "binary-escape-sequences", b"kind: \x1b[31mPod\x1b[0m\n"
    yield "binary-lone-surrogate-bytes", b"kind: \xed\xa0\x80\n"


def nesting() -> Iterator[Case]:
    yield "deep-flow-lists", b"a: " + b"[" * 10_000 + b"]" * 10_000
    yield "deep-flow-maps", b"a: " + b"{b: " * 5_000 + b"1" + b"}" * 5_000
    yield "deep-block-maps", "".join(f"{'  ' * i}k{i}:\n" for i in range(300)).encode()
    yield "deep-block-lists", "".join(f"{'  ' * i}-\n" for i in range(300)).encode() + b"  " * 300 + b"- x\n"
    yield "deep-unclosed", b"a: " + b"[" * 50_000
    pod = copy.deepcopy(_POD)
    node: dict[str, Any] = pod["spec"]["containers"][0]
    for i in range(100):
        node["resources"] = {"limits": {"nested": {}}}
        node = node["resources"]["limits"]["nested"]
    yield "deep-inside-pod", _dump(pod)


_WRONG: tuple[object, ...] = ("text", 42, 3.5, True, None, ["a", 1], {"x": {"y": 1}})
_TARGETS: tuple[tuple[str, ...], ...] = (
    ("spec",), ("metadata",), ("spec", "containers"), ("spec", "tolerations"), ("spec", "nodeSelector"),
)
_CONTAINER_TARGETS = ("resources", "limits-map", "gpu-value")


def wrong_types() -> Iterator[Case]:
    for target in _TARGETS:
        for value in _WRONG:
            pod = copy.deepcopy(_POD)
            parent = pod
            for part in target[:-1]:
                parent = parent[part]
            parent[target[-1]] = value
            if target == ("spec", "nodeSelector") and (isinstance(value, dict) or value is None):
                continue  # a mapping is the right type there, and null means unset
            yield f"wrong-{'.'.join(target)}-{type(value).__name__}", _dump(pod)
    for value in _WRONG:
        for where in _CONTAINER_TARGETS:
            if value is None and where != "gpu-value":
                continue  # null resources or limits just mean "none": not an error
            pod = copy.deepcopy(_POD)
            container = pod["spec"]["containers"][0]
            if where == "resources":
                container["resources"] = value
            elif where == "limits-map":
                container["resources"]["limits"] = value
            else:
                container["resources"]["limits"]["nvidia.com/gpu"] = value
            if where == "resources" and isinstance(value, dict) or where == "limits-map" and isinstance(value, dict):
                container["resources"]["limits"] = {"nvidia.com/gpu": "lots"}
            yield f"wrong-container-{where}-{type(value).__name__}", _dump(pod)
    yield "wrong-toplevel-scalar", b"just a string\n"
    yield "wrong-toplevel-list", b"- 1\n- 2\n"
    yield "wrong-quota-hard-list", b"apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q}\nspec: {hard: [1, 2]}\n"
    yield "wrong-priority-value-string", b"apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: p}\nvalue: high\n"
    yield "wrong-dp-config-types", b"version: v1\nsharing:\n  timeSlicing:\n    resources: {name: gpu}\n"
    yield "wrong-dp-config-replicas", b"version: 1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: 7, replicas: many}\n"
    yield "wrong-mig-config", b"version: v1\nmig-configs:\n  x:\n  - devices: [a, b]\n    mig-enabled: maybe\n    mig-devices: [1]\n"
    yield "wrong-mig-huge-count", b"version: v1\nmig-configs:\n  x:\n  - devices: all\n    mig-enabled: true\n    mig-devices: {'1g.10gb': 1000000000}\n"
    yield "wrong-claim-requests", b"apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\nspec: {devices: {requests: 5}}\n"
    yield "wrong-kubelet-policy", b"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ntopologyManagerPolicy: [none]\n"


def unknown_kinds() -> Iterator[Case]:
    yield "kind-unknown", b"apiVersion: example.com/v1\nkind: Frobnicator\nmetadata: {name: f}\n"
    yield "kind-number", b"apiVersion: v1\nkind: 123\n"
    yield "kind-missing", b"apiVersion: v1\nmetadata: {name: f}\n"
    yield "kind-empty-mapping", b"{}\n"
    yield "kind-wrong-group", b"apiVersion: apps/v1\nkind: Pod\nmetadata: {name: p}\n"
    yield "kind-dra-alpha", b"apiVersion: resource.k8s.io/v1alpha3\nkind: ResourceClaim\nmetadata: {name: c}\n"


def invalid_cel() -> Iterator[Case]:
    expressions = (
        "device.attributes['gpu.nvidia.com'].productName == 'A100'))",
        "device.attributes['gpu.nvidia.com'].",
        "(" * 2000 + "true" + ")" * 2000,
        "'" + "x" * 11_000 + "' == device.driver",
        "device.capacity['gpu.nvidia.com'].memory >= 40",
        "device.attributes['gpu.nvidia.com'].driverVersion > '550.0.0'",
        "semver('1.2') == semver('1.2.0')",
        "quantity('lots') == quantity('1')",
        "device.attributes['nvidia.com/gpu'].type == 'gpu'",
        "1 + 1",
        "\u202e'gpu' == device.driver",
        "device.attributes['gpu.nvidia.com'].index == 0 \\",
    )
    for i, expr in enumerate(expressions):
        yield f"cel-{i:02d}", _CLAIM.format(expr=json.dumps(expr)).encode()
    yield "cel-not-an-object", _CLAIM.format(expr="[1, 2]").encode().replace(b"        - cel:", b"        - cel: 5\n          x:")
    yield "cel-not-a-string", _CLAIM.format(expr="[1, 2]").encode()


def confusables() -> Iterator[Case]:
    base = _dump(_POD).decode()
    swaps = (
        ("nvidia.com/gpu:", "nvidia.com/gpu\u0435:"[:0] + "nvidi\u0430.com/gpu:"),
        ("limits:", "lim\u0456ts:"),
        ("nodeSelector:", "node\u0405elector:"),
        ("tolerations:", "t\u043elerations:"),
        ("containers:", "containers\u200b:"),
        ("nvidia.com/gpu.product", "nvidia.com/gpu\u2024product"),
        ("operator: Exists", "operator: Ex\u0456sts"),
        ("kind: Pod", "kind: P\u03bfd"),
        ("apiVersion:", "\uff41piVersion:"),
        ("name: c", "name: c\u202e"),
    )
    for i, (old, new) in enumerate(swaps):
        assert old in base, old
        yield f"confusable-{i:02d}", base.replace(old, new, 1).encode()


def oddities() -> Iterator[Case]:
    base = _dump(_POD)
    yield "tab-indentation", base.replace(b"  containers", b"\tcontainers")
    yield "tabs-everywhere", base.replace(b"  ", b"\t")
    yield "duplicate-keys-many", b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n" + b"  k: v\n" * 5000
    yield "duplicate-top-level", b"apiVersion: v1\nkind: Pod\nkind: Deployment\nmetadata: {name: p}\n"
    yield "huge-int", b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    image: i\n" \
        b"    resources:\n      limits:\n        nvidia.com/gpu: " + b"9" * 5000 + b"\n"
    yield "huge-float", b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    image: i\n" \
        b"    resources:\n      limits:\n        nvidia.com/gpu: 1e400\n"
    yield "infinity-gpus", base.replace(b"nvidia.com/gpu: 1", b"nvidia.com/gpu: .inf")
    yield "nan-priority", b"apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: p}\nvalue: .nan\n"
    yield "anchor-undefined", b"a: *nowhere\n"
    yield "anchor-recursive", b"a: &a [*a]\n"
    yield "anchor-redefined", b"a: &x 1\nb: &x [1]\nc: *x\nkind: 5\n"
    yield "merge-non-map", b"apiVersion: v1\nkind: Pod\nmetadata:\n  <<: [1, 2]\n  name: p\n"
    yield "complex-key", b"? [a, b]\n: value\nkind: Pod\n"
    yield "python-tag", b"!!python/object/apply:os.system ['rm -rf /']\n"
    yield "custom-tags", b"apiVersion: !v1 v1\nkind: !k Pod\nmetadata: !!binary aGVsbG8=\n"
    yield "bad-int-tag", b"apiVersion: v1\nkind: Pod\nmetadata: {name: !!int twelve}\n"
    yield "unterminated-string", b"apiVersion: v1\nkind: Pod\nmetadata: {name: 'p}\n"
    yield "only-comments", b"# nothing here\n# at all\n"
    yield "empty-file", b""
    yield "bom-only", b"\xef\xbb\xbf"
    yield "emoji-keys", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  🚀: 1\n  containers: []\n".encode()
    yield "directive-garbage", b"%YAML 9.9\n%TAG ! tag:evil,2000:\n---\nkind: Pod\n"
    yield "windows-newlines", base.replace(b"\n", b"\r\n").replace(b"Exists", b"exists")
    yield "mixed-newlines", base.replace(b"\n", b"\r", 3).replace(b"Exists", b"Exist")


def all_cases() -> list[Case]:
    cases = [*bombs(), *huge(), *binary(), *nesting(), *wrong_types(), *unknown_kinds(), *invalid_cel(),
             *confusables(), *oddities()]
    names = [n for n, _ in cases]
    assert len(names) == len(set(names)), "case names must be unique"
    return cases
