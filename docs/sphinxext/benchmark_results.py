"""``.. benchmark-results:: bench_predict``: a file of ``benchmarks/results/`` in a page.

The benchmark scripts write their tables as Markdown (``benchmarks/results/<name>.md``, next
to the JSON of every measurement). The directive reads that file at build time and renders
it: its headings, tables, lists and paragraphs, the machine line included. The docs thus
print the numbers the scripts measured, from the one place they are kept, and a rerun of a
script changes the page with the next build.
"""

import re
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList
from sphinx.util.nodes import nested_parse_with_titles

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"

# Adornments for the headings of a results file, from its outermost heading level in.
_ADORNMENTS = "~^'"
# Markdown's inline markup: a code span, strong, emphasis.
_MARKUP = re.compile(r"`([^`]+)`|\*\*([^*]+)\*\*|(?<![*\w])\*([^*\s][^*]*?)\*(?![*\w])")
# reStructuredText's inline markup must be set off from the text around it, by whitespace
# or by one of these (its "inline markup recognition rules").
_BEFORE_MARKUP = set("-:/'\"<([{")
_AFTER_MARKUP = set("-.,:;!?\\/'\")]}>")
# A line that reStructuredText would start a list, a comment or a table with.
_LIST_LIKE = re.compile(r"^(?:[\w#]{1,3}[.)]\s|\(\w{1,3}\)\s|[-+*|]\s|\.\.\s)")


def _escape(text):
    """Plain text with every character reStructuredText would read as markup escaped."""
    return re.sub(r"([\\*|_`])", r"\\\1", text)


def _inline(text):
    """A line of Markdown (code spans, strong, emphasis) as reStructuredText."""
    text = text.replace("\\|", "|")  # Markdown's escaped pipe in a table cell
    out, pos = [], 0
    for m in _MARKUP.finditer(text):
        out.append(_escape(text[pos:m.start()]))
        code, strong, emphasis = m.groups()
        if code is not None:
            piece = "``" + code + "``"
        elif strong is not None:
            piece = "**" + _escape(strong) + "**"
        else:
            piece = "*" + _escape(emphasis) + "*"
        before = text[m.start() - 1] if m.start() else " "
        after = text[m.end()] if m.end() < len(text) else " "
        if not before.isspace() and before not in _BEFORE_MARKUP:
            piece = "\\ " + piece
        if not after.isspace() and after not in _AFTER_MARKUP:
            piece = piece + "\\ "
        out.append(piece)
        pos = m.end()
    out.append(_escape(text[pos:]))
    line = "".join(out)
    return "\\" + line if _LIST_LIKE.match(line) else line


def _cells(line):
    cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    return [cell.strip() for cell in cells]


def markdown_to_rst(text):
    """reStructuredText for a results file's Markdown: ``#`` headings (a level-1 heading,
    the file's own title, is left to the page), pipe tables, ``-`` lists, paragraphs."""
    lines = text.splitlines()
    levels = sorted({len(m.group(1)) for line in lines
                     if (m := re.match(r"(#{2,6}) ", line))})
    rst, i = [], 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if m := re.match(r"(#{1,6}) (.*)", line):
            i += 1
            if len(m.group(1)) == 1:
                continue
            title = _inline(m.group(2).strip())
            mark = _ADORNMENTS[levels.index(len(m.group(1)))]
            rst += [title, mark * (len(title) + 1), ""]
        elif line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                if not re.fullmatch(r"\|(\s*:?-+:?\s*\|)+\s*", lines[i]):
                    rows.append(_cells(lines[i]))
                i += 1
            rst += [".. list-table::", "   :header-rows: 1", "   :class: benchmark-table", ""]
            for row in rows:
                for j, cell in enumerate(row):
                    rst.append(("   * - " if j == 0 else "     - ") + _inline(cell))
            rst.append("")
        elif line.startswith("- "):
            while i < len(lines) and lines[i].startswith("- "):
                rst.append("- " + _inline(lines[i][2:].strip()))
                i += 1
            rst.append("")
        else:
            # A paragraph; the machine line stands alone.
            paragraph = [lines[i].strip()]
            i += 1
            while (i < len(lines) and lines[i].strip() and not lines[i].startswith(("|", "#"))
                   and not lines[i].startswith(("- ", "Machine: "))
                   and not paragraph[0].startswith("Machine: ")):
                paragraph.append(lines[i].strip())
                i += 1
            body = _inline(" ".join(paragraph))
            if body.startswith("Machine: "):
                body = "**Machine:** " + body[len("Machine: "):]
            rst += [body, ""]
    return rst


class BenchmarkResults(Directive):
    """Render ``benchmarks/results/<argument>.md``."""

    required_arguments = 1

    def run(self):
        path = RESULTS / f"{self.arguments[0]}.md"
        if not path.is_file():
            raise self.error(f"no benchmark results file {path}")
        self.state.document.settings.env.note_dependency(str(path))
        content = StringList(markdown_to_rst(path.read_text(encoding="utf-8")), str(path))
        node = nodes.Element()
        nested_parse_with_titles(self.state, content, node)
        return node.children


def setup(app):
    app.add_directive("benchmark-results", BenchmarkResults)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
