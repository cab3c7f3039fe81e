"""The course's pictures are computed from project data, and the notebook shell helper reports outcomes honestly."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cluster import errors, fleet
from cluster.gpu import catalog, cel, mig
from cluster.sim import nodes
from cluster.sim.gpu import dra, names, operands
from labs import figures, figures_dra, figures_operator, figures_topology, shell
from prerequisites import require


def test_sharing_spectrum_counts_units_with_the_device_plugin_rules() -> None:
    """One A100: whole 1, MIG all-1g.10gb 7, MIG + 4 time-sliced replicas 28, time-slicing 4, MPS 4."""
    units = {o.name: (o.units, o.resource) for o in figures.sharing_options("A100-SXM4-80GB", replicas=4)}
    assert units == {
        "whole GPU": (1, "nvidia.com/gpu"),
        "MIG": (7, "nvidia.com/mig-1g.10gb"),
        "MIG + time-slicing": (28, "nvidia.com/mig-1g.10gb"),
        "time-slicing": (4, "nvidia.com/gpu"),
        "MPS": (4, "nvidia.com/gpu"),
    }


def test_a_gpu_without_mig_offers_no_mig_options() -> None:
    assert [o.name for o in figures.sharing_options("T4", replicas=8)] == ["whole GPU", "time-slicing", "MPS"]
    assert [o.units for o in figures.sharing_options("T4", replicas=8)] == [1, 8, 8]


def test_mig_layout_draws_the_placements_mig_fit_computes() -> None:
    """all-balanced on an 80 GB A100 puts 3g@4, 2g@0, 1g@2, 1g@3 (reference section 4)."""
    model = catalog.lookup("A100-SXM4-80GB")
    assert model is not None
    wanted = catalog.default_mig_configs(model)["all-balanced"] or {}
    placed = {(p.profile, p.start) for p in mig.fit(model, wanted).placements}
    assert placed == {("3g.40gb", 4), ("2g.20gb", 0), ("1g.10gb", 2), ("1g.10gb", 3)}
    fig = figures.mig_layout("A100-SXM4-80GB", "all-balanced")
    bottom = fig.axes[1]
    labels = sorted(t.get_text() for t in bottom.texts)
    assert labels == ["1g.10gb\n@2", "1g.10gb\n@3", "2g.20gb\n@0", "3g.40gb\n@4"]


def test_a_layout_that_does_not_fit_says_why_in_the_title() -> None:
    fig = figures.mig_layout("A100-SXM4-80GB", {"3g.40gb": 2, "1g.10gb": 1})
    assert "does not fit" in fig.axes[1].get_title()
    assert not fig.axes[1].texts


def test_bad_figure_inputs_are_clear_errors() -> None:
    with pytest.raises(errors.ConfigError, match="unknown GPU model"):
        figures.mig_layout("B9000")
    with pytest.raises(errors.ConfigError, match="not MIG capable"):
        figures.mig_layout("T4")
    with pytest.raises(errors.ConfigError, match="not a default mig-parted config"):
        figures.mig_layout("A100-SXM4-80GB", "all-3g.99gb")


def test_tables_left_align_text_and_right_align_numbers() -> None:
    html = figures.mig_profiles("A100-SXM4-80GB")._repr_html_()
    assert "<td style='text-align:left'>1g.10gb</td>" in html
    assert "<td style='text-align:right'>1/7</td>" in html and "<td style='text-align:right'>9.5 GiB</td>" in html
    assert "<td style='text-align:left'>nvidia.com/mig-1g.10gb</td>" in html
    assert "<th style='text-align:left'>profile</th>" in html and "<th style='text-align:right'>SMs</th>" in html


def test_allocation_example_matches_the_worked_numbers() -> None:
    """16 GPUs at 95 %, 12 at 15 %, 8 at 5 %: 36 held, about 48 % effective utilisation."""
    assert sum(w.gpus for w in figures.EXAMPLE_FLEET) == 36
    assert round(figures.effective_utilisation(figures.EXAMPLE_FLEET), 3) == 0.483
    assert figures.effective_utilisation([]) == 0.0


@pytest.mark.parametrize("draw", [figures.driver_to_pod, figures.sharing_spectrum, figures.mig_layout,
                                  figures.allocation_vs_utilisation, figures_operator.operator_chain,
                                  figures_topology.gpu_topology, figures_dra.claim_graph])  # fmt: skip
def test_every_figure_renders_as_png_for_ipython(draw: object) -> None:
    assert callable(draw)
    png = draw()._repr_png_()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_driver_to_pod_names_the_operator_operands() -> None:
    components = [s.component for s in figures.driver_to_pod_steps()]
    assert "nvidia-device-plugin-daemonset" in components and "nvidia-operator-validator" in components
    assert components.index("nvidia-driver-daemonset") < components.index("nvidia-device-plugin-daemonset")


def test_prometheus_text_is_parsed_with_quoted_labels() -> None:
    text = ('# HELP DCGM_FI_DEV_GPU_UTIL util\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n'
            'DCGM_FI_DEV_GPU_UTIL{gpu="0",modelName="NVIDIA A100-SXM4-80GB",pod="a, \\"b\\""} 35.0\n'
            'up 1\n')  # fmt: skip
    samples = shell.parse_prometheus(text)
    assert samples[0].metric == "DCGM_FI_DEV_GPU_UTIL" and samples[0].value == 35.0
    assert samples[0].labels == {"gpu": "0", "modelName": "NVIDIA A100-SXM4-80GB", "pod": 'a, "b"'}
    assert samples[1] == shell.Sample("up", {}, 1.0)


def test_a_command_that_ends_unlike_the_cell_said_raises_one_readable_error(capsys: pytest.CaptureFixture[str]) -> None:
    ok = shell._run([sys.executable, "-c", "print('hello')"], None, "success", quiet=False)
    assert ok.ok and capsys.readouterr().out == "hello\n"
    refused = shell._run([sys.executable, "-c", "import sys; sys.exit(3)"], None, "failure", quiet=True)
    assert refused.returncode == 3
    with pytest.raises(shell.UnexpectedOutcome) as caught:
        shell._run([sys.executable, "-c", "import sys; print('no'); sys.exit(1)"], None, "success", quiet=True)
    assert "expected the command to succeed" in str(caught.value)
    assert caught.value._render_traceback_()[0].count("\n") >= 1
    with pytest.raises(shell.UnexpectedOutcome, match="expected the command to fail"):
        shell._run([sys.executable, "-c", "pass"], None, "failure", quiet=True)
    with pytest.raises(errors.ConfigError, match="expect='maybe'"):
        shell._run([sys.executable, "-c", "pass"], None, "maybe", quiet=True)


def test_no_cluster_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPULAB_STATE_DIR", str(tmp_path))
    with pytest.raises(errors.ClusterError, match="no lab cluster kubeconfig"):
        shell.kubeconfig()


# --- module 02: operands and the validation chain --------------------------------------------------------------------


def _operand_pod(key: str, state: operands.OperandState, node: str = "a100-0") -> dict[str, object]:
    """An operand pod with the status the simulated stack writes for ``state``."""
    ds, ctr = names.OPERANDS[key]
    pod = {"metadata": {"name": f"{ds}-x", "uid": "u", "labels": {names.OPERAND_LABEL: ds}},
           "spec": {"nodeName": node, "containers": [{"name": ctr, "image": "i"}],
                    "initContainers": [{"name": n, "image": "i"} for n in operands.INIT_CONTAINERS[key]]}}
    pod["status"] = operands.pod_status(pod, None, state)
    return pod


def test_only_driver_and_toolkit_validations_gate_operands() -> None:
    """The device plugin waits for toolkit-ready and driver-ready; nothing waits for cuda-ready or plugin-ready
    (gpu-operator assets/state-device-plugin/0500_daemonset.yaml, reference section 9)."""
    ops = {o.key: o for o in figures_operator.operands("A100-SXM4-80GB")}
    assert set(ops["device-plugin"].waits_for) == {"toolkit-ready", "driver-ready"}
    assert ops["container-toolkit"].waits_for == ("driver-ready",)
    waited = {f for o in ops.values() for f in o.waits_for}
    assert waited == set(figures_operator.GATES) and not waited & {"cuda-ready", "plugin-ready"}
    assert "mig-manager" not in {o.key for o in figures_operator.operands("T4")}


def test_the_figure_agrees_with_the_simulated_operands_init_containers() -> None:
    for op in figures_operator.operands("A100-SXM4-80GB"):
        inits = operands.INIT_CONTAINERS[op.key]
        assert ("toolkit-ready" in op.waits_for) == ("toolkit-validation" in inits), op.key
        assert not {"cuda-validation", "plugin-validation"} & set(inits), op.key
    assert operands.INIT_CONTAINERS["operator-validator"] == tuple(s for s, _ in figures_operator.VALIDATIONS)


def test_live_pods_colour_a_failing_cuda_validation_and_leave_the_plugin_running() -> None:
    pods = [_operand_pod(k, operands.OperandState()) for k in names.OPERANDS if k != "operator-validator"]
    pods.append(_operand_pod("operator-validator", operands.OperandState(operands.INIT_CRASH, "cuda-validation",
                                                                         operands.CUDA)))  # fmt: skip
    states = figures_operator.validation_states(pods[-1])
    assert states == {"driver-validation": "ok", "toolkit-validation": "ok", "cuda-validation": "failing",
                      "plugin-validation": "waiting"}
    assert figures_operator.pod_state(pods[-1]) == ("failing", "Init:CrashLoopBackOff (cuda-validation)")
    fig = figures_operator.operator_chain(pods=pods, node="a100-0")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert any("Init:CrashLoopBackOff (cuda-validation)" in t for t in texts)
    assert texts.count("Running") == len(pods) - 1
    # A toolkit fault: the plugin pod waits in its toolkit-validation init container.
    waiting = _operand_pod("device-plugin", operands.OperandState(operands.INIT_WAIT, "toolkit-validation", "w"))
    assert figures_operator.pod_state(waiting) == ("waiting", "Init (toolkit-validation waiting)")
    other_node = figures_operator.operator_chain(pods=pods, node="h100-0")
    assert "no pod" in [t.get_text() for t in other_node.axes[0].texts]


# --- module 03: topology matrix and NUMA placement -----------------------------------------------------------------


def test_topology_matrix_of_an_eight_gpu_nvswitch_node() -> None:
    topo = figures_topology.from_fleet("h100-0", "starter")
    table = figures_topology.matrix(topo)
    assert table.columns[-2:] == ("CPU affinity", "NUMA affinity")
    assert {cell for row in table.rows for cell in row[1:9]} == {"X", "NV18"}
    assert [row[-1] for row in table.rows] == ["0"] * 4 + ["1"] * 4
    assert table.rows[0][-2] == "0-47" and table.rows[7][-2] == "48-95"
    assert figures_topology.matrix(figures_topology.from_fleet("a100-0")).rows[0][1:5] == ("X", "NV4", "NV4", "NV4")


def test_without_nvlink_pairs_cross_numa_over_sys() -> None:
    spec = {"apiVersion": "gpulab.dev/v1", "kind": "Fleet", "metadata": {"name": "pcie"},
            "spec": {"pools": [{"name": "l4", "count": 1, "cpu": "32", "memory": "128Gi",
                                "gpu": {"model": "L40S", "count": 4, "topology": {"numaNodes": 2}}}]}}
    topo = figures_topology.from_fleet("l4-0", fleet.parse(spec))
    assert [topo.link(0, j) for j in range(4)] == ["X", "NODE", "SYS", "SYS"]


def test_a_live_node_gives_the_same_topology_as_its_fleet_spec() -> None:
    fl = fleet.load("starter")
    pool = fl.pool_of("h100-0")
    assert pool is not None
    assert figures_topology.from_node(nodes.build_node(pool, "h100-0", 5)) == figures_topology.from_fleet("h100-0")
    cpu_pool = fl.pool_of("cpu-0")
    assert cpu_pool is not None
    with pytest.raises(errors.ConfigError, match="no simulated GPUs"):
        figures_topology.from_node(nodes.build_node(cpu_pool, "cpu-0", 0))


def test_topology_manager_verdicts_follow_the_narrowest_hint() -> None:
    """Four of eight GPUs fit one NUMA node; six span two, which single-numa-node rejects and restricted admits
    (the two-node hint is the narrowest possible, so it is preferred: devicemanager/topology_hints.go)."""
    topo = figures_topology.from_fleet("h100-0")
    four = figures_topology.align(topo, 4)
    assert four.chosen == (0, 1, 2, 3) and four.numa_nodes == (0,)
    assert all(not v.startswith("rejected") for _, v in four.verdicts)
    six = dict(figures_topology.align(topo, 6).verdicts)
    assert six["single-numa-node"] == "rejected: TopologyAffinityError"
    assert six["restricted"].startswith("admitted") and six["best-effort"].startswith("admitted")
    with pytest.raises(errors.ConfigError, match="does not fit"):
        figures_topology.align(topo, 9)
    with pytest.raises(errors.ConfigError, match="has no GPUs"):
        figures_topology.from_fleet("cpu-0")
    with pytest.raises(errors.ConfigError, match="no node 'h100-9'"):
        figures_topology.gpu_topology("h100-9")


# --- module 05: claim -> ResourceSlice -> allocated device ---------------------------------------------------------


def test_the_module_claim_is_predicted_on_the_first_two_hoppers_of_the_slice() -> None:
    require(cel.find_binary() is not None, "celcheck is not built (it evaluates the DRA selectors): run `gpulab binaries ensure`")
    rows = figures_dra.device_rows(figures_dra.TWO_HOPPERS, [figures_dra.fleet_slice("h100-0")],
                                   [*dra.device_classes(), figures_dra.HOPPER_CLASS])  # fmt: skip
    assert [(r.name, r.state) for r in rows[:3]] == [("gpu-0", "allocated"), ("gpu-1", "allocated"), ("gpu-2", "matches")]
    assert len(rows) == 8
    # An A100 node's devices are Ampere: the Hopper class matches none of them.
    a100 = figures_dra.device_rows(figures_dra.TWO_HOPPERS, [figures_dra.fleet_slice("a100-0")],
                                   [figures_dra.HOPPER_CLASS])  # fmt: skip
    assert {r.state for r in a100} == {"no match"}


def test_a_live_claim_shows_its_recorded_allocation_and_other_claims_devices_as_taken() -> None:
    require(cel.find_binary() is not None, "celcheck is not built (it evaluates the DRA selectors): run `gpulab binaries ensure`")
    slice_obj = figures_dra.fleet_slice("a100-0", mig_layout="all-balanced")
    small = [d["name"] for d in slice_obj["spec"]["devices"] if d["attributes"]["profile"]["string"] == "1g.10gb"]
    claim = {"metadata": {"name": "nb", "namespace": "lab"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                 "deviceClassName": "mig.nvidia.com",
                 "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}]}}]}},
             "status": {"allocation": {"devices": {"results": [
                 {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "a100-0", "device": small[3]}]}}}}
    rows = {r.name: r.state for r in figures_dra.device_rows(claim, [slice_obj], dra.device_classes(),
                                                             taken=[("gpu.nvidia.com", "a100-0", small[0])])}
    assert rows[small[3]] == "allocated" and rows[small[0]] == "taken" and rows[small[1]] == "matches"
    assert [n for n, s in rows.items() if s == "allocated"] == [small[3]]
    assert rows[next(n for n in rows if "3g40gb" in n)] == "no match"
    missing = dict(claim, status={})
    missing["spec"] = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu-large"}}]}}
    assert {r.state for r in figures_dra.device_rows(missing, [slice_obj], dra.device_classes())} == {"unknown"}
    fig = figures_dra.claim_graph(claim, [slice_obj], dra.device_classes())
    assert any("status.allocation.devices.results" in t.get_text() for t in fig.axes[0].texts)


def test_bad_dra_figure_inputs_are_clear_errors() -> None:
    with pytest.raises(errors.ConfigError, match="no GPU node 'cpu-0'"):
        figures_dra.fleet_slice("cpu-0")
    with pytest.raises(errors.ConfigError, match="not a default mig-parted config"):
        figures_dra.fleet_slice("a100-0", mig_layout="all-9g")
    with pytest.raises(errors.ConfigError, match="no spec.devices.requests"):
        figures_dra.claim_graph({"metadata": {"name": "x"}})
