"""What the GPU stack knows about the cluster: informer caches of nodes, pods, operator ConfigMaps and the
ClusterPolicy, with a pods-by-node index. Shared by the stack's controllers in one process."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cluster.sim import informer
from cluster.sim.gpu import names, policy as policy_mod


class World:
    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.configmaps: dict[str, dict[str, str]] = {}
        self.policy_obj: dict[str, Any] | None = None
        self.policy: policy_mod.Policy | None = None
        self._by_node: dict[str, set[str]] = {}

    def set_policy(self, obj: dict[str, Any] | None) -> bool:
        """Store the ClusterPolicy; True when what the controllers act on changed."""
        old = self.policy
        self.policy_obj = obj
        self.policy = policy_mod.from_object(obj)
        return old != self.policy

    def put_pod(self, event: str, pod: dict[str, Any]) -> None:
        key = informer.key_of(pod)
        old = self.pods.get(key)
        if old is not None:
            self._by_node.get(old["spec"].get("nodeName", ""), set()).discard(key)
        if event == "DELETED":
            self.pods.pop(key, None)
            return
        self.pods[key] = pod
        node = pod["spec"].get("nodeName", "")
        if node:
            self._by_node.setdefault(node, set()).add(key)

    def pods_on(self, node: str) -> list[dict[str, Any]]:
        return [self.pods[k] for k in sorted(self._by_node.get(node, ())) if k in self.pods]

    def operator_pods_on(self, node: str) -> list[dict[str, Any]]:
        return [p for p in self.pods_on(node) if p["metadata"].get("namespace") == names.NAMESPACE]

    def mig_file(self) -> str | None:
        if self.policy is None:
            return None
        data: Mapping[str, str] | None = self.configmaps.get(self.policy.mig_config)
        return None if data is None else data.get(names.MIG_CONFIG_KEY)
