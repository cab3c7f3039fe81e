"""Entry point of the ``gpulab`` command: one click group, commands contributed by ``labs.cli.cmd_*`` modules.

Our own failures (``CourseError``) end as one readable message and exit code 1, never a traceback.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import sys

import click

from cluster import errors

import labs.cli


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
def cli(verbose: int) -> None:
    """gpulab: learn how Kubernetes schedules GPUs, on a real control plane with simulated GPU nodes."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


def _register_all() -> None:
    for info in sorted(pkgutil.iter_modules(labs.cli.__path__), key=lambda i: i.name):
        if info.name.startswith("cmd_"):
            module = importlib.import_module(f"labs.cli.{info.name}")
            module.register(cli)


_register_all()


def main(argv: list[str] | None = None) -> int:
    try:
        rv = cli.main(args=argv, prog_name="gpulab", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except click.exceptions.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except errors.CourseError as exc:
        click.secho(f"error: {exc}", fg="red", err=True)
        return 1
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return 130
    # With standalone_mode=False, click returns the code given to ctx.exit(n) instead of raising it.
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":
    sys.exit(main())
