"""The organizer's text (``pages.overview``, ``pages.terms``) as safe HTML: CommonMark, parsed
by markdown-it-py, with everything that could reach past the text turned off.

- Raw HTML in the input is text, escaped, never passed through (``html`` off), and so are
  entity references (``&amp;`` shows as written: every piece of text is escaped once);
- links (``[text](url)``, ``<url>``) may point at ``http://``, ``https://`` or ``mailto:``
  only; any other address (``javascript:``, ``data:``, a relative path) leaves the link as the
  text it was written as;
- images are off (``![alt](url)`` is a "!" and a link): the page fetches nothing the
  organizer's text names;
- bare addresses stay text (no linkify), quotes stay straight (no typographer);
- CommonMark's blocks (paragraphs, lists, headings, quotes, code) and GitHub's tables;
- no blank line in the result: Codabench runs a page through Markdown (codabench_v2.md §1.7),
  where a blank line would end the page's raw HTML block, so a blank line inside a code block
  ends with ``&#10;`` instead (the same line break in ``<pre>``).

The result is ``markupsafe.Markup``, which Jinja2's autoescape leaves as it is:
``{{ markdown_html(spec.pages["overview"]) }}``.
"""
from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markupsafe import Markup

SAFE_URL = re.compile(r"(?:https?://[^\s<>]+|mailto:[^\s<>/][^\s<>]*)\Z", re.IGNORECASE)
MAX_URL = 2048
# A line holding nothing but spaces: only a code block keeps one in markdown-it's output.
BLANK_LINE_END = re.compile(r"(?<=\n)([ \t]*)\n")


def safe_url(url: str) -> bool:
    """An address a link may point at: http(s) or mailto, nothing that a browser would run."""
    return (len(url) <= MAX_URL and bool(SAFE_URL.match(url))
            and not any(ord(c) < 32 or ord(c) == 127 for c in url))


def _parser() -> MarkdownIt:
    parser = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False,
                                       "xhtmlOut": False})    # the pages are HTML5: <br>
    parser.enable("table").disable(["entity", "image"])
    # markdown-it's own validator refuses only javascript:, vbscript:, file: and most data:
    parser.validateLink = safe_url
    return parser


PARSER = _parser()


def markdown_html(text: str) -> Markup:
    """The organizer's text as safe HTML (see the module's docstring for what is understood)."""
    html = PARSER.render(str.__str__(text or "")).rstrip("\n")
    return Markup(BLANK_LINE_END.sub(r"\1&#10;", html))
