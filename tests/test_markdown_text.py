"""bundle/markdown_text.py: the organizer's text as CommonMark (markdown-it-py), made safe."""
import re
import time
from html import unescape

import pytest
from markupsafe import Markup

from bundle.markdown_text import markdown_html, safe_url


def html(text: str) -> str:
    result = markdown_html(text)
    assert isinstance(result, Markup)
    return str(result)


def balanced(result: str) -> bool:
    stack = []
    for closing, tag in re.findall(r"<(/?)(p|ul|li|em|strong|code|a)\b[^>]*>", result):
        if closing:
            if not stack or stack.pop() != tag:
                return False
        else:
            stack.append(tag)
    return not stack


# --- escaping ---------------------------------------------------------------------------

def test_raw_html_is_escaped_never_passed_through():
    assert html('<script>alert("x")</script> & <b>bold</b>') == (
        "<p>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;</p>")
    assert html("<div>\n<script>alert(1)</script>\n</div>") == (
        "<p>&lt;div&gt;\n&lt;script&gt;alert(1)&lt;/script&gt;\n&lt;/div&gt;</p>")


def test_text_is_escaped_exactly_once():
    assert html("&amp; is written &amp;") == "<p>&amp;amp; is written &amp;amp;</p>"
    assert html("a < b > c") == "<p>a &lt; b &gt; c</p>"
    # Jinja2's autoescape leaves the Markup alone: no second escaping
    from jinja2 import Environment
    page = Environment(autoescape=True).from_string("{{ body }}").render(body=markdown_html("a & b"))
    assert page == "<p>a &amp; b</p>"


def test_markup_input_is_still_escaped():
    assert html(Markup("<i>x</i>")) == "<p>&lt;i&gt;x&lt;/i&gt;</p>"


def test_code_is_literal_and_escaped():
    assert html("run `python build.py --phase *all* <x>`") == (
        "<p>run <code>python build.py --phase *all* &lt;x&gt;</code></p>")
    assert html("``a ` b``") == "<p><code>a ` b</code></p>"
    assert html("an `unclosed *code*") == "<p>an `unclosed <em>code</em></p>"


def test_backslash_makes_punctuation_literal():
    assert html(r"\*not emphasis\* and \[not](https://a.org)") == (
        "<p>*not emphasis* and [not](https://a.org)</p>")


def test_empty_text():
    assert html("") == ""
    assert html("  \n\n ") == ""


# --- links ------------------------------------------------------------------------------

def test_allowed_links():
    assert html("[the site](https://example.org/a?b=1&c=2)") == (
        '<p><a href="https://example.org/a?b=1&amp;c=2">the site</a></p>')
    assert html("[write](mailto:organizers@example.org)") == (
        '<p><a href="mailto:organizers@example.org">write</a></p>')
    assert html("[old](HTTP://example.org)") == '<p><a href="HTTP://example.org">old</a></p>'
    assert html("[wiki](https://en.wikipedia.org/wiki/Foo_(bar)) after") == (
        '<p><a href="https://en.wikipedia.org/wiki/Foo_(bar)">wiki</a> after</p>')


def test_link_text_has_inline_markup():
    assert html("[**strong** `code` <i>](https://a.org)") == (
        '<p><a href="https://a.org"><strong>strong</strong> <code>code</code> &lt;i&gt;</a></p>')


@pytest.mark.parametrize("url", [
    "javascript:alert(1)", "JavaScript:alert(document.cookie)", "  javascript:alert(1)",
    "data:text/html;base64,PHNjcmlwdD4=", "vbscript:msgbox", "file:///etc/passwd",
    "//evil.example/x", "/relative/page.html", "ftp://example.org", "https:", "mailto:",
    "java\tscript:alert(1)", "https://a.org/x" + "y" * 2048])
def test_hostile_or_unknown_links_stay_plain_text(url):
    result = html(f"[click]({url})")
    assert "<a" not in result and "href" not in result
    assert result.startswith("<p>[click](")


def test_quotes_and_brackets_cannot_leave_the_attribute():
    result = html('[x](https://a.org/"onmouseover="alert(1))')
    assert result == '<p><a href="https://a.org/%22onmouseover=%22alert(1)">x</a></p>'
    assert html("[x](https://a.org/<script>)") == (
        '<p><a href="https://a.org/%3Cscript%3E">x</a></p>')


def test_autolinks_obey_the_same_schemes():
    assert html("<https://a.org/x>") == '<p><a href="https://a.org/x">https://a.org/x</a></p>'
    assert html("<javascript:alert(1)>") == "<p>&lt;javascript:alert(1)&gt;</p>"
    assert html("see https://a.org") == "<p>see https://a.org</p>"     # no linkify


def test_images_are_not_fetched():
    result = html("![logo](https://tracker.example/pixel.png)")
    assert "<img" not in result
    assert result == '<p>!<a href="https://tracker.example/pixel.png">logo</a></p>'


def test_links_do_not_nest():
    result = html("[a [b](https://x.org) c](https://y.org)")
    assert result.count("<a ") == 1 and balanced(result)


def test_safe_url():
    assert safe_url("https://a.org") and safe_url("http://a.org/x") and safe_url("mailto:a@b.c")
    assert not safe_url("https://a.org/\x00") and not safe_url("https://a b")


# --- emphasis ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("*em* and **strong**", "<em>em</em> and <strong>strong</strong>"),
    ("***both***", "<em><strong>both</strong></em>"),
    ("*a **b** c*", "<em>a <strong>b</strong> c</em>"),
    ("**a *b* c**", "<strong>a <em>b</em> c</strong>"),
    ("**bold*", "*<em>bold</em>"),
    ("*em**", "<em>em</em>*"),
    ("2 * 3 * 4", "2 * 3 * 4"),
    ("** x **", "** x **"),
    ("snake_case stays", "snake_case stays"),
    ("*[a](https://x.org)*", '<em><a href="https://x.org">a</a></em>'),
    ("*across\nlines*", "<em>across\nlines</em>"),
])
def test_emphasis(text, expected):
    assert html(text) == f"<p>{expected}</p>"


@pytest.mark.parametrize("text", [
    "**a *b** c*", "*a **b* c**", "****", "*a *b *c", "**a** **", "*`*`*", "***a*", "*a***b**",
    "[*a](https://x.org)*", "*[a*](https://x.org)"])
def test_odd_emphasis_is_balanced(text):
    result = html(text)
    assert balanced(result), result
    assert re.sub(r"<[^>]+>", "", result).replace("*", "") == \
        re.sub(r"\[|\]\([^)]*\)", "", text).replace("*", "").replace("`", ""), result


def test_hostile_input_is_fast():
    for text in ["*a " * 5000, "[a](" * 5000, "[" * 5000 + "]" * 5000, "`` `" * 5000,
                 "**a *" * 5000]:
        started = time.process_time()   # CPU time: a loaded machine does not inflate it
        assert balanced(html(text))
        assert time.process_time() - started < 2


# --- blocks -----------------------------------------------------------------------------

def test_paragraphs_and_line_breaks():
    text = "First paragraph\ncontinues here.\n\n\nSecond, with a break  \nand another\\\nend."
    assert html(text) == ("<p>First paragraph\ncontinues here.</p>\n"
                          "<p>Second, with a break<br>\nand another<br>\nend.</p>")
    assert html("a\r\n\r\nb") == "<p>a</p>\n<p>b</p>"
    assert html("ends with a backslash\\") == "<p>ends with a backslash\\</p>"


def test_lists():
    # CommonMark: an item indented under the previous one's text is nested in it
    text = "Rules:\n- one *rule*\n- two,\n  continued\n   - three\n\nAfter."
    assert html(text) == ("<p>Rules:</p>\n<ul>\n<li>one <em>rule</em></li>\n"
                          "<li>two,\ncontinued\n<ul>\n<li>three</li>\n</ul>\n</li>\n</ul>\n"
                          "<p>After.</p>")
    assert html("* a star item\n\n1. first") == (
        "<ul>\n<li>a star item</li>\n</ul>\n<ol>\n<li>first</li>\n</ol>")


def test_tables():
    assert html("| a | b |\n|---|--:|\n| *1* | <2> |") == (
        "<table>\n<thead>\n<tr>\n<th>a</th>\n<th style=\"text-align:right\">b</th>\n</tr>\n"
        "</thead>\n<tbody>\n<tr>\n<td><em>1</em></td>\n"
        "<td style=\"text-align:right\">&lt;2&gt;</td>\n</tr>\n</tbody>\n</table>")


def test_list_items_are_escaped():
    assert html("- <img src=x onerror=alert(1)>") == (
        "<ul>\n<li>&lt;img src=x onerror=alert(1)&gt;</li>\n</ul>")


@pytest.mark.parametrize("text", ["```\nfirst\n\n\n  \nlast\n```", "    a\n\n    b"])
def test_code_blocks_keep_their_blank_lines_without_a_blank_line(text):
    # Codabench's Markdown pass would end the page's raw HTML block at a blank line
    result = html(text)
    assert not re.search(r"\n[ \t]*\n", result), result
    code = re.search(r"<pre><code>(.*)</code></pre>", result, re.S).group(1)
    lines = [line.removeprefix("    ") for line in text.strip("`\n").split("\n")]
    assert unescape(code) == "\n".join(lines) + "\n"


def test_the_default_spec_text_renders():
    import yaml

    from bundle.spec import DEFAULT_SPEC
    raw = yaml.safe_load(DEFAULT_SPEC.read_text(encoding="utf-8"))
    for text in (raw["description"], raw["pages"]["overview"], raw["pages"]["terms"]):
        result = html(text)
        assert result.startswith("<p>") and result.endswith("</p>") and balanced(result)
