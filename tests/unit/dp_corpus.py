"""A generated corpus of NVIDIA device-plugin configs for the differential test against NVIDIA's decoder.

Each case is a config file's text. The corpus varies one thing at a time around a valid time-slicing config:
key spelling and case at every level, replica values and their YAML types, resource names and wildcards,
``devices`` selectors, time-slicing with MPS, versions, unknown keys, empty blocks, second YAML documents,
JSON configs, IMEX channel IDs, ``flags.gfd.sleepInterval`` and the top-level ``resources`` lists. It is data
only: the verdicts come from NVIDIA's decoder (``dpcheck``) at test time, never from this file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

UUID = "b1028956-cfa2-0990-bf4a-5da9abb51763"


@dataclass(frozen=True)
class Raw:
    """A scalar written into the YAML text exactly as given (``4.0``, ``1e1``, ``"4"``, ``yes``)."""

    text: str


def emit(value: Any, indent: int = 0) -> str:
    """Block-style YAML of nested dicts and lists whose leaves are ``Raw`` (or plain str/int/bool/None)."""
    pad = "  " * indent
    if isinstance(value, dict):
        if not value:
            return "{}"
        lines = []
        for key, sub in value.items():
            if isinstance(sub, (dict, list)) and sub:
                lines.append(f"{pad}{key}:\n{emit(sub, indent + 1)}")
            else:
                lines.append(f"{pad}{key}: {_scalar(sub)}".rstrip())
        return "\n".join(lines)
    if isinstance(value, list):
        if not value:
            return "[]"
        lines = []
        for item in value:
            if isinstance(item, dict) and item:
                body = emit(item, indent + 1).split("\n")
                lines.append(f"{pad}- {body[0].lstrip()}")
                lines.extend(body[1:])
            else:
                lines.append(f"{pad}- {_scalar(item)}")
        return "\n".join(lines)
    return _scalar(value)


def _scalar(value: Any) -> str:
    if isinstance(value, Raw):
        return value.text
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return "{}" if isinstance(value, dict) else "[]"
    return str(value)


def _resource(**over: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"name": "nvidia.com/gpu", "replicas": 4}
    for key, value in over.items():
        if value is _DELETE:
            item.pop(key, None)
        else:
            item[key] = value
    return item


_DELETE = object()


def _ts(resources: list[Any] | None = None, *, strategy: str = "timeSlicing", **extra: Any) -> dict[str, Any]:
    block: dict[str, Any] = dict(extra)
    block["resources"] = resources if resources is not None else [_resource()]
    return {"version": "v1", "sharing": {strategy: block}}


def _spellings(word: str) -> list[str]:
    kebab = "".join(f"-{c.lower()}" if c.isupper() else c for c in word)
    return sorted({word, word.lower(), word.upper(), word[:1].upper() + word[1:], kebab, word + "s", word[:-1]})


def cases() -> list[tuple[str, str]]:
    """``(case id, config text)``, a few hundred, in a stable order."""
    out: list[tuple[str, Any]] = []

    # key spelling and case at every level
    for word in _spellings("version"):
        out.append((f"key-version-{word}", {word: "v1", "sharing": {"timeSlicing": {"resources": [_resource()]}}}))
    for word in _spellings("sharing"):
        out.append((f"key-sharing-{word}", {"version": "v1", word: {"timeSlicing": {"resources": [_resource()]}}}))
    for block in ("timeSlicing", "mps"):
        for word in _spellings(block):
            cfg = {"version": "v1", "flags": {"mpsRoot": "/run/nvidia/mps"},
                   "sharing": {word: {"resources": [_resource()]}}}
            out.append((f"key-{block}-{word}", cfg))
    for key in ("renameByDefault", "failRequestsGreaterThanOne", "resources"):
        for word in _spellings(key):
            if word == key:
                continue
            block = {"resources": [_resource()], word: True if key != "resources" else [_resource(replicas=3)]}
            out.append((f"key-ts-{key}-{word}", {"version": "v1", "sharing": {"timeSlicing": block}}))
    for key in ("name", "replicas", "rename", "devices"):
        for word in _spellings(key):
            if word == key:
                continue
            value: Any = {"name": "gpu", "replicas": 3, "rename": "gpu-shared", "devices": "all"}[key]
            out.append((f"key-res-{key}-{word}", _ts([{**_resource(), word: value}])))
    for word in _spellings("flags"):
        out.append((f"key-flags-{word}", {"version": "v1", word: {"migStrategy": "mixed"}}))
    for key in ("migStrategy", "failOnInitError", "mpsRoot", "plugin", "gfd", "deviceDiscoveryStrategy"):
        for word in _spellings(key):
            value = {"migStrategy": "bogus", "failOnInitError": Raw("maybe"), "mpsRoot": Raw("7"),
                     "plugin": {"deviceIDStrategy": "serial"}, "gfd": {"sleepInterval": "soon"},
                     "deviceDiscoveryStrategy": "pci"}[key]
            out.append((f"key-flags-{key}-{word}", {"version": "v1", "flags": {word: value}}))
    for key in ("deviceListStrategy", "deviceIDStrategy", "passDeviceSpecs"):
        for word in _spellings(key):
            value = {"deviceListStrategy": "bogus", "deviceIDStrategy": "serial", "passDeviceSpecs": Raw("7")}[key]
            out.append((f"key-plugin-{key}-{word}", {"version": "v1", "flags": {"plugin": {word: value}}}))
    for word in _spellings("sleepInterval"):
        out.append((f"key-gfd-{word}", {"version": "v1", "flags": {"gfd": {word: "soon"}}}))
    for word in _spellings("imex"):
        out.append((f"key-imex-{word}", {"version": "v1", word: {"channelIDs": [1]}}))
    for word in _spellings("channelIDs"):
        out.append((f"key-imex-channelIDs-{word}", {"version": "v1", "imex": {word: [1]}}))
    for word in _spellings("resources"):
        out.append((f"key-top-resources-{word}", {"version": "v1", word: {"gpus": [{"pattern": Raw("'*'"), "name": "gpu"}]}}))
    for word in _spellings("gpus"):
        out.append((f"key-resources-gpus-{word}", {"version": "v1", "resources": {word: [{"pattern": Raw("'*'")}]}}))
    for key in ("pattern", "name"):
        for word in _spellings(key):
            item = {"pattern": Raw("'*'"), "name": "gpu"}
            item[word] = item.pop(key)
            out.append((f"key-resources-item-{key}-{word}", {"version": "v1", "resources": {"gpus": [item]}}))

    # replica values and types
    for text in ("4", "4.0", "1e1", "1E1", '"4"', "'4'", "-1", "0", "1", "2", "4.5", "true", "null", "[4]", "0x10",
                 "1e-1", "64", "+4", "48", "49", "1000000", "{}", "~", "2.0000000001"):
        out.append((f"replicas-{text}", _ts([_resource(replicas=Raw(text))])))
        out.append((f"replicas-mps-{text}", {**_ts([_resource(replicas=Raw(text))], strategy="mps"),
                                             "flags": {"mpsRoot": "/run/nvidia/mps"}}))
    out.append(("replicas-missing", _ts([_resource(replicas=_DELETE)])))

    # resource names and wildcards
    for name in ("gpu", "nvidia.com/gpu", "mig-1g.10gb", "nvidia.com/mig-1g.10gb", "GPU", "gpu_x", '""', "*",
                 "nvidia.com/*", "mig-*", "other.com/gpu", "nvidia.com/gpu.shared", "a" * 60, "a" * 52, "a" * 53,
                 "-gpu", "gpu-", "g.p.u", "7", "true", "[gpu]"):
        label = name[:20] + (f"x{len(name)}" if len(name) > 20 else "")
        out.append((f"name-{label}", _ts([_resource(name=Raw(name))])))
        out.append((f"rename-{label}", _ts([_resource(rename=Raw(name))])))
        out.append((f"rename-default-{label}", _ts([_resource(rename=Raw(name))], renameByDefault=True)))
    out.append(("name-missing", _ts([_resource(name=_DELETE)])))
    for pattern in ("*", "A100*", "'*-80GB'", "[x]", "7"):
        out.append((f"pattern-{pattern}", {"version": "v1", "resources": {"gpus": [{"pattern": Raw(pattern), "name": "gpu"}],
                                                                        "mig": [{"pattern": Raw(pattern), "name": "mig-1g.10gb"}]}}))

    # devices selectors
    for devices in ("all", "some", "ALL", "0", "2", "-1", "[0, 1]", '["0:1"]', f'["GPU-{UUID}"]', f'["MIG-{UUID}"]',
                    f'["MIG-GPU-{UUID}/1/0"]', '["bad"]', "[-1]", "{}", "true", '["0", 1]', "[]", "2.0", '"3"'):
        out.append((f"devices-{devices[:24]}", _ts([_resource(devices=Raw(devices))])))

    # time-slicing with MPS, flags that matter to MPS
    both = {"version": "v1", "sharing": {"timeSlicing": {"resources": [_resource()]},
                                         "mps": {"resources": [_resource(replicas=2)]}}}
    out.append(("ts-and-mps", both))
    out.append(("ts-and-mps-root", {**both, "flags": {"mpsRoot": "/run/nvidia/mps"}}))
    for strategy in ("none", "single", "mixed"):
        out.append((f"mps-mig-{strategy}", {**_ts(strategy="mps"), "flags": {"migStrategy": strategy,
                                                                             "mpsRoot": "/run/nvidia/mps"}}))
    out.append(("mps-no-root", _ts(strategy="mps")))
    out.append(("mps-fail-false", {**_ts(strategy="mps", failRequestsGreaterThanOne=False),
                                   "flags": {"mpsRoot": "/run/nvidia/mps"}}))
    out.append(("mps-rename", {**_ts(strategy="mps", renameByDefault=True), "flags": {"mpsRoot": "/r"}}))
    for value in ("true", "false", '"true"', "yes", "1", "null"):
        out.append((f"rename-by-default-{value}", _ts(renameByDefault=Raw(value))))
        out.append((f"fail-gt1-{value}", _ts(failRequestsGreaterThanOne=Raw(value))))

    # versions
    for version in ("v1", "v2", '""', "V1", "1", "null", "v1beta1", "[v1]"):
        out.append((f"version-{version}", {"version": Raw(version), "sharing": {"timeSlicing": {"resources": [_resource()]}}}))
    out.append(("version-missing", {"sharing": {"timeSlicing": {"resources": [_resource()]}}}))

    # unknown keys at each level
    out.append(("unknown-top", {**_ts(), "timeslicing": {"resources": [_resource()]}}))
    out.append(("unknown-sharing", {"version": "v1", "sharing": {"time-slicing": {"resources": [_resource()]}}}))
    out.append(("unknown-ts", _ts(extra=1)))
    out.append(("unknown-res", _ts([{**_resource(), "replica": 8}])))
    out.append(("unknown-flags", {**_ts(), "flags": {"migstrategy": "single", "colour": "blue"}}))
    out.append(("unknown-plugin", {**_ts(), "flags": {"plugin": {"bogus": 1}}}))
    out.append(("unknown-gfd", {**_ts(), "flags": {"gfd": {"bogus": 1}}}))
    out.append(("unknown-imex", {**_ts(), "imex": {"channelIDs": [0], "channelIds2": [5], "requred": True}}))
    out.append(("unknown-resources", {**_ts(), "resources": {"gpus": [{"pattern": Raw("'*'"), "name": "gpu", "count": 2}],
                                                              "gpu": []}}))
    out.append(("unknown-many", {**_ts(), "a": 1, "b": {"c": 2}, "flags": {"x": 1, "plugin": {"y": 2}}}))
    out.append(("shared-allocation-policy-packed", {**_ts(), "flags": {"plugin": {"sharedDevicesAllocationPolicy": "packed"}}}))
    out.append(("shared-allocation-policy-bad", {**_ts(), "flags": {"plugin": {"sharedDevicesAllocationPolicy": "spread"}}}))

    # empty blocks
    for key, value in (("timeSlicing", None), ("timeSlicing", {}), ("mps", None), ("mps", {}),
                       ("timeSlicing", {"resources": []}), ("timeSlicing", {"resources": None}),
                       ("timeSlicing", {"renameByDefault": True}), ("timeSlicing", Raw("[]")),
                       ("timeSlicing", Raw('""'))):
        out.append((f"empty-{key}-{json.dumps(value, default=lambda r: r.text)}", {"version": "v1", "sharing": {key: value}}))
    out.append(("empty-sharing", {"version": "v1", "sharing": None}))
    out.append(("empty-sharing-map", {"version": "v1", "sharing": {}}))
    out.append(("empty-flags", {"version": "v1", "flags": None}))
    out.append(("empty-imex", {"version": "v1", "imex": None}))
    out.append(("empty-resources", {"version": "v1", "resources": None}))

    # IMEX channel IDs
    for ids in ("[]", "[0]", "[1]", "[0, 1]", '"0"', '["0"]', "0", "[-1]", "[2048]", "null", "[0.0]"):
        out.append((f"imex-{ids}", {"version": "v1", "imex": {"channelIDs": Raw(ids)}}))
    for required in ("true", "false", '"yes"', "1"):
        out.append((f"imex-required-{required}", {"version": "v1", "imex": {"channelIDs": [0], "required": Raw(required)}}))

    # flags.gfd.sleepInterval and other flag values
    for interval in ("60s", "60", "1m", "infinite", "abc", "true", "1.5", "-5s", '"1h30m"', "1e9", "null", "[60s]"):
        out.append((f"sleep-{interval}", {"version": "v1", "flags": {"gfd": {"sleepInterval": Raw(interval)}}}))
    for key, value in (("migStrategy", "mixed"), ("migStrategy", "Mixed"), ("migStrategy", "7"),
                       ("deviceDiscoveryStrategy", "nvml"), ("deviceDiscoveryStrategy", "pci"),
                       ("failOnInitError", "false"), ("failOnInitError", '"false"'), ("mpsRoot", "null"),
                       ("nvidiaDriverRoot", "/run/nvidia/driver"), ("useNodeFeatureAPI", "true")):
        out.append((f"flag-{key}-{value}", {**_ts(), "flags": {key: Raw(value)}}))
    for key, value in (("deviceListStrategy", "envvar"), ("deviceListStrategy", "[envvar, volume-mounts]"),
                       ("deviceListStrategy", "[cdi-cri]"), ("deviceListStrategy", "bogus"),
                       ("deviceListStrategy", "[envvar, bogus]"), ("deviceListStrategy", "7"),
                       ("deviceIDStrategy", "index"), ("deviceIDStrategy", "serial"),
                       ("passDeviceSpecs", "true"), ("passDeviceSpecs", '"true"')):
        out.append((f"plugin-{key}-{value}", {**_ts(), "flags": {"plugin": {key: Raw(value)}}}))

    # the top-level resources list
    for label, value in (("list", "[{pattern: '*', name: gpu}]"), ("gpus", "{gpus: [{pattern: '*', name: gpu}]}"),
                         ("no-name", "{gpus: [{pattern: '*'}]}"), ("no-pattern", "{gpus: [{name: gpu}]}"),
                         ("bad-name", "{gpus: [{pattern: '*', name: BAD}]}"), ("mig", "{mig: [{pattern: '1g*', name: mig-small}]}"),
                         ("string", "gpu"), ("empty-gpus", "{gpus: []}"), ("item-string", "{gpus: [gpu]}"),
                         ("name-int", "{gpus: [{pattern: '*', name: 7}]}")):
        out.append((f"top-resources-{label}", {**_ts(), "resources": Raw(value)}))

    texts = [(case_id, emit(cfg) + "\n") for case_id, cfg in out]

    # second YAML documents, a leading document marker, JSON configs
    base = emit(_ts()) + "\n"
    texts += [
        ("doc2-valid", base + "---\n" + emit(_ts([_resource(replicas=8)])) + "\n"),
        ("doc2-bad", base + "---\nversion: v2\nsharing: {timeSlicing: {}}\n"),
        ("doc2-broken", base + "---\nthis: [is: not\n"),
        ("doc2-leading-marker", "---\n" + base),
        ("doc2-empty-first", "---\n---\n" + base),
        ("doc2-first-bad", "version: v1\nsharing: {timeSlicing: {}}\n---\n" + base),
    ]
    for label, cfg in (("ts", _ts()), ("mps", {**_ts(strategy="mps"), "flags": {"mpsRoot": "/run/nvidia/mps"}}),
                       ("float", _ts([_resource(replicas=4.0)])), ("bad-version", {**_ts(), "version": "v2"}),
                       ("empty-ts", {"version": "v1", "sharing": {"timeSlicing": {}}}),
                       ("case", {"Version": "v1", "Sharing": {"TimeSlicing": {"resources": [_resource()]}}}),
                       ("unknown", {**_ts(), "extra": {"a": 1}})):
        texts.append((f"json-{label}", json.dumps(cfg, indent=2) + "\n"))
        texts.append((f"json-compact-{label}", json.dumps(cfg) + "\n"))
    seen: set[str] = set()
    unique = []
    for case_id, text in texts:  # a spelling sweep meets the canonical config more than once: keep it once
        if text not in seen:
            seen.add(text)
            unique.append((case_id, text))
    return unique


def configmap(text: str, key: str = "config.yaml", name: str = "plugin-config") -> str:
    """The config as a value of a ConfigMap (as the GPU Operator's ``devicePlugin.config`` points to)."""
    body = "\n".join(("    " + line) if line else "" for line in text.rstrip("\n").split("\n"))
    return (f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: gpu-operator\n"
            f"data:\n  {key}: |\n{body}\n")
