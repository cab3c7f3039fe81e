"""Renderers: the same lint result or report printed for a terminal, a notebook widget, nbgrader or JSON.

Renderers only format; they never decide what passed.
"""
