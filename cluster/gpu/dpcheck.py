"""Decode device-plugin configs with NVIDIA's own code (the ``dpcheck`` helper): the referee of our decoder.

``dpcheck`` is a small Go program (``cluster/gosrc/dpcheck``) built against ``github.com/NVIDIA/k8s-device-plugin``
at ``versions.DEVICE_PLUGIN_VERSION``. It loads each config through the plugin's ``api/config/v1``
(``sigs.k8s.io/yaml`` into ``v1.Config``), then drops the GFD flags, neutralises renaming and validates the
flags as ``cmd/nvidia-device-plugin`` does, and answers with the effective config, the line the plugin would log
when it refuses the config, its warnings and the keys it dropped. ``cluster.gpu.device_plugin_config`` stays the
runtime path; this module lets tests and the linter compare the two. One process checks a whole batch. When the
binary is missing this module raises ``BinariesUnavailable``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster import errors, gobuild, settings, versions
from cluster.gpu import cel

NAME = "dpcheck"
MODULE_VERSION = versions.DEVICE_PLUGIN_VERSION


@dataclass(frozen=True)
class Verdict:
    ok: bool
    error: str  # the line the plugin logs before exiting, e.g. "error starting plugins: unable to load config: ..."
    config: Mapping[str, Any]  # the effective config (after DisableResourceNamingInConfig) when ok
    warnings: tuple[str, ...]
    dropped: tuple[str, ...]  # input keys no decoder read, e.g. "sharing.timeSlicing.resources[0].replica"

    def replicated(self, strategy: str) -> tuple[tuple[str, int, str], ...]:
        """``(name, replicas, rename)`` of ``sharing.timeSlicing`` or ``sharing.mps``; empty when unset."""
        block = self.config.get("sharing", {}).get(strategy) or {}
        return tuple((str(r.get("name", "")), int(r.get("replicas", 0)), str(r.get("rename", "")))
                     for r in block.get("resources") or [])


def binary_name() -> str:
    return gobuild.standalone_binary_name(NAME)


def candidates() -> list[Path]:
    """Where ``dpcheck`` is looked for, in order."""
    out: list[Path] = []
    given = settings.current()
    if given.dpcheck:
        out.append(given.dpcheck)
    if given.bin_dir:
        out.append(given.bin_dir / binary_name())
    cache = settings.cache_root()
    out.extend(sorted((cache / "bin").glob(f"*/{binary_name()}")))
    out.append(cache / "build" / binary_name() / "bin" / binary_name())
    return out


def find_binary() -> Path | None:
    return cel.first_executable(candidates())


def check(
    items: Sequence[tuple[str, Sequence[str]]], *, binary: Path | None = None, timeout: float = 60.0
) -> list[Verdict]:
    """Decode each ``(config text, extra plugin flags)``; verdicts come back in the same order.

    Raises ``BinariesUnavailable`` when no binary is found and ``CommandFailed`` when it crashes, times out or
    answers out of step.
    """
    if not items:
        return []
    path = binary or find_binary()
    if path is None:
        raise errors.BinariesUnavailable(
            f"NVIDIA's device-plugin config decoder ({binary_name()}) is not installed",
            hint="run `gpulab binaries ensure` (needs Go and the Go module proxy)",
        )
    lines = "".join(json.dumps({"id": str(i), "text": text, "args": list(args)}) + "\n"
                    for i, (text, args) in enumerate(items))
    cmd = [str(path)]
    stdout = cel.run_helper(path, lines, timeout)
    verdicts: dict[int, Verdict] = {}
    for line in stdout.splitlines():
        try:
            raw = json.loads(line)
            verdicts[int(raw["id"])] = Verdict(
                ok=bool(raw["ok"]), error=str(raw.get("error", "")), config=dict(raw.get("config") or {}),
                warnings=tuple(str(w) for w in raw.get("warnings") or ()),
                dropped=tuple(str(d) for d in raw.get("dropped") or ()),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise errors.CommandFailed(cmd, 0, f"unexpected output line: {line[:200]!r}") from exc
    if sorted(verdicts) != list(range(len(items))):
        raise errors.CommandFailed(cmd, 0, f"expected {len(items)} answers, got {len(verdicts)}")
    return [verdicts[i] for i in range(len(items))]
