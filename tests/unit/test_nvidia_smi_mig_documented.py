"""MIG outputs of the simulated nvidia-smi against published driver-580 outputs (the recorded GPUs were not in MIG).

Sources (``tests/fixtures/nvidia-smi/docs``, see its README): NVIDIA's MIG user guide v580 for an H100 in MIG mode
(summary table with two 3g.40gb, and ``-L`` with compute instances), and a 580.126.09 transcript of an A100-SXM4-40GB
for ``mig -lgi``, ``mig -lci`` and ``-L``. Each case rebuilds the documented GPU (UUIDs, GPU and compute instance ids,
placements) and must print the same text; only memory in use, temperature and power are blanked.
"""

from __future__ import annotations

import dataclasses

import nvidia_smi_factories as f
import pytest

from cluster.gpu import catalog, inventory
from cluster.gpu.nvidia_smi import board, cli, view

pytestmark = pytest.mark.unit

DOCS = f.FIXTURES / "docs"


def mig(model: catalog.GpuModel, profile: str, uuid: str, gi: int, ci: int, start: int) -> inventory.MigDevice:
    """A MIG device as NVML describes it; ``profile`` may name a compute instance (``1c.3g.40gb``)."""
    gi_name = profile.split(".", 1)[1] if profile.split(".")[0].endswith("c") else profile
    p = model.profile(gi_name)
    assert p is not None, gi_name
    return inventory.MigDevice(profile, uuid, gi, ci, start, p.memory_slices, p.memory_mib, p.multiprocessors,
                               inventory.profile_engines(model, p))  # fmt: skip


def mig_host(model_key: str, gpu_uuid: str, devices: list[inventory.MigDevice], *, bus: str = "00000000:00:04.0",
             driver: str = "580.126.09", persistence: bool = True) -> view.Host:
    model = catalog.MODELS[model_key]
    inv = inventory.simulated_inventory("doc", model, 1, driver_version=driver)
    gpu = dataclasses.replace(inv.gpus[0], uuid=gpu_uuid, mig_enabled=True, mig_pending=True,
                              mig_devices=tuple(devices))
    return view.Host(dataclasses.replace(inv, gpus=(gpu,)), board.Board((bus,), persistence=persistence))


def a100_blog_host() -> view.Host:
    """ssup2's A100-SXM4-40GB: GI 2 4g.20gb at 0:4, GI 3 2g.10gb at 4:2 split into two 1c CIs, GI 9 1g.5gb at 6:1."""
    m = catalog.MODELS["A100-SXM4-40GB"]
    return mig_host("A100-SXM4-40GB", "GPU-9e4aeb94-01c0-5173-4811-4ca60f77b3a9", [
        mig(m, "4g.20gb", "MIG-c42101f0-a1fa-5b68-8908-7c5c887f28bd", 2, 0, 0),
        mig(m, "1c.2g.10gb", "MIG-8970491e-16e0-5140-9f8f-d561baa3c186", 3, 0, 4),
        mig(m, "1c.2g.10gb", "MIG-239565ce-30e3-52d7-8197-5630d3ce21fa", 3, 1, 4),
        mig(m, "1g.5gb", "MIG-20301a31-77fa-59ec-b0b8-7ef543821f29", 9, 0, 6),
    ])  # fmt: skip


@pytest.mark.parametrize(("args", "doc"), [(["mig", "-lgi"], "ssup2-580.126.09-a100-40gb-lgi.txt"),
                                           (["mig", "-lci"], "ssup2-580.126.09-a100-40gb-lci.txt"),
                                           (["-L"], "ssup2-580.126.09-a100-40gb-L.txt")])  # fmt: skip
def test_a100_listings_match_the_580_transcript(args: list[str], doc: str) -> None:
    """GPU instances by profile then id, compute instances under them, -L numbering by GI then CI: exactly."""
    result = cli.run(view.whole_node(a100_blog_host()), args, f.NOW)
    assert (result.exit_code, result.stdout) == (0, (DOCS / doc).read_text())


def test_h100_summary_in_mig_mode_matches_the_mig_guide() -> None:
    """An H100 with two 3g.40gb: GPU row (ECC On, N/A utilisation), MIG devices with BAR1 and engines."""
    m = catalog.MODELS["H100-80GB-HBM3"]
    host = mig_host("H100-80GB-HBM3", "GPU-00000000-0000-0000-0000-000000000000", [
        mig(m, "3g.40gb", "MIG-00000000-0000-0000-0000-000000000001", 1, 0, 4),
        mig(m, "3g.40gb", "MIG-00000000-0000-0000-0000-000000000002", 2, 0, 0),
    ], bus="00000000:42:00.0", driver="580.65.06", persistence=False)  # fmt: skip
    out = cli.run(view.whole_node(host), [], f.NOW).stdout.split("\n", 1)[1]  # the guide leaves out the clock line
    doc = (DOCS / "nvidia-mig-guide-v580-h100-3g40gb-x2.txt").read_text()
    assert f.normalise(out[: len(doc)]) == f.normalise(doc)
    assert out[len(doc):].startswith("\n+---") and "Processes:" in out[len(doc):]


def test_h100_listing_with_compute_instances_matches_the_mig_guide() -> None:
    """``-L`` names compute instances by their own profile (``1c.3g.40gb``) and numbers every MIG device."""
    m = catalog.MODELS["H100-80GB-HBM3"]
    host = mig_host("H100-80GB-HBM3", "GPU-c08d91cb-e324-655c-71ba-7570956445bc", [
        mig(m, "1c.3g.40gb", "MIG-c788539f-c1ea-5a36-8b4d-9b07d024b1bb", 1, 0, 0),
        mig(m, "1c.3g.40gb", "MIG-405bbda1-6b05-535f-9702-f95e8cd170ce", 1, 1, 0),
        mig(m, "1c.3g.40gb", "MIG-df7e5a27-eeea-51a0-9055-b36d5a552879", 1, 2, 0),
        mig(m, "1g.10gb", "MIG-b4b2228d-6933-5839-bc0e-41ab9edb61c6", 2, 0, 4),
        mig(m, "1g.10gb", "MIG-c71dc464-b9f9-5611-9d29-d601a47cffd6", 3, 0, 5),
    ])  # fmt: skip
    doc = (DOCS / "nvidia-mig-guide-v580-h100-L-r570.txt").read_text()
    assert cli.run(view.whole_node(host), ["-L"], f.NOW).stdout == doc


@pytest.mark.xfail(strict=True, reason="catalog: A100-SXM4-40GB MIG memory is go-nvml mock b72647c's (9856/19968/40192 "
                   "MiB); driver 580 prints 9.75/19.62/39.38 GiB for 1g.10gb/2g.10gb, 3g/4g.20gb, 7g.40gb")
def test_a100_profiles_match_the_580_transcript() -> None:
    """``mig -lgip`` on the transcript's A100 once all of it is taken: layout, SMs, engines and memory."""
    result = cli.run(view.whole_node(a100_blog_host()), ["mig", "-lgip"], f.NOW)
    assert result.stdout == (DOCS / "ssup2-580.126.09-a100-40gb-lgip.txt").read_text()


def test_a100_profiles_match_the_580_transcript_but_for_memory() -> None:
    """The same table with the memory column set aside: everything else already agrees."""
    result = cli.run(view.whole_node(a100_blog_host()), ["mig", "-lgip"], f.NOW)
    doc = (DOCS / "ssup2-580.126.09-a100-40gb-lgip.txt").read_text()
    assert [line[:45] + line[56:] for line in result.stdout.splitlines()] == [line[:45] + line[56:]
                                                                              for line in doc.splitlines()]  # fmt: skip


def test_lgip_free_counts_follow_the_free_slices() -> None:
    """After 4g.20gb at 0:4, 2g.10gb at 4:2 and 1g.5gb at 6:1 nothing fits; the transcript shows 0/7, 0/1, ... 0/1."""
    out = cli.run(view.whole_node(a100_blog_host()), ["mig", "-lgip"], f.NOW).stdout
    counts = [line.split()[5] for line in out.splitlines() if "MIG " in line]
    assert counts == ["0/7", "0/1", "0/4", "0/3", "0/2", "0/1", "0/1"]
    m = catalog.MODELS["A100-SXM4-40GB"]
    half = mig_host("A100-SXM4-40GB", "GPU-1", [mig(m, "4g.20gb", "MIG-1", 2, 0, 0)])
    out = cli.run(view.whole_node(half), ["mig", "-lgip"], f.NOW).stdout
    assert [line.split()[5] for line in out.splitlines() if "MIG " in line] == ["3/7", "1/1", "2/4", "1/3", "1/2",
                                                                                "0/1", "0/1"]  # fmt: skip
