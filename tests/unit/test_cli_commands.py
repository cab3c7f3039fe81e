"""The CLI loads command modules lazily: its table of which module gives which command must match the modules."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import click

import labs.cli
from labs.cli import main as cli_main


def test_command_table_matches_what_each_module_registers() -> None:
    registered: dict[str, str] = {}
    for info in pkgutil.iter_modules(labs.cli.__path__):
        if info.name.startswith("cmd_"):
            group = click.Group()
            importlib.import_module(f"labs.cli.{info.name}").register(group)
            for name in group.commands:
                assert name not in registered, f"{name} registered by {registered[name]} and {info.name}"
                registered[name] = info.name
    assert cli_main.COMMAND_MODULES == registered


def test_help_lists_every_command() -> None:
    out = subprocess.run([sys.executable, "-m", "labs.cli.main", "--help"], capture_output=True, text=True, check=True)
    for name in cli_main.COMMAND_MODULES:
        assert f"  {name}" in out.stdout, name


def test_cluster_commands_do_not_load_graders_quizzes_or_the_bench() -> None:
    code = ("import sys; from labs.cli import main; main.cli.get_command(None, 'up'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('graders', 'quizzes') "
            "or m.startswith('labs.bench') or m == 'aiohttp'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_version_names_the_pinned_control_plane() -> None:
    """`gpulab --version` through the console script's entry (``run``): the package, the pinned binaries and the
    pinned NVIDIA modules used as referees."""
    from cluster import versions

    out = subprocess.run([sys.executable, "-m", "labs.cli.main", "--version"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("gpulab 0.") and versions.KUBERNETES_VERSION in out.stdout
    assert versions.ETCD_VERSION in out.stdout
    for module_version in (versions.GPU_OPERATOR_VERSION, versions.CONTROLLER_TOOLS_VERSION,
                           versions.DEVICE_PLUGIN_VERSION, versions.MIG_PARTED_VERSION):
        assert module_version in out.stdout


def test_console_script_exit_code_is_the_commands() -> None:
    """``run`` exits with ``main``'s code: an unknown command is a usage error (2)."""
    out = subprocess.run([sys.executable, "-m", "labs.cli.main", "no-such-command"], capture_output=True, text=True)
    assert out.returncode == 2 and "No such command" in out.stderr
