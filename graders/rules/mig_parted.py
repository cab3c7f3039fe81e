"""Rule ``mig-parted-config``: mig-parted configs parse strictly and every layout fits the GPUs it targets.

``nvidia-mig-parted`` rejects unknown fields and missing required ones with its own messages (parsed by
``cluster.gpu.mig``). A layout that parses can still be impossible: MIG instances live on fixed
placements of the GPU's memory slices (``3g.40gb`` only at slice 0 or 4), so ``3g.40gb: 2`` plus a
``1g.10gb`` does not fit an 80 GB card, and ``1g.5gb`` exists only on 40 GB A100s. Each enabled entry is
fitted on each MIG-capable GPU model of the fleet that its ``device-filter`` selects, largest instance
first, as mig-parted creates them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from cluster import errors
from cluster.gpu import catalog, mig
from graders import findings, manifests, source
from graders.rules import base

RULE_ID = "mig-parted-config"

MAX_NODES = 20_000


def check(doc: source.Document, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    if manifests.classify(doc) is not manifests.DocType.MIG_PARTED_CONFIG:
        return
    data = doc.data
    assert isinstance(data, dict)
    if sum(1 for _ in source.walk(data)) > MAX_NODES:
        yield base.emit(doc, (), "mig-parted-config/too-big", limit=MAX_NODES)
        return
    try:
        config = mig.parse(json.dumps(data, allow_nan=False), source=doc.file)
    except errors.ConfigError as exc:
        for problem in exc.problems:
            path, message = _split(data, problem)
            yield base.emit(doc, path, "mig-parted-config/invalid", problem=message)
        return
    except ValueError:
        yield base.emit(doc, (), "mig-parted-config/invalid", problem="a number that is not finite")
        return
    models = [m for m in ctx.fleet.gpu_models if m.mig_capable]
    if not models:
        return
    for name, entries in config.configs.items():
        for i, entry in enumerate(entries):
            if entry.mig_enabled:
                yield from _fit_entry(doc, ("mig-configs", name, i), name, entry, models)


def _fit_entry(
    doc: source.Document, path: source.YPath, name: str, entry: mig.MigConfigEntry, models: list[catalog.GpuModel]
) -> Iterator[findings.Finding]:
    targets = [m for m in models if not entry.device_filter or mig.pci_id(m) in _filter_ids(entry)]
    if entry.device_filter and not targets:
        yield base.emit(doc, path + ("device-filter",), "mig-parted-config/filter-matches-nothing", config=name,
                        filters=", ".join(entry.device_filter),
                        fleet=", ".join(f"{m.key} ({mig.device_filter_string(m)})" for m in models))
        return
    pairs = [(p, c) for p, c in entry.mig_devices if c > 0]
    if any(len(p.split("+", 1)[0].split(".")) == 3 for p, _ in pairs):
        return  # compute-instance profiles (1c.3g.20gb) share a GPU instance; not fitted here
    for model in targets:
        result = mig.fit(model, pairs)
        if not result.ok:
            yield base.emit(doc, path + ("mig-devices",), "mig-parted-config/does-not-fit", config=name,
                            model=model.key, reason=result.reason or "",
                            profiles=", ".join(p.name for p in model.mig_profiles))


def _filter_ids(entry: mig.MigConfigEntry) -> set[int]:
    ids = set()
    for text in entry.device_filter:
        try:
            ids.add(int(text, 0))
        except ValueError:
            continue
    return ids


def _split(data: dict[str, object], problem: str) -> tuple[source.YPath, str]:
    """Turn ``mig-configs.<name>[<i>]: message`` into a path (names may contain dots) and the message."""
    configs = manifests.as_map(data.get("mig-configs"))
    best: tuple[source.YPath, str] = ((), problem)
    for name, items in configs.items():
        for prefix, path in ((f"mig-configs.{name}: ", ("mig-configs", name)),):
            if problem.startswith(prefix):
                best = (path, problem[len(prefix):])
        for i, _ in enumerate(manifests.as_list(items)):
            prefix = f"mig-configs.{name}[{i}]: "
            if problem.startswith(prefix):
                message = problem[len(prefix):]
                field = message.removeprefix("unexpected field: ") if message.startswith("unexpected field: ") else ""
                return ("mig-configs", name, i) + ((field,) if field else ()), message
    if best[0]:
        return best
    if problem.startswith(("unknown version", "unable to parse with missing 'version'")):
        return ("version",), problem
    if problem.startswith("unexpected field: "):
        return (problem.removeprefix("unexpected field: "),), problem
    return (), problem
