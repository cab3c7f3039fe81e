"""What a notebook keeps of a widget for the next time it is opened: the view, and a fallback that reads well.

A widget's output is a bundle. Its view (``application/vnd.jupyter.widget-view+json``) is drawn from the widget
state saved in the notebook, and JupyterLab draws it only in a trusted notebook (the widget renderer is not "safe",
so an untrusted output falls back to the bundle's safe forms). ipywidgets puts the widget's repr there as text
(``VBox(children=(HTML(value='<style>...``), which is what a learner saw on opening a course notebook. Here the
text and the HTML say what the widget is and how to start it; JupyterLab shows the HTML sanitised in an untrusted
notebook and the view in a trusted one (the widget renderer ranks first).

Both the quiz and the lab widget use this, so it lives in the package that stands alone. It describes a widget; it
builds none and imports no ipywidgets.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Protocol

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


class View(Protocol):
    """An ipywidgets widget (``Widget._repr_mimebundle_`` gives its view reference and its repr)."""

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None: ...


@dataclass(frozen=True)
class Fallback:
    """What a saved widget says where it is not drawn: what it is (one line), and how to start it."""

    what: str
    start: str

    def text(self) -> str:
        return f"{self.what}\n{self.start}"

    def html(self) -> str:
        # Only tags an untrusted notebook's sanitiser keeps (p, b, i, br); no style, no class.
        return f"<p><b>{html.escape(self.what)}</b><br><i>{html.escape(self.start)}</i></p>"


def bundle(view: View, fallback: Fallback) -> dict[str, Any]:
    """``view``'s own bundle with its text form replaced by ``fallback`` and an HTML form added."""
    data = dict(view._repr_mimebundle_() or {})
    data["text/plain"] = fallback.text()
    data["text/html"] = fallback.html()
    return data
