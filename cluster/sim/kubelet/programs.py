"""What a command run with ``kubectl exec`` does inside a simulated container. Plain data: nothing here talks to a
cluster or a network.

A simulated container runs no image, so only a small set of programs exists in it:

* ``nvidia-smi`` (also as ``/usr/bin/nvidia-smi``), when nvidia-container-toolkit would have put it there: the
  container's ``NVIDIA_VISIBLE_DEVICES`` names devices or ``all`` or ``none`` (``cluster.gpu.nvidia_smi.view``).
  It prints what the real tool prints for the devices the container can see (``cluster.gpu.nvidia_smi.cli``).
* ``sh`` and ``bash`` reading their commands from the exec's input (``kubectl exec -it POD -- bash``, the loop
  is ``remotecommand.Session``'s), one line at a time as the scripts below;
* ``sh -c SCRIPT`` and ``bash -c SCRIPT`` (the images the course uses have both), where the script is a list of
  simple commands joined by ``;``, ``&&`` or ``||``, each being one of: ``nvidia-smi …``, ``echo …``, ``true``,
  ``false``, ``exit [N]``. A command the set lacks is the shell's "not found" (exit 127), as in an image without
  it. A script using anything else a shell would parse (pipes, redirections, variables, globs, subshells) gets
  the same message for its first word and runs nothing: output a real shell would have produced is never made up.

Any other program is missing from the image: the exec fails in the runtime (runc through containerd) before
anything runs, which the kubelet reports as an internal error, not an exit code (``Outcome.error``).
"""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from cluster.gpu.nvidia_smi import cli as smi_cli, view as smi_view

NVIDIA_SMI = ("nvidia-smi", "/usr/bin/nvidia-smi")
SHELLS = {"sh": "sh", "/bin/sh": "sh", "/usr/bin/sh": "sh", "bash": "bash", "/bin/bash": "bash",
          "/usr/bin/bash": "bash"}
_LIST_OPERATORS = (";", "&&", "||")
# nvidia-smi on a node whose driver is not loaded (the node's driver-missing or nouveau-bound fault): exit 9
NO_DRIVER = (b"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
             b"latest NVIDIA driver is installed and running.\n\n")
NO_DRIVER_EXIT = 9
_UNSUPPORTED_SHELL = set("|&;<>()$`\\\"'*?[]#~=%{}!\n")  # in a command's name
_EXPANSIONS = set("$`<>()*?[]{}~\n#")  # anywhere in a script: expansions, redirections, globs, subshells


@dataclass(frozen=True)
class Outcome:
    """What the exec produced: output, and either an exit code or the runtime's error (nothing ran)."""

    stdout: bytes = b""
    stderr: bytes = b""
    exit_code: int = 0
    error: str | None = None


def runtime_missing(argv0: str) -> str:
    """containerd's error (with runc) for an exec whose program is not in the image, as a real 1.36 node prints it
    (tests/fixtures/kubectl-exec, recorded on the kind backend: containerd 1.6.20); the exec id is random."""
    exec_id = secrets.token_hex(32)
    if "/" in argv0:
        why = f"exec: \"{argv0}\": stat {argv0}: no such file or directory"
    else:
        why = f"exec: \"{argv0}\": executable file not found in $PATH"
    return (f"failed to exec in container: failed to start exec \"{exec_id}\": OCI runtime exec failed: exec failed: "
            f"unable to start container process: {why}: unknown")


@dataclass(frozen=True)
class Container:
    """What a simulated container has: the view its ``nvidia-smi`` would show (None: no GPU tools injected), and
    whether the node's driver answers."""

    view: smi_view.View | None
    driver_ok: bool = True


def run(argv: Sequence[str], container: Container, now: datetime) -> Outcome:
    """Run ``argv`` in ``container``."""
    if not argv:
        return Outcome(error=runtime_missing(""))
    program = argv[0]
    if program in NVIDIA_SMI and container.view is not None:
        return nvidia_smi(container, list(argv[1:]), now)
    shell = SHELLS.get(program)
    if shell is not None:
        return _shell(shell, list(argv[1:]), container, now)
    return Outcome(error=runtime_missing(program))


def nvidia_smi(container: Container, args: list[str], now: datetime) -> Outcome:
    """``nvidia-smi ARGS`` in ``container``; a container without a view (no device the tool could reach) gets
    the tool's no-driver failure."""
    if container.view is None or not container.driver_ok:
        return Outcome(NO_DRIVER, exit_code=NO_DRIVER_EXIT)
    result = smi_cli.run(container.view, args, now)
    return Outcome(result.stdout.encode(), exit_code=result.exit_code)


def _not_found(shell: str, word: str, line: int = 1) -> bytes:
    """dash's and bash's words for a command that is not there (both exit 127); an interactive bash names no
    line."""
    if shell == "bash":
        return (f"bash: line {line}: {word}: command not found\n" if line else
                f"bash: {word}: command not found\n").encode()
    return f"sh: {line}: {word}: not found\n".encode()


def interactive(argv: Sequence[str]) -> str | None:
    """The shell an exec starts to read commands from its input (``-it … -- bash``), or None."""
    if argv and argv[0] in SHELLS and all(a in ("-i", "-l", "--login") for a in argv[1:]):
        return SHELLS[argv[0]]
    return None


def script(shell: str, text: str, container: Container, now: datetime, line: int = 1) -> tuple[Outcome, bool]:
    """One script (or one line read by an interactive shell: ``line`` is its number) and whether the shell stops
    there (``exit``)."""
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        return Outcome(stderr=f"{shell}: {line}: Syntax error: Unterminated quoted string\n".encode(), exit_code=2), False
    if not tokens:
        return Outcome(), False
    if set(text) & _EXPANSIONS:  # what the shell would expand or redirect: not pretended
        return Outcome(stderr=_not_found(shell, tokens[0], line), exit_code=127), False
    out, err = bytearray(), bytearray()
    code, op = 0, ";"
    command: list[str] = []
    for token in [*tokens, ";"]:
        if token not in _LIST_OPERATORS and not set(token) <= {"&", "|", ";"}:
            command.append(token)
            continue
        if token not in _LIST_OPERATORS:  # a pipe or a background job: not simulated
            return Outcome(bytes(out), bytes(err) + _not_found(shell, command[0] if command else token, line),
                           127), False
        if command and ((op == "&&" and code == 0) or (op == "||" and code != 0) or op == ";"):
            done, stop = _simple(shell, command, container, now, line)
            out += done.stdout
            err += done.stderr
            code = done.exit_code
            if stop:
                return Outcome(bytes(out), bytes(err), code), True
        command, op = [], token
    return Outcome(bytes(out), bytes(err), code), False


def _shell(shell: str, args: list[str], container: Container, now: datetime) -> Outcome:
    if all(a in ("-i", "-l", "--login") for a in args):
        return Outcome()  # a shell reading commands from an input it was not given: end of input at once
    if len(args) < 2 or args[0] != "-c":  # a script file: none is in a simulated container
        return Outcome(stderr=f"{shell}: 0: cannot open {args[0]}: No such file\n".encode() if shell == "sh" else
                       f"bash: {args[0]}: No such file or directory\n".encode(), exit_code=2 if shell == "sh" else 127)
    return script(shell, args[1], container, now)[0]


def _simple(shell: str, words: list[str], container: Container, now: datetime,
            line: int = 1) -> tuple[Outcome, bool]:
    """One simple command's outcome, and whether the shell stops after it (``exit``)."""
    name = words[0]
    if any(ch in _UNSUPPORTED_SHELL for ch in name):
        return Outcome(stderr=_not_found(shell, name, line), exit_code=127), False
    if name in NVIDIA_SMI and container.view is not None:
        return nvidia_smi(container, words[1:], now), False
    if name == "echo":
        return Outcome((" ".join(words[1:]) + "\n").encode()), False
    if name in ("true", "false"):
        return Outcome(exit_code=0 if name == "true" else 1), False
    if name == "exit":
        if len(words) > 1 and not words[1].isdigit():
            return Outcome(stderr=f"{shell}: {line}: exit: Illegal number: {words[1]}\n".encode(), exit_code=2), True
        return Outcome(exit_code=int(words[1]) & 0xFF if len(words) > 1 else 0), True
    return Outcome(stderr=_not_found(shell, name, line), exit_code=127), False
