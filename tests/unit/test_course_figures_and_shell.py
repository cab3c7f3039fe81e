"""The course's pictures are computed from project data, and the notebook shell helper reports outcomes honestly."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cluster import errors
from cluster.gpu import catalog, mig
from labs import figures, shell


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


def test_allocation_example_matches_the_worked_numbers() -> None:
    """16 GPUs at 95 %, 12 at 15 %, 8 at 5 %: 36 held, about 48 % effective utilisation."""
    assert sum(w.gpus for w in figures.EXAMPLE_FLEET) == 36
    assert round(figures.effective_utilisation(figures.EXAMPLE_FLEET), 3) == 0.483
    assert figures.effective_utilisation([]) == 0.0


@pytest.mark.parametrize("draw", [figures.driver_to_pod, figures.sharing_spectrum, figures.mig_layout,
                                  figures.allocation_vs_utilisation])  # fmt: skip
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
