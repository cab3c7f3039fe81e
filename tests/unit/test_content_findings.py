"""Statements the course once got wrong for the versions it teaches (issue 28) stay right.

Each test reads the learner-facing text (notebook cells without their saved outputs, lab definitions with their
instructions, hints and messages, quiz banks, docs, the outcomes file) and fails when a corrected statement
comes back or its correction goes missing. Saved outputs are left out: they are regenerated from the cells.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@cache
def cells(notebook: str) -> tuple[str, ...]:
    """The sources of a course notebook's cells, whitespace folded, by index."""
    nb = json.loads((ROOT / "course" / notebook).read_text(encoding="utf-8"))
    return tuple(_flat("".join(c["source"])) for c in nb["cells"])


@cache
def corpus() -> dict[str, str]:
    """Every learner-facing text by path (notebook cells without outputs), whitespace folded."""
    out: dict[str, str] = {}
    for nb in sorted((ROOT / "course").glob("*.ipynb")):
        out[str(nb.relative_to(ROOT))] = " ".join(cells(nb.name))
    paths = [*(ROOT / "labs").glob("*/lab.yaml"), *(ROOT / "labs").glob("*/starter/*"),
             *(ROOT / "quizzes" / "banks").glob("*.yaml"), *(ROOT / "docs").glob("*.md"),
             ROOT / "course" / "outcomes.yaml"]
    for path in sorted(paths):
        if path.is_file():
            out[str(path.relative_to(ROOT))] = _flat(path.read_text(encoding="utf-8"))
    return out


def cell_with(notebook: str, heading: str) -> str:
    """The one cell of a notebook whose source contains ``heading`` (cells move; their headings stay)."""
    found = [c for c in cells(notebook) if heading in c]
    assert len(found) == 1, f"{notebook}: {len(found)} cells contain {heading!r}"
    return found[0]


def where(pattern: str) -> list[str]:
    rx = re.compile(pattern, re.IGNORECASE)
    return [path for path, text in corpus().items() if rx.search(text)]


def test_the_corpus_is_read() -> None:
    assert len([p for p in corpus() if p.endswith(".ipynb")]) >= 9
    assert "labs/03b-topology-manager/lab.yaml" in corpus() and "quizzes/banks/mig.yaml" in corpus()


def test_1_topology_manager_aligns_devices_for_every_qos_class() -> None:
    """Finding 1: alignment needs neither the static CPU manager nor a Guaranteed pod, except for CPUs (lab 03b
    grades BestEffort pods as aligned)."""
    assert where(r"alignment also needs the static CPU manager") == []
    module = " ".join(cells("03-scheduling.ipynb"))
    assert "aligns pods of every QoS class" in module and "BestEffort" in module
    assert "kubernetes.io/docs/tasks/administer-cluster/topology-manager" in module


def test_2_3_the_mig_manager_generates_its_config_when_no_configmap_is_named() -> None:
    """Findings 2 and 3: since MIG manager v0.14 an empty ``migManager.config.name`` (the chart's default since
    v24.9) makes the manager generate its layouts; default-mig-parted-config is only a fallback."""
    wrong = [r"reads one mig-parted file, by default the operator's ConfigMap",
             r"ConfigMap `default-mig-parted-config` defines named layouts",
             r"name: default-mig-parted-config, default: all-disabled",
             r"the layout is defined in the operator's ConfigMap",
             r"reads only the ConfigMap the ClusterPolicy names\. Point"]
    for pattern in wrong:
        assert where(pattern) == [], pattern
    for path in ("course/04b-mig.ipynb", "labs/04f-mig-parted/lab.yaml", "docs/gpu-stack.md"):
        assert re.search(r"v0\.14", corpus()[path]) and "fallback" in corpus()[path], path
    assert "name only when set" in corpus()["docs/gpu-stack.md"] or \
        "renders `name` only when set" in corpus()["docs/gpu-stack.md"]


def test_4_a_failed_mig_change_is_not_reported_in_node_events() -> None:
    """Finding 4: mig-parted records no Event; the reason is in the mig-manager pod's log and the state label."""
    assert where(r"(node|kubectl describe node)[^.]{0,40}events? (say|show|tell)s? why the MIG") == []
    module = cell_with("06-troubleshooting-operations.ipynb", "## 5. MIG state and advertised resources")
    assert "No event says why" in module and "nvidia-mig-manager" in module
    hint = corpus()["labs/07-capstone/lab.yaml"]
    assert "log (`kubectl logs -n gpu-operator -l app=nvidia-mig-manager --prefix`) says why" in hint


def test_5_a_plugin_that_never_registered_adds_no_gpu_resource() -> None:
    """Finding 5: failing the driver/toolkit gate leaves no nvidia.com/gpu at all; capacity without allocatable
    follows only a plugin that registered and stopped, for the kubelet's 5-minute grace period."""
    assert where(r"runs no device plugin and shows GPUs in capacity but none allocatable") == []
    key_points = cell_with("02-gpu-operator.ipynb", "The gate is the driver and toolkit validations")
    assert "neither in capacity nor in allocatable" in key_points and "5-minute grace period" in key_points


def test_6_the_device_plugin_need_not_run_privileged() -> None:
    """Finding 6: NVIDIA's reference DaemonSet (k8s-device-plugin v0.20.0) is unprivileged with a hostPath."""
    assert where(r"must mount `/var/lib/kubelet/device-plugins` from the host and run privileged") == []
    assert where(r"run the plugin privileged with the host path mounted") == []
    assert where(r"without the privileged mount of") == []
    assert "need not run privileged" in cell_with("01-gpu-fundamentals-device-plugins.ipynb", "## 2. Device plugins: discover, advertise, allocate")
    bank = corpus()["quizzes/banks/gpu-fundamentals.yaml"]
    assert re.search(r"fund-grpc-b.{0,3000}unprivileged", bank)


def test_7_the_570_driver_known_issue_names_its_range_symptom_and_fix() -> None:
    """Finding 7: drivers 570.124.06-570.158.01 (release notes 25.3.1/25.3.2), pods Pending, fixed in 570.172.08;
    the outcomes file no longer calls the row untaught."""
    row = cell_with("06-troubleshooting-operations.ipynb", "The usual suspects")
    assert "570.124.06 to 570.158.01" in row and "570.172.08" in row and "stay `Pending`" in row
    assert where(r"570-series drivers \(known issue in GPU Operator 26\.3\)") == []
    assert not re.search(r"570[^\n]{0,200}not taught|not taught[^\n]{0,200}570", corpus()["course/outcomes.yaml"])


def test_8_an_explicit_false_under_mps_needs_device_plugin_v0_20() -> None:
    """Finding 8: v0.15-v0.19 force failRequestsGreaterThanOne to true under MPS; v0.20.0 honours false."""
    assert where(r"`failRequestsGreaterThanOne` is on unless you turn it off") == []
    lab = corpus()["labs/04e-mps/lab.yaml"]
    assert "honoured only from device plugin v0.20.0" in lab and "v0.15 to v0.19 force it" in lab


def test_9_the_dra_node_label_is_gpulabs_convention() -> None:
    """Finding 9: ``nvidia.com/dra-driver.enabled`` is gpulab's switch; NVIDIA's chart selects nodes by affinity."""
    lab = corpus()["labs/07-capstone/lab.yaml"]
    assert "gpulab's own switch, not an NVIDIA one" in lab and "kubeletPlugin.affinity" in lab
    takeaways = cell_with("07-capstone.ipynb", "## 4. What to take away")
    assert "this lab cluster's convention" in takeaways and "kubeletPlugin.affinity" in takeaways
    assert "kubeletPlugin.affinity" in " ".join(cells("05-dra.ipynb"))


def test_smaller_slips_stay_fixed() -> None:
    """The smaller slips of issue 28, each at every place it appeared."""
    assert where(r"values only apply to a new installation") == []
    assert "helm upgrade" in corpus()["labs/02b-operator-values/lab.yaml"]
    assert where(r"\(plus `mig-devices` when enabled\), nothing else") == []
    assert "device-filter" in corpus()["labs/04f-mig-parted/lab.yaml"]
    assert where(r"leaves the plugin (pod )?in `ContainerCreating`") == []
    assert where(r"plugin pod stays `ContainerCreating` with a `FailedMount`") == []
    assert where(r"GPU Operator v24\.6\.0 and later") == []
    assert "GPU Operator v24.3.0 and later" in corpus()["course/04-time-slicing-and-mps.ipynb"]
    assert where(r"`mig\.capable`, `mig\.strategy`, `mig\.config\.state` \| MIG support and state") == []
    assert where(r"effective utilisation of about 48 % of what is held") == []
    assert "only 32 can be held" in cell_with("04-time-slicing-and-mps.ipynb", "## 1. Allocated is not busy")
    assert re.search(r"dra-versions-b.{0,1500}1\.34\.2", corpus()["quizzes/banks/dra.yaml"])
    assert re.search(r"share-migstrategy-b.{0,800}four A100", corpus()["quizzes/banks/mig.yaml"])


def test_the_course_states_its_versions_in_one_place_and_the_simulator_follows_them() -> None:
    """Module 00 names each taught version (``cluster.versions.TAUGHT``); the simulated operator runs the taught
    GPU Operator, the lab cluster the taught Kubernetes minor; the simulator's other-version behaviours are named
    where they are taught."""
    from cluster import versions
    from cluster.sim.gpu import manifests

    start = cell_with("00-start-here.ipynb", "## What is real and what is simulated")
    assert "The versions this course teaches" in start
    for component, version in versions.TAUGHT:
        assert f"| {component} | {version}" in start, component
    assert manifests.VERSION == versions.TAUGHT_GPU_OPERATOR and manifests.IMAGE.endswith(versions.TAUGHT_GPU_OPERATOR)
    assert versions.KUBERNETES_VERSION.startswith(f"v{versions.TAUGHT_KUBERNETES}.")
    assert f"(the lab cluster runs {versions.KUBERNETES_VERSION})" in start
    assert versions.GPU_OPERATOR_RELEASE in start and versions.GPU_OPERATOR_RELEASE in cell_with("02-gpu-operator.ipynb", "## 2. Installing it")
    assert versions.DEVICE_PLUGIN_VERSION in start


def test_no_lab_or_module_names_a_resource_slice_by_a_fixed_name() -> None:
    """A DRA driver's ResourceSlices get generated names (``<node>-gpu.nvidia.com-`` and a suffix), so text,
    code cells and lab checks find a node's slice by ``spec.nodeName``."""
    assert where(r"resourceslices?[ /][a-z0-9-]+-gpu\.nvidia\.com(?!-)") == []
    assert where(r"kind: ResourceSlice, name:") == []
