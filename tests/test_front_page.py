"""The README is the package's front page, in the repository and as its long description on
PyPI: short, with a quick start that runs and prints what it says, links that resolve and
the licence the metadata names."""

import contextlib
import io
import re
from pathlib import Path

import pytest
from setuptools.config.setupcfg import read_configuration

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


@pytest.fixture(scope="module")
def metadata():
    return read_configuration(ROOT / "setup.cfg")["metadata"]


def test_readme_is_a_front_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    # CI (.ci/run) runs the README's test command; a clone builds the docs with the other.
    commands = re.findall(r"^make (\w+)", text, re.MULTILINE)
    assert {"test", "docs"} <= set(commands)


def _links(markdown):
    """The targets of every Markdown link and image, inline or by reference, and of any
    HTML ``href``/``src``."""
    inline = re.findall(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", markdown)
    by_reference = re.findall(r"^\s*\[[^\]]+\]:\s*(\S+)", markdown, re.MULTILINE)
    html = re.findall(r"(?:href|src)\s*=\s*[\"']([^\"']+)", markdown)
    return inline + by_reference + html


def test_link_extraction_sees_links_and_images():
    found = _links('See [a](docs/a.rst), ![b](x.png "t"), <img src="y.png">.\n\n[c]: z.md\n')
    assert found == ["docs/a.rst", "x.png", "z.md", "y.png"]


def test_long_description_links_resolve(metadata):
    # setuptools reads the long description as it will build the package's metadata.
    description = metadata["long_description"]
    assert metadata["long_description_content_type"] == "text/markdown"
    assert description == README.read_text(encoding="utf-8")
    links = _links(description)
    assert len(links) >= 10
    broken = []
    for target in links:
        if re.match(r"https?://", target):
            continue
        assert not re.match(r"\w+:", target), f"{target}: only http(s) links are portable"
        path = target.split("#", 1)[0]
        # A relative link resolves against the repository: it must name a file or folder.
        if not path or not (ROOT / path).exists():
            broken.append(target)
    assert not broken


def test_licence(metadata):
    assert metadata["license"] == "BSD-3-Clause"
    assert metadata["license_files"] == ["LICENSE"]
    licence = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert licence.startswith("BSD 3-Clause License")
    assert "Copyright (c) the sklearn-nw developers" in licence
    assert "Neither the name of the copyright holder" in licence


@pytest.mark.timeout(300)
def test_readme_quick_start_runs_and_prints_what_it_says():
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    assert len(blocks) == 1
    code = blocks[0]
    printed = []

    def record(*args):  # one entry per call of print, however many lines it spans
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            print(*args)
        printed.append(out.getvalue().strip())

    exec(compile(code, "README.md", "exec"), {"__name__": "__readme__", "print": record})
    # Each print's comment states what it prints: a score to the digits shown, a shape.
    claims = re.findall(r"^print\(.*?\)\s*#\s*(.*)$", code, re.MULTILINE)
    assert len(claims) == len(printed) == 3
    score = re.search(r"\d+\.\d+", claims[0]).group()
    assert f"{float(printed[0]):.{len(score.split('.')[1])}f}" == score
    assert "best_params_" in code and "kind" in printed[1] and "degree" in printed[1]
    assert claims[2].startswith(printed[2] + ":")
