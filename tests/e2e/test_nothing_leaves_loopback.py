"""Nothing a local cluster does sends a packet outside 127.0.0.0/8: not the API server calling a node's kubelet
(``kubectl logs``, ``kubectl exec``), not a DNS lookup, not any component or agent.

What proves it: ``loopback_probe.py`` runs in fresh network and mount namespaces whose only route off loopback leads
to one veth interface, with a raw socket on its peer that records every frame (DNS points there too). A packet to
any address outside loopback, from any process of the cluster, has no other way out, so it is caught; nothing can
reach the machine's network from there. The probe brings a cluster up, installs the GPU Operator, runs a pod and
reads logs (plain, followed, a GPU operand's), runs ``kubectl exec`` and ``gpulab status``, and tears down; the
test asserts that the catch is empty and that each step worked. It proves it for what the probe exercises, which
is what a lab does. Before nodes had loopback addresses, the API server looked a node's name up in DNS for
``kubectl logs``: the probe catches that lookup (UDP to the name server's port 53) and this test fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from prerequisites import require

PROBE = Path(__file__).with_name("loopback_probe.py")
pytestmark = pytest.mark.e2e


def test_nothing_leaves_loopback_while_a_lab_cluster_runs(tmp_path: Path) -> None:
    require(os.geteuid() == 0 and bool(shutil.which("unshare") and shutil.which("ip")),
            "needs root, unshare and ip (iproute2) to make a network namespace")
    report_file = tmp_path / "report.json"
    proc = subprocess.run(["unshare", "--net", "--mount", "--", sys.executable, str(PROBE), str(report_file)],
                          capture_output=True, text=True, timeout=600, cwd=Path(__file__).parents[2])
    assert report_file.exists(), f"the probe wrote no report ({proc.returncode}):\n{proc.stderr[-3000:]}"
    report = json.loads(report_file.read_text())
    require("skip" not in report, str(report.get("skip")))
    assert report["caught"] == [], f"packets left loopback: {report['caught']}"
    assert "error" not in report, report
    steps = report["steps"]
    assert steps["nodes"] == ["a100-0", "a100-1", "cpu-0", "h100-0", "l40s-0", "t4-0"]
    assert steps["logs"] == "hello from the probe\n"
    assert steps["follow"] == "hello from the probe\n"
    assert steps["plugin_logs"][0] == "Starting nvidia-device-plugin"
    assert steps["exec"] == "from exec\n"
    assert steps["nvidia_smi"] == 8  # h100-0's eight GPUs
    assert steps["status"] is True
