"""Benchmark numbers come from one source, ``benchmarks/results/``: the docs' Benchmarks page
renders those files, and every number the README's headline ratios or a docs paragraph
citing a benchmark prints must be a value of a results file (to the digits printed)."""

import io
import math
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOCS = ROOT / "docs"
PAGES = sorted([*DOCS.glob("*.rst"), *(DOCS / "user_guide").glob("*.rst")])

# A number as printed: 7,854, 0.061, -0.062, 1.37e+03, 98.6 (of 98.6%), 136 (of 136x).
_NUMBER = re.compile(
    r"(?<![\w.])[-+−]?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?:[eE]([-+]?\d+))?(?!(?!x)\w)")
# A paragraph that reports a benchmark: it names a script or links to the Benchmarks page.
_CITES = re.compile(r"bench_\w+\.py|<bench-[\w-]+>|:ref:`benchmarks`")


def _numbers(text):
    """(value, half a unit of the last digit printed) for each number in the text."""
    found = []
    for m in _NUMBER.finditer(text):
        whole, decimals, exponent = m.group(1).replace(",", ""), m.group(2) or "", m.group(3)
        value = float(whole + decimals) * 10.0 ** int(exponent or 0)
        digits = len(decimals) - 1 if decimals else 0
        found.append((value, 0.5 * 10.0 ** (int(exponent or 0) - digits), m.group(0)))
    return found


def _results_values():
    values = []
    for path in sorted(RESULTS.glob("*.md")):
        values += [abs(value) for value, _, _ in _numbers(path.read_text(encoding="utf-8"))]
    return sorted(values)


RESULT_VALUES = _results_values()


def _in_results(value, half_unit):
    """Whether some results value, rounded to the digits the docs print, is this one."""
    return any(math.isclose(abs(value), v, rel_tol=1e-9)
               or abs(abs(value) - v) <= half_unit * (1 + 1e-9) for v in RESULT_VALUES)


def _prose(paragraph):
    """A paragraph's text without what is code or a cross-reference: literals, roles' targets."""
    paragraph = re.sub(r"``[^`]*``", " ", paragraph)
    paragraph = re.sub(r":(?:ref|doc|class|func|meth|mod|attr):`[^`]*`", " ", paragraph)
    paragraph = re.sub(r":math:`([^`]*)`", r" \1 ", paragraph)
    # 7.1 \cdot 10^{-6}, as the results print it: 7.1e-6.
    paragraph = re.sub(r"(\d(?:\.\d+)?)\s*\\cdot\s*10\^\{?([-+]?\d+)\}?", r"\1e\2", paragraph)
    return re.sub(r"\]\([^)]*\)", "]", paragraph)  # Markdown link targets


def _citing_paragraphs(text):
    """Paragraphs and list items of prose (not code blocks, indented 3 or more) citing a
    benchmark."""
    for paragraph in re.split(r"\n\s*\n|\n(?=\s{0,2}- )", text):
        lines = [line for line in paragraph.splitlines() if line.strip()]
        if not lines or all(line.startswith("   ") for line in lines):
            continue
        if _CITES.search(paragraph):
            yield paragraph


def _unsourced(text):
    return [(number, paragraph.strip().splitlines()[0][:60])
            for paragraph in _citing_paragraphs(text)
            for value, half_unit, number in _numbers(_prose(paragraph))
            if not _in_results(value, half_unit)]


def test_the_results_hold_numbers():
    assert len(RESULT_VALUES) > 1000


def test_a_number_missing_from_the_results_is_caught():
    # 0.113 s and 79 times are in bench_bandwidth.md; 0.0613 and 1737 are in no results.
    good = "In the ``bench_bandwidth.py`` run it took 0.113 s, 79 times faster."
    bad = "In the ``bench_bandwidth.py`` run it took 0.0613 s, 1737 times faster."
    assert _unsourced(good) == []
    assert [number for number, _ in _unsourced(bad)] == ["0.0613", "1737"]
    # Rounding is allowed to the digits printed, no further.
    assert _unsourced("``bench_engine.py``: 11.6 s.") == []  # 11.564 in the table
    # (11.7 is sourced since bench_fit_time printed 11.75; 17.9 is in no results file.)
    assert _unsourced("``bench_engine.py``: 17.9 s.") != []
    # A power of ten in math reads as the results print it (7.1e-06 in bench_predict.md).
    assert _unsourced("``bench_predict.py``: :math:`7.1 \\cdot 10^{-6}`.") == []
    assert [n for n, _ in _unsourced("``bench_predict.py``: :math:`7.3 \\cdot 10^{-6}`.")] == [
        "7.3e-6"]


def test_readme_headline_numbers_are_in_the_results():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Benchmarks\n", 1)[1].split("\n## ", 1)[0]
    headlines = re.findall(r"\*\*([^*]+)\*\*", section)
    assert len(headlines) == 5
    # Every paragraph and bullet of the section, each citing its results table.
    items = [item for item in re.split(r"\n(?=- )|\n\s*\n", section) if item.strip()]
    cited = [item for item in items if "benchmarks/results/bench_" in item]
    assert len(cited) >= 6
    unsourced = [(number, item[:60]) for item in items
                 for value, half_unit, number in _numbers(_prose(item))
                 if not _in_results(value, half_unit)]
    assert not unsourced


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(DOCS).as_posix())
def test_docs_benchmark_numbers_are_in_the_results(page):
    assert not _unsourced(page.read_text(encoding="utf-8"))


def test_the_benchmarks_page_renders_every_results_file():
    sys.path.insert(0, str(DOCS / "sphinxext"))
    try:
        from benchmark_results import markdown_to_rst
    finally:
        sys.path.pop(0)
    from docutils.core import publish_doctree

    page = (DOCS / "benchmarks.rst").read_text(encoding="utf-8")
    rendered = set(re.findall(r"^\.\. benchmark-results:: (\w+)$", page, re.MULTILINE))
    assert rendered == {path.stem for path in RESULTS.glob("*.md")}
    for name in sorted(rendered):
        source = (RESULTS / f"{name}.md").read_text(encoding="utf-8")
        rst = "\n".join(["Page", "====", "", "Section", "-------", "",
                         *markdown_to_rst(source)])
        messages = io.StringIO()
        doctree = publish_doctree(rst, settings_overrides={"warning_stream": messages,
                                                           "report_level": 2})
        assert not messages.getvalue(), name
        # Every number of the file reaches the page, in its tables and its text.
        text = doctree.astext()
        for _, _, number in _numbers(source):
            assert number in text, (name, number)
