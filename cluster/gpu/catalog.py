"""The GPU model catalog: what NVML would say about each simulated GPU model, and its MIG geometry.

Facts come from ``shared/reference/gpu-semantics.md`` (sections 3, 4 and 8). Values the reference marks as
unconfirmed are marked here too. This module is plain data; it must not talk to a cluster or to NVML.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping


@dataclass(frozen=True)
class MigProfile:
    """One GPU-instance profile (C == G) of a MIG-capable model."""

    name: str  # e.g. "1g.10gb" or "1g.10gb+me"
    profile_id: int  # NVML GPU-instance profile id (nvidia-smi ID)
    compute_slices: int
    memory_slices: int
    max_count: int
    starts: tuple[int, ...]  # valid placement starts, in memory-slice units
    memory_mib: int
    multiprocessors: int

    @property
    def resource_suffix(self) -> str:
        """The profile as it appears in a resource name: ``+`` becomes ``.`` (``1g.5gb+me`` -> ``1g.5gb.me``)."""
        return self.name.replace("+", ".")

    @property
    def is_media_extension(self) -> bool:
        return "+me" in self.name


@dataclass(frozen=True)
class GpuModel:
    """A GPU model as NVML, GFD and the DRA driver describe it."""

    key: str  # catalog key used in fleet specs, e.g. "A100-SXM4-80GB"
    nvml_name: str  # nvmlDeviceGetName
    pci_device_id: int  # e.g. 0x20B2
    memory_mib: int  # total framebuffer in MiB, as GFD's gpu.memory label shows it
    compute_capability: tuple[int, int]
    multiprocessors: int
    architecture: str  # DRA attribute: "Ampere", "Hopper", ...
    brand: str  # DRA attribute: "Nvidia", "Tesla"
    mig_memory_slices: int = 0  # 0: not MIG capable
    mig_profiles: tuple[MigProfile, ...] = ()
    aliases: tuple[str, ...] = field(default=())

    @property
    def mig_capable(self) -> bool:
        return self.mig_memory_slices > 0

    @property
    def family(self) -> str:
        """GFD ``gpu.family`` from the compute-capability major (and minor for Ada)."""
        major, minor = self.compute_capability
        if major == 7 and minor >= 5:
            return "turing"
        if major == 7:
            return "volta"
        if major == 8 and minor == 9:
            return "ada-lovelace"
        if major == 8:
            return "ampere"
        if major == 9:
            return "hopper"
        if major in (10, 12):
            return "blackwell"
        return "undefined"

    @property
    def product_label(self) -> str:
        """GFD ``gpu.product``: chars outside ``[A-Za-z0-9-_. ]`` dropped, spaces become ``-``."""
        return sanitise_product(self.nvml_name)

    def profile(self, name: str) -> MigProfile | None:
        """Look a MIG profile up by name; ``1g.5gb.me`` and ``1g.5gb+me`` are the same profile."""
        wanted = name.replace(".me", "+me") if name.endswith(".me") else name
        for p in self.mig_profiles:
            if p.name == wanted:
                return p
        return None


def sanitise_product(name: str) -> str:
    kept = "".join(ch for ch in name if ch.isascii() and (ch.isalnum() or ch in "-_. "))
    return kept.replace(" ", "-")


def _eight_slice(names: tuple[str, str, str, str, str, str, str], mem: tuple[int, ...], sms: tuple[int, ...]) -> tuple[MigProfile, ...]:
    """The 8-memory-slice geometry shared by A100 and H100/H200 (reference section 4 placement table)."""
    one, one_me, one_two, two, three, four, seven = names
    return (
        MigProfile(one, 19, 1, 1, 7, (0, 1, 2, 3, 4, 5, 6), mem[0], sms[0]),
        MigProfile(one_me, 20, 1, 1, 1, (0, 1, 2, 3, 4, 5, 6), mem[0], sms[0]),
        MigProfile(one_two, 15, 1, 2, 4, (0, 2, 4, 6), mem[1], sms[1]),
        MigProfile(two, 14, 2, 2, 3, (0, 2, 4), mem[2], sms[2]),
        MigProfile(three, 9, 3, 4, 2, (0, 4), mem[3], sms[3]),
        MigProfile(four, 5, 4, 4, 1, (0,), mem[4], sms[4]),
        MigProfile(seven, 0, 7, 8, 1, (0,), mem[5], sms[5]),
    )


_MODELS: tuple[GpuModel, ...] = (
    GpuModel(
        key="A100-SXM4-40GB",
        nvml_name="NVIDIA A100-SXM4-40GB",
        pci_device_id=0x20B0,
        memory_mib=40960,
        compute_capability=(8, 0),
        multiprocessors=108,
        architecture="Ampere",
        brand="Nvidia",
        mig_memory_slices=8,
        # Real NVML values (reference section 4, NV commit b72647c).
        mig_profiles=_eight_slice(
            ("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
            (4864, 9856, 9856, 19968, 19968, 40192),
            (14, 14, 28, 42, 56, 98),
        ),
        aliases=("A100-40GB", "A100-SXM4-40G"),
    ),
    GpuModel(
        key="A100-SXM4-80GB",
        nvml_name="NVIDIA A100-SXM4-80GB",
        pci_device_id=0x20B2,
        memory_mib=81920,
        compute_capability=(8, 0),
        multiprocessors=108,
        architecture="Ampere",
        brand="Nvidia",
        mig_memory_slices=8,
        # Memory and SM figures for the 80GB card are unconfirmed in the reference (nvidia-smi -lgip as
        # commonly published: 9.50 / 19.50 / 19.50 / 39.25 / 39.25 / 79.25 GiB).
        mig_profiles=_eight_slice(
            ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
            (9728, 19968, 19968, 40192, 40192, 81152),
            (14, 14, 28, 42, 56, 98),
        ),
        aliases=("A100-80GB",),
    ),
    GpuModel(
        key="H100-80GB-HBM3",
        nvml_name="NVIDIA H100 80GB HBM3",
        pci_device_id=0x2330,
        memory_mib=81559,  # 85,520,809,984 bytes, read on real hardware (reference section 8)
        compute_capability=(9, 0),
        multiprocessors=132,
        architecture="Hopper",
        brand="Nvidia",
        mig_memory_slices=8,
        # Read on a real H100 (reference section 8).
        mig_profiles=_eight_slice(
            ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
            (9984, 20096, 20096, 40448, 40448, 81152),
            (16, 26, 32, 60, 64, 132),
        ),
        aliases=("H100-80GB", "H100-SXM5-80GB"),
    ),
    GpuModel(
        key="H200-141GB",
        nvml_name="NVIDIA H200",
        pci_device_id=0x2335,
        memory_mib=143771,  # 150,754,820,096 bytes, read on real hardware (reference section 8)
        compute_capability=(9, 0),
        multiprocessors=132,
        architecture="Hopper",
        brand="Nvidia",
        mig_memory_slices=8,
        mig_profiles=_eight_slice(
            ("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
            (16384, 33280, 33280, 71424, 71424, 143360),
            (16, 26, 32, 60, 64, 132),
        ),
        aliases=("H200",),
    ),
    GpuModel(
        key="A30-24GB",
        nvml_name="NVIDIA A30",
        pci_device_id=0x20B7,
        memory_mib=24576,
        compute_capability=(8, 0),
        multiprocessors=56,
        architecture="Ampere",
        brand="Nvidia",
        mig_memory_slices=4,
        # Placements from NV mock/gpus/a30.go; memory and SMs as nvidia-smi -lgip commonly shows (unconfirmed).
        mig_profiles=(
            MigProfile("1g.6gb", 14, 1, 1, 4, (0, 1, 2, 3), 5952, 14),
            MigProfile("1g.6gb+me", 21, 1, 1, 1, (0, 1, 2, 3), 5952, 14),
            MigProfile("2g.12gb", 5, 2, 2, 2, (0, 2), 12032, 28),
            MigProfile("2g.12gb+me", 6, 2, 2, 1, (0, 2), 12032, 28),
            MigProfile("4g.24gb", 0, 4, 4, 1, (0,), 24064, 56),
        ),
        aliases=("A30",),
    ),
    GpuModel(
        key="L40S",
        nvml_name="NVIDIA L40S",
        pci_device_id=0x26B9,
        memory_mib=46068,
        compute_capability=(8, 9),
        multiprocessors=142,
        architecture="Ada Lovelace",
        brand="Nvidia",
        aliases=("L40S-48GB",),
    ),
    GpuModel(
        key="T4",
        nvml_name="Tesla T4",
        pci_device_id=0x1EB8,
        memory_mib=15360,
        compute_capability=(7, 5),
        multiprocessors=40,
        architecture="Turing",
        brand="Tesla",
        aliases=("Tesla-T4",),
    ),
)

MODELS: Mapping[str, GpuModel] = MappingProxyType({m.key: m for m in _MODELS})
_BY_ALIAS: Mapping[str, GpuModel] = MappingProxyType(
    {name.lower(): m for m in _MODELS for name in (m.key, m.nvml_name, m.product_label, *m.aliases)}
)


def lookup(name: str) -> GpuModel | None:
    """Find a model by catalog key, alias, NVML name or GFD product label (case-insensitive)."""
    return _BY_ALIAS.get(name.lower())


def by_nvml_name(nvml_name: str) -> GpuModel | None:
    return _BY_ALIAS.get(nvml_name.lower())


def default_mig_configs(model: GpuModel) -> dict[str, dict[str, int] | None]:
    """The operator's default named MIG configs for a model.

    ``None`` means ``mig-enabled: false``; a dict maps profile names to counts (``{}`` is ``all-enabled``).
    Built the way mig-parted's generator does: one ``all-<profile>`` per profile at its maximum count
    (``+`` becomes ``.`` in the name; ``+me`` profiles at count 1), plus ``all-balanced``.
    """
    configs: dict[str, dict[str, int] | None] = {"all-disabled": None, "all-enabled": {}}
    for p in model.mig_profiles:
        configs[f"all-{p.resource_suffix}"] = {p.name: 1 if p.is_media_extension else p.max_count}
    plain = [p for p in model.mig_profiles if not p.is_media_extension]
    if model.mig_memory_slices == 8:
        smallest = plain[0]
        two = next(p for p in plain if p.compute_slices == 2)
        three = next(p for p in plain if p.compute_slices == 3)
        configs["all-balanced"] = {smallest.name: 2, two.name: 1, three.name: 1}
    elif model.mig_memory_slices == 4:
        smallest = plain[0]
        two = next(p for p in plain if p.compute_slices == 2)
        configs["all-balanced"] = {smallest.name: 2, two.name: 1}
    return configs
