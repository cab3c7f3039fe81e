"""What nvidia-smi in a pod shows: only the devices NVIDIA_VISIBLE_DEVICES names, numbered as NVML numbers them there.

Semantics from nvidia-container-toolkit: unset, empty or ``void`` injects nothing; ``none`` the tools but no device;
GPU UUIDs, MIG UUIDs, indexes and ``gpu:mig`` pairs select devices. A time-sliced replica carries its GPU's UUID and
sees the whole GPU. Also: the fleet's topology in ``topo -m``, and settings a container cannot or may not change.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from cluster import errors, fleet
from cluster.gpu import catalog, inventory
from cluster.gpu.nvidia_smi import _details as details
from cluster.gpu.nvidia_smi import board, cli, view

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 28, 9, 5, 1)
P = inventory.Placement


def make_host(model: str = "H100-80GB-HBM3", count: int = 4, *, layouts: dict[int, list[P]] | None = None,
              numa_nodes: int = 1, nvlink: bool = True, cpus: int = 64) -> view.Host:
    inv = inventory.simulated_inventory("gpu-node", catalog.MODELS[model], count, driver_version="580.95.05",
                                        layouts=layouts)  # fmt: skip
    return view.simulated_host(inv, cpus=cpus, numa_nodes=numa_nodes, nvlink=nvlink)


def smi(host: view.Host, visible: str, *args: str) -> cli.Result:
    v = view.container(host, visible)
    assert v is not None
    return cli.run(v, list(args), NOW)


def test_nothing_injected_without_the_variable() -> None:
    """Unset, empty and ``void``: the runtime injects no nvidia-smi at all; the exec layer answers for it."""
    host = make_host()
    assert [view.container(host, value) for value in (None, "", "void")] == [None, None, None]


def test_none_has_the_tools_but_no_device() -> None:
    result = smi(make_host(), "none")
    assert (result.exit_code, result.stdout) == (6, "No devices were found\n")
    assert smi(make_host(), "none", "--version").exit_code == 0


def test_a_gpu_uuid_shows_that_gpu_as_gpu_0() -> None:
    """The driver prints the driver version the inventory carries, and the container's own numbering."""
    host = make_host()
    third = host.inventory.gpus[2]
    listing = smi(host, third.uuid, "-L").stdout
    assert listing == f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {third.uuid})\n"
    table = smi(host, third.uuid).stdout
    assert "Driver Version: 580.95.05" in table
    assert f"|   0  NVIDIA H100 80GB HBM3          On  |   {host.board.bus_ids[2]}" in table


def test_time_sliced_replicas_see_the_whole_gpu() -> None:
    """Two replicas of one GPU carry the same UUID: both containers print the same GPU, all of its memory."""
    host = make_host(count=1)
    uuid = host.inventory.gpus[0].uuid
    first = smi(host, uuid, "--query-gpu=gpu_name,gpu_uuid,memory.total", "--format=csv,noheader")
    assert first.stdout == f"NVIDIA H100 80GB HBM3, {uuid}, 81559 MiB\n"
    assert smi(host, f"{uuid},{uuid}", "-L").stdout.count("GPU ") == 1


def test_gpus_are_renumbered_in_bus_order() -> None:
    host = make_host()
    g1, g3 = host.inventory.gpus[1], host.inventory.gpus[3]
    out = smi(host, f"{g3.uuid},{g1.uuid}", "--query-gpu=index,uuid,pci.bus_id", "--format=csv,noheader").stdout
    assert out == f"0, {g1.uuid}, {host.board.bus_ids[1]}\n1, {g3.uuid}, {host.board.bus_ids[3]}\n"
    assert smi(host, g1.uuid, "-i", "1", "-L").exit_code == 2  # -i with -L is refused, as recorded
    second = smi(host, f"{g3.uuid},{g1.uuid}", "-i", "1", "--query-gpu=uuid", "--format=csv,noheader")
    assert second.stdout == g3.uuid + "\n"


def test_a_mig_device_shows_its_parent_and_only_itself() -> None:
    """A MIG UUID (or its old MIG-GPU-<uuid>/<gi>/<ci> name) injects the parent GPU in MIG mode and that device."""
    host = make_host(count=1, layouts={0: [P("3g.40gb", 0, 4), P("2g.20gb", 4, 2), P("1g.10gb", 6, 1)]})
    gpu = host.inventory.gpus[0]
    second = view.ordered_mig_devices(gpu)[1]
    for name in (second.uuid, f"MIG-{gpu.uuid}/{second.gi_id}/{second.ci_id}", "0:1"):
        listing = smi(host, name, "-L").stdout
        assert listing == (f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {gpu.uuid})\n"
                           f"  MIG 2g.20gb     Device  0: (UUID: {second.uuid})\n")  # fmt: skip
    table = smi(host, second.uuid).stdout
    assert "|  0    2   0   0  |" in table and table.count("MiB /") == 3  # the GPU row, one MIG row and its BAR1
    lgi = smi(host, second.uuid, "mig", "-lgi").stdout
    assert "MIG 2g.20gb" in lgi and "MIG 3g.40gb" not in lgi
    assert smi(host, gpu.uuid, "mig", "-lgi").stdout.count("MIG ") == 3  # the whole GPU: every instance


def test_unknown_device_fails_like_the_container_runtime() -> None:
    with pytest.raises(errors.ConfigError, match="nvidia-container-cli: device error: GPU-nope: unknown device"):
        view.container(make_host(), "GPU-nope")


def test_topology_comes_from_the_fleet() -> None:
    """The starter fleet's 8-GPU H100 node is an NVSwitch board (NV18 everywhere, two NUMA nodes of 48 CPUs); a
    four-GPU A100 board without switches splits its 12 links over three peers (NV4)."""
    starter = fleet.load("starter")
    pools = {p.name: p for p in starter.pools}
    h100, a100 = pools["h100"].gpu, pools["a100"].gpu
    assert h100 is not None and a100 is not None
    host = make_host(h100.model.key, h100.count, numa_nodes=h100.topology.numa_nodes, nvlink=h100.topology.nvlink,
                     cpus=96)  # fmt: skip
    rows = smi(host, "all", "topo", "-m").stdout.splitlines()
    assert rows[1].split("\t") == ["GPU0", " X ", *["NV18"] * 7, "0-47", "0", "", "N/A"]
    assert rows[8].split("\t")[-4:] == ["48-95", "1", "", "N/A"]
    host = make_host(a100.model.key, a100.count, numa_nodes=2, nvlink=True)
    assert smi(host, "all", "topo", "-m").stdout.splitlines()[1].split("\t")[2:5] == ["NV4", "NV4", "NV4"]
    pcie = make_host(count=4, numa_nodes=2, nvlink=False)
    assert smi(pcie, "all", "topo", "-m").stdout.splitlines()[1].split("\t")[1:5] == [" X ", "NODE", "SYS", "SYS"]


def test_pcie_path_follows_the_bus_ids() -> None:
    """GPUs on one root bus (a VM's passed-through GPUs on bus 00, as recorded on two H200s) meet at its host bridge,
    PHB; GPUs on buses of their own (a bare-metal board) meet within the NUMA node, NODE."""
    model = catalog.MODELS["H200-141GB"]
    vm = board.Board(("00000000:00:06.0", "00000000:00:07.0"))
    metal = board.Board(board.simulated_bus_ids(2), numa_nodes=1)
    assert (vm.link(model, 0, 1), metal.link(model, 0, 1)) == ("PHB", "NODE")


def test_processes_of_other_namespaces_are_not_listed() -> None:
    """The MPS server runs in another pod: the panel has no rows (and no 'No running processes found')."""
    host = make_host(count=1)
    gpu = host.inventory.gpus[0]
    busy = inventory.Process(pid=4242, name="nvidia-cuda-mps-server", used_memory_mib=60)
    inv = host.inventory
    host = view.Host(type(inv)(inv.hostname, (type(gpu)(**{**gpu.__dict__, "processes": (busy,)}),),
                               inv.driver_version, inv.cuda_driver_version), host.board)  # fmt: skip
    table = smi(host, gpu.uuid).stdout
    assert "No running processes found" not in table and "4242" not in table
    assert table.endswith("|" + "=" * 89 + "|\n+" + "-" * 89 + "+\n")
    assert "60MiB /  81559MiB" in table


def test_changes_are_refused_and_unrendered_commands_say_so() -> None:
    host = make_host(count=1)
    uuid = host.inventory.gpus[0].uuid
    cgi = smi(host, uuid, "mig", "-cgi", "9", "-C")
    assert cgi.exit_code == cli.NOT_PERMITTED and "not supported here" in cgi.stdout
    for args in (["-pm", "1"], ["dmon"], ["-q", "-x"], ["-l", "1"], ["-h"]):
        result = smi(host, uuid, *args)
        assert (result.exit_code, result.stdout[:7]) == (cli.NOT_SIMULATED, "gpulab:"), args
    assert smi(host, uuid, "--bogus").exit_code == 255


def test_every_display_group_renders_for_every_model() -> None:
    """-q and each -d group work for models nobody recorded (their unknown figures print N/A) and in MIG mode."""
    for key in catalog.MODELS:
        host = make_host(key, 2, layouts={0: [P(catalog.MODELS[key].mig_profiles[0].name, 0, 1)]}
                         if catalog.MODELS[key].mig_capable else None)  # fmt: skip
        assert smi(host, "all", "-q").exit_code == 0
        for group in details.GROUPS:
            assert smi(host, "all", "-q", "-d", group).exit_code == 0, (key, group)
    t4 = smi(make_host("T4", 1, nvlink=False), "all", "-q", "-d", "CLOCK").stdout
    assert "        Graphics                                       : N/A" in t4
