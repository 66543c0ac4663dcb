"""Renderings of history for people: Markdown reports, the index, the dashboard."""
