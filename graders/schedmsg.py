"""Read the kube-scheduler's FailedScheduling message into counts per reason.

The format (``FitError.Error()`` in ``pkg/scheduler/framework/types.go``) is
``0/N nodes are available: <c> <reason>, <c> <reason>. <post-filter message>``, where the reasons are
sorted as plain strings and the post-filter part is usually ``preemption: 0/N nodes are available: ...``
(sometimes after a DRA sentence such as ``no new claims to deallocate,``). When a PreFilter plugin refused
the pod, the reasons part is one sentence without counts. Older releases printed the taint itself
(``node(s) had untolerated taint {nvidia.com/gpu: present}``), so braces are respected when splitting.
Parsing never raises; text in another shape gives None.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

_HEAD = re.compile(r"^\s*0/(\d+) nodes are available:\s*")
_COUNTED = re.compile(r"^(\d+) (\S.*)$", re.DOTALL)
PREEMPTION = "preemption: "

# The scheduler's reason phrases we explain (filter plugins, in the order the default profile runs them).
UNSCHEDULABLE = "node(s) were unschedulable"
NODE_NAME = "node(s) didn't match the requested node name"
TAINTS = "node(s) had untolerated taint(s)"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
TOO_MANY_PODS = "Too many pods"
INSUFFICIENT = "Insufficient "
DRA_CANNOT_ALLOCATE = "cannot allocate all claims"
DRA_NOT_ON_NODE = "resourceclaim not available on the node"


@dataclass(frozen=True)
class SchedulerMessage:
    """A parsed FailedScheduling message."""

    raw: str
    total: int
    reasons: tuple[tuple[str, int], ...]  # (reason, node count) in the message's order
    prefilter: str  # the one sentence when a PreFilter plugin refused the pod (then ``reasons`` is empty)
    postfilter: str  # everything after the reasons, as written
    preemption: SchedulerMessage | None

    @property
    def counts(self) -> Mapping[str, int]:
        return MappingProxyType(dict(self.reasons))

    def count(self, reason: str) -> int:
        return sum(c for r, c in self.reasons if r == reason or (reason.endswith("*") and r.startswith(reason[:-1])))


def parse(text: str) -> SchedulerMessage | None:
    """The parts of a FailedScheduling message, or None when ``text`` is not one."""
    if not isinstance(text, str) or len(text) > 64 * 1024:
        return None
    head = _HEAD.match(text)
    if head is None:
        return None
    rest = text[head.end():]
    end = _end_of_reasons(rest)
    body, post = rest[:end].strip(), rest[end + 1:].strip()
    items = _split(body)
    reasons: list[tuple[str, int]] = []
    prefilter = ""
    for item in items:
        counted = _COUNTED.match(item)
        if counted:
            reasons.append((counted.group(2).strip(), int(counted.group(1))))
        elif reasons:  # a reason that itself holds ", " (rare): glue it back on
            last, count = reasons.pop()
            reasons.append((f"{last}, {item}", count))
        else:
            prefilter = body
            reasons = []
            break
    preemption = None
    at = post.find(PREEMPTION)
    if at >= 0:
        preemption = parse(post[at + len(PREEMPTION):])
    return SchedulerMessage(text, int(head.group(1)), tuple(reasons), prefilter, post, preemption)


def _end_of_reasons(rest: str) -> int:
    """Index of the '.' that closes the reasons: the first '. ' outside braces, else the last '.'."""
    depth = 0
    for i, ch in enumerate(rest):
        if ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth = max(0, depth - 1)
        elif ch == "." and depth == 0 and (i + 1 == len(rest) or rest[i + 1] == " "):
            return i
    return len(rest)


def _split(body: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        if ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0 and body[i + 1:i + 2] == " ":
            items.append(body[start:i].strip())
            start = i + 2
    items.append(body[start:].strip())
    return [i for i in items if i]


def is_taint_reason(reason: str) -> bool:
    """The current phrase and the older one that printed the taint."""
    return reason == TAINTS or reason.startswith("node(s) had untolerated taint")
