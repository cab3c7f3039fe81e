"""The simulated NVIDIA GPU stack as labs and graders use it: one public module in front of ``cluster.sim``.

Labs install and remove the operator, inject faults, read the ClusterPolicy and restart operands; graders
rebuild what a node would advertise. They do it through these names only; ``cluster.sim`` is internal (an
import-linter contract forbids reaching into it from ``labs``, ``graders`` and ``quizzes``).
"""

from __future__ import annotations

from cluster.sim.gpu import names
from cluster.sim.gpu.dra import device_classes, resource_slice
from cluster.sim.gpu.hoststate import FAULT_KINDS, Hardware, faults
from cluster.sim.gpu.manifests import cluster_policy
from cluster.sim.gpu.migmanager import finished as mig_finished
from cluster.sim.gpu.nodeplan import operator_labels
from cluster.sim.gpu.operator import (RESTARTED_AT, OperatorStatus, dumps, install, policy_state, present,
                                      restart_daemonset, set_fault, status, uninstall)
from cluster.sim.gpu.policy import Policy
from cluster.sim.nodes import HARDWARE_ANNOTATION, build_node

__all__ = [
    "FAULT_KINDS", "HARDWARE_ANNOTATION", "Hardware", "OperatorStatus", "Policy", "RESTARTED_AT", "build_node",
    "cluster_policy", "device_classes", "dumps", "faults", "install", "mig_finished", "names", "operator_labels",
    "policy_state", "present", "resource_slice", "restart_daemonset", "set_fault", "status", "uninstall",
]
