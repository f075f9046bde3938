"""Views of what was measured: the terminal, REPORT.md, the HTML pages."""
