"""nbgrader's feedback exporter for the class runtime (``c.GenerateFeedback.exporter_class``).

nbconvert's ``HTMLExporter`` ends by passing the page through BeautifulSoup selectors (alt text for images,
tabindex for cells). The soupsieve release in the project venv compiles those selectors with possessive
quantifiers that the ``re`` module of Debian 12's Python 3.11.2 (the class runtime's interpreter when the
project's own is private) rejects, so ``generate_feedback`` failed for every learner. This exporter renders the
same template and, only when soupsieve fails that way, returns the page without those two touches.
"""

from __future__ import annotations

from typing import Any

from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter


class FeedbackExporter(HTMLExporter):
    def from_notebook_node(self, nb: Any, resources: Any = None, **kw: Any) -> Any:
        from soupsieve.util import SelectorSyntaxError

        try:
            return super().from_notebook_node(nb, resources, **kw)
        except SelectorSyntaxError:
            self.log.warning("this Python cannot compile soupsieve's selectors; feedback without alt text")
        langinfo = nb.metadata.get("language_info", {})
        lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
        this: Any = self  # nbconvert is untyped
        resources = this._init_resources(resources)
        highlight: Any = Highlight2HTML
        data_filter: Any = WidgetsDataTypeFilter
        this.register_filter("highlight_code", this.filters.get("highlight_code",
                                                                highlight(pygments_lexer=lexer, parent=self)))
        this.register_filter("filter_data_type", data_filter(notebook_metadata=this._nb_metadata, parent=self,
                                                             resources=resources))
        return TemplateExporter.from_notebook_node(self, nb, resources, **kw)
