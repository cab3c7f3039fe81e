"""The Python that learners' servers run: the project's own venv when every account may execute its interpreter,
else a small venv in the class folder (``runtime/``) made with the system's interpreter of the same version.

A venv made by ``python3 -m venv`` links to the interpreter it was made with; when that lives in a private home
(pyenv under /root, say) no learner can start it. The class runtime reuses the project venv's packages
(``site.addsitedir`` from a ``.pth`` file, same Python minor version, so the same compiled wheels) and carries a
copy of each of its console scripts with the runtime's interpreter in the first line. Jupyter's data and config
paths then point at the project venv (``JUPYTER_PATH``, ``JUPYTER_CONFIG_PATH``), so the lab extensions and
server extensions installed there are found.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from cluster import errors

PTH = "gpulab-project-venv.pth"


def _world_executable(path: Path) -> bool:
    real = path.resolve()
    if not os.stat(real).st_mode & 0o001:
        return False
    return all(os.stat(parent).st_mode & 0o001 for parent in real.parents)


def project_prefix() -> Path:
    return Path(sys.prefix)


def needs_own(python: Path | None = None) -> bool:
    return not _world_executable(python or Path(sys.executable))


def _system_python() -> Path:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for folder in ("/usr/bin", "/usr/local/bin", "/bin"):
        candidate = Path(folder) / version
        if candidate.is_file() and _world_executable(candidate):
            return candidate
    raise errors.CourseError(f"this project's Python ({sys.executable}) cannot be run by other accounts, and there is "
                             f"no {version} in /usr/bin or /usr/local/bin for the class's learners",
                             hint=f"install {version} (apt-get install {version}-venv) or make the venv with a "
                                  "system Python")


def bin_dir(root: Path) -> Path:
    """Where the class's servers find ``python``, ``gpulab`` and ``jupyterhub-singleuser`` (see ``ensure``)."""
    return Path(sys.executable).parent if not needs_own() else root / "runtime" / "bin"


def ensure(root: Path) -> Path:
    """The bin folder learners' servers run from (made under ``root/runtime`` when needed)."""
    project_bin = Path(sys.executable).parent
    if not needs_own():
        return project_bin
    target = root / "runtime"
    python = target / "bin" / "python"
    if not python.exists():
        subprocess.run([str(_system_python()), "-m", "venv", "--without-pip", str(target)], check=True,
                       capture_output=True)
    site_packages = Path(sysconfig.get_paths()["purelib"])
    pth = next((target / "lib").glob("python3*/site-packages")) / PTH
    pth.write_text(f"import site; site.addsitedir({str(site_packages)!r})\n", encoding="utf-8")
    shebang = f"#!{python}\n"
    for script in sorted(project_bin.iterdir()):
        if script.name.startswith(("python", "activate", "pip", "Activate")) or not script.is_file():
            continue
        try:
            text = script.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if text.startswith("#!") and "python" in text.splitlines()[0]:
            out = target / "bin" / script.name
            out.write_text(shebang + text.split("\n", 1)[1], encoding="utf-8")
            out.chmod(0o755)
    for item in [target, *target.rglob("*")]:
        if not item.is_symlink():
            item.chmod(0o755 if item.is_dir() or os.access(item, os.X_OK) else 0o644)
    return target / "bin"


def jupyter_paths() -> tuple[str, str]:
    """(JUPYTER_PATH, config folder) of the project venv, for a server running from the class runtime."""
    return str(project_prefix() / "share" / "jupyter"), str(project_prefix() / "etc" / "jupyter")

