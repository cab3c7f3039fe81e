"""The one exception hierarchy for gpulab's own failures.

A learner's mistake is never an exception: checks return findings. These classes are for things that stop
gpulab itself from working; every message says what failed, the likely cause and the next command to run.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["ApiError", "BackendUnavailable", "BinariesUnavailable", "ClusterError", "CommandFailed", "ConfigError",
           "Conflict", "CourseError", "NotFound"]


class CourseError(Exception):
    """Root of every error gpulab raises on purpose."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message}\n  next: {hint}")


class ConfigError(CourseError):
    """A spec or config file (fleet, lab, quiz bank, device-plugin config) is invalid.

    ``problems`` lists every problem found, each as ``path: message``.
    """

    def __init__(self, source: str, problems: Sequence[str], *, hint: str | None = None) -> None:
        self.source = source
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{source} is invalid ({len(self.problems)} problem(s)):\n{lines}", hint=hint)


class ClusterError(CourseError):
    """The lab cluster is missing, down, or answered with an error we did not expect."""


class ApiError(ClusterError):
    """The Kubernetes API answered with an error status."""

    def __init__(self, status: int, reason: str, message: str, *, method: str = "", path: str = "") -> None:
        self.status = status
        self.reason = reason
        self.api_message = message
        where = f" ({method} {path})" if method else ""
        super().__init__(f"API error {status} {reason}{where}: {message}")


class NotFound(ApiError):
    """HTTP 404 from the API server."""


class Conflict(ApiError):
    """HTTP 409 from the API server (already exists, or a stale resourceVersion)."""


class BackendUnavailable(CourseError):
    """No backend could be used; the message lists what was tried."""


class BinariesUnavailable(CourseError):
    """The control-plane binaries are missing and could not be downloaded or built."""


class CommandFailed(CourseError):
    """An external command exited non-zero."""

    def __init__(self, cmd: Sequence[str], returncode: int, output: str, *, hint: str | None = None) -> None:
        self.cmd = list(cmd)
        self.returncode = returncode
        self.output = output
        tail = "\n".join(output.strip().splitlines()[-15:])
        super().__init__(f"command failed with exit code {returncode}: {' '.join(self.cmd)}\n{tail}", hint=hint)
