"""The course's JupyterLab settings: no "official Jupyter news" prompt on a learner's first launch (JupyterLab >= 4.2
asks while the notification plugin's ``fetchNews`` is ``"none"``, its default), set through the overrides folder
that jupyterlab_server reads, in the venv that ``make python-deps`` and the learner image install."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
OVERRIDES = ROOT / "course" / "jupyterlab" / "gpulab.json"
TARGET = "share/jupyter/lab/settings/overrides.d/gpulab.json"
PLUGIN = "@jupyterlab/apputils-extension:notification"


def test_jupyterlab_reads_the_course_setting_as_the_default(tmp_path: Path) -> None:
    """The file, placed where the set-up puts it, is what jupyterlab_server hands the front end as the plugin's
    defaults; the values are ones the installed JupyterLab's own schema allows."""
    from jupyterlab.commands import get_app_dir
    from jupyterlab_server.settings_utils import get_settings

    app = tmp_path / "lab"
    (app / "settings" / "overrides.d").mkdir(parents=True)
    shutil.copy(OVERRIDES, app / "settings" / "overrides.d" / "gpulab.json")
    schemas = Path(get_app_dir()) / "schemas"
    found, _ = get_settings(str(app / "settings"), str(schemas), str(tmp_path / "user"), schema_name=PLUGIN)
    properties = found["schema"]["properties"]
    assert properties["fetchNews"]["default"] == "false" and properties["checkForUpdates"]["default"] is False
    assert "false" in [choice["const"] for choice in properties["fetchNews"]["oneOf"]]
    assert set(json.loads(OVERRIDES.read_text())[PLUGIN]) <= set(properties)
    without, _ = get_settings(str(tmp_path / "none"), str(schemas), str(tmp_path / "user"), schema_name=PLUGIN)
    assert without["schema"]["properties"]["fetchNews"]["default"] == "none"  # what asks, without the file


def test_the_set_up_and_the_learner_image_install_it() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "install -D -m 644 course/jupyterlab/gpulab.json $(VENV)/$(LAB_OVERRIDES)" in makefile
    assert f"LAB_OVERRIDES := {TARGET}" in makefile
    image = (ROOT / "course" / "class" / "install.sh").read_text()  # every step of course/class/Containerfile
    assert f'install -D -m 644 "$SRC/course/jupyterlab/gpulab.json" "$VENV/{TARGET}"' in image
