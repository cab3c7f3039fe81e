"""The kubelet-side admission seam of the pod agent.

A real kubelet can refuse a pod the scheduler already bound (a device plugin's Allocate fails, say): the pod
ends ``Failed`` with a reason and a message. Components plug in here with a hook; the pod agent asks every hook
before it starts a bound pod. Hooks are named by dotted path (``package.module:function``) so they can be
loaded in the agent's own process.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cluster import errors
from cluster.sim import checkpoint as checkpoint_mod


@dataclass(frozen=True)
class Decision:
    """A hook's answer: reject the pod, or admit it and record facts (e.g. allocated devices) on it."""

    rejected: bool = False
    reason: str = ""
    message: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)

    @staticmethod
    def reject(reason: str, message: str) -> Decision:
        return Decision(True, reason, message)


@dataclass(frozen=True)
class Context:
    """What a hook may look at: the node, the pods already admitted to it (from the agent's cache), and the
    kubelet's own record of the devices they hold (``checkpoint``: the only source a device decision may use;
    pods' annotations are writable by tenants)."""

    node: Mapping[str, Any]
    pods_on_node: Sequence[Mapping[str, Any]]
    client: Any = None  # the agent's AsyncClient, for hooks that must read other objects (DRA claims)
    checkpoint: checkpoint_mod.DeviceCheckpoint = field(default_factory=checkpoint_mod.DeviceCheckpoint)


Hook = Callable[[Mapping[str, Any], Context], Awaitable[Decision | None]]


def load_hooks(spec: str) -> list[Hook]:
    """Load hooks from a comma-separated list of ``module:function`` paths."""
    hooks: list[Hook] = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        module_name, _, func_name = item.partition(":")
        try:
            hook = getattr(importlib.import_module(module_name), func_name)
        except (ImportError, AttributeError) as exc:
            raise errors.ConfigError("admission hooks", [f"{item}: cannot load ({exc})"]) from exc
        hooks.append(hook)
    return hooks
