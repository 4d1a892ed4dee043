"""The documentation does not rot: every gallery example runs (in its quick mode), and the
API reference lists every public name."""

import importlib
import re
import runpy
from pathlib import Path

import pytest

import sklearn_nw
import sklearn_nw.bandwidth
import sklearn_nw.inspection
import sklearn_nw.kernels

DOCS = Path(__file__).resolve().parents[1] / "docs"
EXAMPLES = sorted((DOCS / "examples").glob("plot_*.py"))


def test_the_gallery_has_its_examples():
    assert len(EXAMPLES) >= 13


@pytest.mark.timeout(300)
@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs(script, monkeypatch, pyplot):
    monkeypatch.setenv("SKLEARN_NW_EXAMPLES_QUICK", "1")
    monkeypatch.chdir(script.parent)  # as sphinx-gallery runs it
    runpy.run_path(str(script), run_name="__main__")
    assert pyplot.get_fignums(), f"{script.name} drew no figure"


def _documented_names():
    api = (DOCS / "api.rst").read_text()
    names, module = set(), None
    for line in api.splitlines():
        if m := re.match(r"\.\. currentmodule:: (\S+)", line):
            module = m.group(1)
        elif m := re.match(r"\.\. data:: (\w+)", line):
            names.add(f"{module}.{m.group(1)}")
        elif module and (m := re.fullmatch(r"   (\w+)", line)):
            names.add(f"{module}.{m.group(1)}")
    return names


def _resolve(dotted):
    module, name = dotted.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("module", [sklearn_nw, sklearn_nw.bandwidth, sklearn_nw.kernels,
                                    sklearn_nw.inspection])
def test_api_reference_lists_every_public_name(module):
    # A name exported in two places (sklearn_nw.Kernel is sklearn_nw.kernels.Kernel) is
    # documented once.
    documented = {id(_resolve(n)) for n in _documented_names()
                  if not n.startswith("sklearn_nw.dask.")}
    missing = [n for n in module.__all__
               if not n.startswith("__") and id(getattr(module, n)) not in documented]
    assert not missing


def test_api_reference_lists_the_dask_estimators():
    pytest.importorskip("distributed")
    import sklearn_nw.dask

    documented = _documented_names()
    assert {f"sklearn_nw.dask.{n}" for n in sklearn_nw.dask.__all__} <= documented


def test_user_guide_pages_are_in_its_toctree():
    guide = DOCS / "user_guide"
    index = (guide / "index.rst").read_text()
    pages = {p.stem for p in guide.glob("*.rst")} - {"index"}
    listed = set(re.findall(r"^   (\w+)$", index, re.MULTILINE))
    assert pages <= listed
