"""The self-contained HTML report (inline SVG, no scripts, no network)."""

from .html import render_report

__all__ = ["render_report"]
