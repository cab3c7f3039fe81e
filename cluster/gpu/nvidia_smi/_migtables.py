"""``nvidia-smi mig -lgip``, ``-lgipp``, ``-lgi`` and ``-lci``: the MIG listings, from the catalog and the inventory.

``-lgip``/``-lgipp`` are recorded on real H100 and H200 (``tests/fixtures/nvidia-smi/*/mig-lgip*.txt``); ``-lgi`` and
``-lci`` with instances follow a 580.126.09 transcript (``docs/ssup2-*``), since the recorded GPUs were not in MIG
mode and must not be switched. Rows come in the order the real tool gives them: GPU instances by profile (the
``-lgip`` order), then by instance id; compute instances under their GPU instance by id. ``Free`` counts how many
more instances of a profile fit the GPU's free memory slices. A container sees only the GPU instances of its own
MIG devices (all of them when it holds the whole GPU); that is inferred, not recorded. Plain data; no NVML.
"""

from __future__ import annotations

from collections.abc import Sequence

from cluster.gpu import catalog, inventory
from cluster.gpu.nvidia_smi import view

NO_MIG = "No MIG-enabled devices found.\n"
NO_GI = "No GPU instances found: Not Found\n"  # seen in a user's transcript; its exit code is unconfirmed
NO_CI = "No compute instances found: Not Found\n"  # by analogy with NO_GI (unconfirmed)
_CI_PROFILE_IDS = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}  # NVML_COMPUTE_INSTANCE_PROFILE_<n>_SLICE


def _box(width: int, title: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    rule = "+" + "-" * width + "+"
    lines = [rule, *("|" + t.ljust(width) + "|" for t in title), "|" + "=" * width + "|"]
    for row in rows:
        lines += ["|" + r.ljust(width) + "|" for r in row]
        lines.append(rule)
    return "".join(line + "\n" for line in lines)


def gi_profile(model: catalog.GpuModel, mig: inventory.MigDevice) -> catalog.MigProfile | None:
    """The GPU-instance profile a MIG device sits in (``1c.3g.40gb`` -> ``3g.40gb``)."""
    name = mig.profile.split(".", 1)[1] if mig.profile.split(".", 1)[0].endswith("c") else mig.profile
    return model.profile(name)


def _free(gpu: inventory.GpuInfo, profile: catalog.MigProfile) -> int:
    used = 0
    seen: set[int] = set()
    for mig in gpu.mig_devices:
        if mig.gi_id not in seen:
            seen.add(mig.gi_id)
            used |= ((1 << mig.placement_size) - 1) << mig.placement_start
    fits = 0
    for start in profile.starts:
        mask = ((1 << profile.memory_slices) - 1) << start
        if start + profile.memory_slices <= gpu.model.mig_memory_slices and not used & mask:
            used |= mask
            fits += 1
    existing = len({m.gi_id for m in gpu.mig_devices if gi_profile(gpu.model, m) == profile})
    return max(0, min(fits, profile.max_count - existing))


def profiles(gpus: Sequence[view.Gpu]) -> tuple[str, int]:
    """``mig -lgip``: every GPU-instance profile of every MIG-capable GPU, with free and total counts."""
    rows = []
    for gpu in gpus:
        for p in gpu.model.mig_profiles:
            e = inventory.profile_engines(gpu.model, p)
            rows.append((f"{gpu.index:>4}  {'MIG ' + p.name:<18}{p.profile_id:>4}     "
                         f"{f'{_free(gpu.info, p)}/{p.max_count}':<11}{p.memory_mib / 1024:<11.2f}"
                         f"No     {p.multiprocessors:<7}{e.decoder:<6}{e.encoder:<4}",
                         f"{'':62}{e.copy:>2}     {e.jpeg:<6}{e.ofa:<4}"))
    if not rows:  # no MIG-capable GPU: unconfirmed, no such GPU was recorded
        return "No devices were found\n", 6
    title = (" GPU instance profiles:",
             " GPU   Name               ID    Instances   Memory     P2P    SM    DEC   ENC  ",
             "                                Free/Total   GiB              CE    JPEG  OFA  ")
    return _box(79, title, rows), 0


def placements(gpus: Sequence[view.Gpu]) -> tuple[str, int]:
    """``mig -lgipp``: each profile's possible placements, ``{starts}:size``."""
    lines = []
    for gpu in gpus:
        for p in gpu.model.mig_profiles:
            plural = "s" if len(p.starts) > 1 else " "
            starts = ",".join(str(s) for s in p.starts)
            where = f"{{{starts}}}:{p.memory_slices}"
            lines.append(f"GPU {gpu.index:>2} Profile ID {p.profile_id:>2} Placement{plural}: {where}")
    if not lines:
        return "No devices were found\n", 6
    return "".join(line + "\n" for line in lines), 0


def _instances(gpu: view.Gpu) -> list[tuple[catalog.MigProfile, list[inventory.MigDevice]]]:
    """The container's GPU instances, each with its visible compute instances, in the real tool's order."""
    by_gi: dict[int, list[inventory.MigDevice]] = {}
    for mig in gpu.mig_devices:
        by_gi.setdefault(mig.gi_id, []).append(mig)
    order = {p.name: i for i, p in enumerate(gpu.model.mig_profiles)}
    found = []
    for gi_id, migs in by_gi.items():
        profile = gi_profile(gpu.model, migs[0])
        if profile is not None:
            found.append((profile, sorted(migs, key=lambda m: m.ci_id)))
    return sorted(found, key=lambda item: (order[item[0].name], item[1][0].gi_id))


def gpu_instances(gpus: Sequence[view.Gpu]) -> tuple[str, int]:
    """``mig -lgi``."""
    migs = [g for g in gpus if g.info.mig_enabled]
    if not migs:
        return NO_MIG, 0
    rows = [(f"{g.index:>4}  {'MIG ' + p.name:<20}{p.profile_id:>4}{cis[0].gi_id:>9}"
             f"{f'{cis[0].placement_start}:{cis[0].placement_size}':>13}",)
            for g in migs for p, cis in _instances(g)]  # fmt: skip
    if not rows:
        return NO_GI, 6
    title = (" GPU instances:", " GPU   Name               Profile  Instance   Placement  ",
             "                            ID       ID       Start:Size ")
    return _box(57, title, rows), 0


def compute_instances(gpus: Sequence[view.Gpu]) -> tuple[str, int]:
    """``mig -lci``: placements are in compute slices of the GPU instance (a full one is ``0:<slices>``)."""
    migs = [g for g in gpus if g.info.mig_enabled]
    if not migs:
        return NO_MIG, 0
    rows = []
    for g in migs:
        for _, cis in _instances(g):
            for ci in cis:
                slices = ci.ci_slices
                place = f"{ci.ci_id * slices}:{slices}"
                rows.append((f"{g.index:>4}{ci.gi_id:>7}       {'MIG ' + ci.profile:<18}"
                             f"{_CI_PROFILE_IDS.get(slices, 0):>4}{ci.ci_id:>10}{place:>13}",))
    if not rows:
        return NO_CI, 6
    title = (" Compute instances:", " GPU     GPU       Name             Profile   Instance   Placement  ",
             "       Instance                       ID        ID       Start:Size ",
             "         ID                                                         ")
    return _box(68, title, rows), 0
