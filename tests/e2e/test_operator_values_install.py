"""`gpulab gpu-operator install -f values.yaml --set ...` on the real control plane: the chart's values land in
the ClusterPolicy, the chart's plugin ConfigMap is created, and the nodes show the outcome (a time-sliced T4
through `devicePlugin.config`); an install with values over an installed operator is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster import errors
from cluster.gpu import helm_values
from cluster.sim.gpu import names, operator
from gpu_e2e import ext, labels, wait_for

pytestmark = pytest.mark.e2e

VALUES = """\
devicePlugin:
  config:
    create: true
    name: plugin-config
    default: shared-2
    data:
      shared-2: |-
        version: v1
        sharing:
          timeSlicing:
            resources:
            - name: nvidia.com/gpu
              replicas: 2
"""


def test_values_reach_the_cluster_policy_configmap_and_nodes(local_cluster, tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(VALUES)
    with local_cluster.client() as client:
        operator.uninstall(client)
        try:
            out = local_cluster.gpulab("gpu-operator", "install", "-f", str(values), "--set", "mig.strategy=mixed",
                                       "--set", "dcgmExporter.enabled=false")
            assert "ready" in out.stdout, out.stdout + out.stderr
            spec = client.get(f"{names.POLICY_PATH}/{names.POLICY_NAME}")["spec"]
            assert spec["devicePlugin"]["config"] == {"name": "plugin-config", "default": "shared-2"}
            assert spec["mig"]["strategy"] == "mixed" and spec["dcgmExporter"]["enabled"] is False
            cm = client.get(f"/api/v1/namespaces/{names.NAMESPACE}/configmaps/plugin-config")
            assert "replicas: 2" in cm["data"]["shared-2"]
            wait_for(lambda: ext(client, "t4-0").get("nvidia.com/gpu") == "2", 60, what="t4-0 time-sliced x2")
            wait_for(lambda: labels(client, "a100-0").get("nvidia.com/mig.strategy") == "mixed", 60,
                     what="a100-0 labelled with the mixed strategy")
            with pytest.raises(errors.ConfigError, match="already installed"):
                operator.install(client, values=helm_values.render({"gfd": {"enabled": False}}))
        finally:
            operator.uninstall(client)
            operator.install(client, wait=True, timeout=120)
