"""Pygments HTML for the lines of a source or kernel file on a page: one line's spans per
table row, the lexer picked by name where the page knows the kind of file."""

from __future__ import annotations

import os

# The pygments lexer of each kind of file a page shows: sources, Triton and C++ kernels.
LEXER_NAMES = {".py": "python", ".cpp": "cpp", ".h": "cpp", ".c": "c", ".cu": "cuda"}


def highlight_lines(code: str, filename: str) -> list[str]:
    """Pygments HTML for each line of `code` (the formatter closes its spans at each line end,
    so the lines can sit in separate table rows)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import TextLexer, get_lexer_by_name, get_lexer_for_filename
    from pygments.util import ClassNotFound

    options = {"stripnl": False, "ensurenl": False}
    # by name for the files a page shows: by file name, pygments first imports every installed
    # package that registers a lexer (IPython, for one), which can cost more than the page
    name = LEXER_NAMES.get(os.path.splitext(filename)[1])
    try:
        if name:
            lexer = get_lexer_by_name(name, **options)
        else:
            lexer = get_lexer_for_filename(filename, **options)
    except ClassNotFound:
        lexer = TextLexer(**options)
    html = highlight(code, lexer, HtmlFormatter(nowrap=True))
    lines = html.split("\n")
    want = len(code.splitlines()) or 1
    return (lines + [""] * want)[:want]
