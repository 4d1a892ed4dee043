"""The package's layering, read from the import statements of its modules (``ast``, nothing
is imported): the engine imports nothing from the scikit-learn side, the key set nothing
from Dask, the base and the estimators reach compute only through the key set or a
strategy, and no modules import each other in a cycle.

Every import statement counts, also one inside a function: an import deferred to run time
still ties the two modules together.
"""

import ast
from fnmatch import fnmatch
from importlib.util import find_spec
from pathlib import Path
from typing import NamedTuple

# Found, not imported: the package's own imports are what is read.
PACKAGE = Path(find_spec("sklearn_nw").origin).parent
MODULES = sorted(path.stem for path in PACKAGE.glob("*.py"))

# Torch-only computation.
ENGINE = ("_engine*", "_local_poly", "_compiled", "_cells")
# The estimators, their validation, their strategies and Dask.
SKLEARN_SIDE = ("_base", "_regression", "_classification", "_cv", "bandwidth", "dask",
                "_dask*", "inspection", "_grids", "_selection*", "_validation")
ESTIMATORS = ("_base", "_regression", "_classification", "_cv", "dask")


class Import(NamedTuple):
    module: str  # the importing module of the package, e.g. "_keys"
    line: int
    target: str  # a module of the package ("_shards"), or a distribution's top level ("sklearn")
    internal: bool
    statement: str  # as written, for the messages

    def __str__(self):
        return f"sklearn_nw/{self.module}.py:{self.line}: {self.statement}"


def read_imports(module, source, modules):
    """Every import statement of ``source`` (the text of the package's ``module``), one
    :class:`Import` per module it names; ``modules`` are the package's modules."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        statement = ast.get_source_segment(source, node)
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "sklearn_nw":
                    target = parts[1] if len(parts) > 1 else "__init__"
                    found.append(Import(module, node.lineno, target, True, statement))
                else:
                    found.append(Import(module, node.lineno, parts[0], False, statement))
        elif isinstance(node, ast.ImportFrom):
            parts = node.module.split(".") if node.module else []
            if node.level == 0:
                if parts[0] != "sklearn_nw":
                    found.append(Import(module, node.lineno, parts[0], False, statement))
                    continue
                parts = parts[1:]
            if parts:
                found.append(Import(module, node.lineno, parts[0], True, statement))
            else:  # from . import name: a module, or a name of the package's __init__
                for alias in node.names:
                    target = alias.name if alias.name in modules else "__init__"
                    found.append(Import(module, node.lineno, target, True, statement))
    return found


IMPORTS = {m: read_imports(m, (PACKAGE / f"{m}.py").read_text(encoding="utf-8"), MODULES)
           for m in MODULES}


def matching(patterns, modules=MODULES):
    return sorted(m for m in modules if any(fnmatch(m, p) for p in patterns))


def reached_imports(imports, module):
    """The imports of ``module`` and of every package module it reaches through imports,
    each with the chain of imports that leads to it."""
    chains = {module: []}
    queue = [module]
    while queue:
        current = queue.pop(0)
        for imp in imports[current]:
            yield imp, chains[current]
            if imp.internal and imp.target in imports and imp.target not in chains:
                chains[imp.target] = [*chains[current], imp]
                queue.append(imp.target)


def violations(imports, modules, internal, external=(), *, through_imports):
    """The imports of ``modules`` (and, ``through_imports``, of the modules they reach)
    that name a package module matching ``internal`` or a distribution in ``external``."""
    found = []
    for module in modules:
        pairs = (reached_imports(imports, module) if through_imports
                 else ((imp, []) for imp in imports[module]))
        for imp, chain in pairs:
            if (any(fnmatch(imp.target, p) for p in internal) if imp.internal
                    else imp.target in external):
                via = "".join(f"\n      reached through {step}" for step in reversed(chain))
                found.append(f"{module}: {imp}{via}")
    return sorted(set(found))


def cycles(graph):
    """The strongly connected components of ``graph`` (module -> the modules it imports)
    of more than one module, or of one importing itself (Tarjan's algorithm)."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(m):
        index[m] = low[m] = len(index)
        stack.append(m)
        on_stack.add(m)
        for n in graph[m]:
            if n not in index:
                visit(n)
                low[m] = min(low[m], low[n])
            elif n in on_stack:
                low[m] = min(low[m], index[n])
        if low[m] == index[m]:
            component = []
            while True:
                n = stack.pop()
                on_stack.discard(n)
                component.append(n)
                if n == m:
                    break
            if len(component) > 1 or m in graph[m]:
                components.append(sorted(component))

    for m in sorted(graph):
        if m not in index:
            visit(m)
    return sorted(components)


def _report(rule, found):
    return f"{rule}; offending imports:\n  " + "\n  ".join(found)


# -- the rules ------------------------------------------------------------------------------


def test_the_rules_name_existing_modules():
    # A renamed module must not leave a rule checking nothing.
    for pattern in (*ENGINE, *SKLEARN_SIDE, *ESTIMATORS, "_keys"):
        assert matching([pattern]), f"no module of sklearn_nw matches {pattern!r}"


def test_the_engine_imports_nothing_from_the_sklearn_side():
    found = violations(IMPORTS, matching(ENGINE), SKLEARN_SIDE,
                       ("sklearn", "dask", "distributed"), through_imports=True)
    assert not found, _report(
        "The engine (torch only) imports neither scikit-learn nor a module of the "
        "estimators' side, directly or through another module", found)


def test_the_key_set_imports_nothing_from_dask():
    found = violations(IMPORTS, ["_keys"], ("_shards", "_dask*", "dask"),
                       ("dask", "distributed"), through_imports=True)
    assert not found, _report(
        "The key set (_keys) imports nothing of the Dask layer (_shards, _dask*, dask, "
        "distributed), directly or through another module", found)


def test_the_estimators_reach_compute_through_the_key_set_or_a_strategy():
    found = violations(IMPORTS, matching(ESTIMATORS), ("_engine*",), through_imports=False)
    assert not found, _report(
        "The base and the estimators import no _engine* module: they compute through the "
        "key set (_keys) or a bandwidth strategy", found)


def test_no_import_cycles():
    graph = {m: sorted({i.target for i in IMPORTS[m] if i.internal and i.target in IMPORTS})
             for m in MODULES}
    found = sorted(str(i) for component in cycles(graph) for m in component
                   for i in IMPORTS[m] if i.internal and i.target in component)
    assert not found, _report("No modules of sklearn_nw import each other in a cycle", found)


# -- the checks themselves, on made-up modules ------------------------------------------------


def test_every_form_of_import_is_read():
    source = (
        "import numpy as np\n"
        "import sklearn.utils\n"
        "import sklearn_nw._keys\n"
        "from sklearn.base import clone\n"
        "from ._engine import pool\n"
        "from . import kernels, KERNELS\n"
        "from sklearn_nw import dask\n"
        "from sklearn_nw._shards import merge\n"
        "\n"
        "def later():\n"
        "    from .bandwidth import rule\n"
    )
    found = read_imports("_made_up", source, ["_engine", "_keys", "kernels", "dask"])
    assert [(i.line, i.target, i.internal) for i in sorted(found)] == [
        (1, "numpy", False), (2, "sklearn", False), (3, "_keys", True),
        (4, "sklearn", False), (5, "_engine", True), (6, "__init__", True),
        (6, "kernels", True), (7, "dask", True), (8, "_shards", True),
        (11, "bandwidth", True),
    ]
    assert str(found[-1]) == "sklearn_nw/_made_up.py:11: from .bandwidth import rule"


def _made_up(graph, external=None):
    return {m: [Import(m, 1, t, True, f"from .{t} import x") for t in targets]
            + [Import(m, 2, t, False, f"import {t}") for t in (external or {}).get(m, ())]
            for m, targets in graph.items()}


def test_a_forbidden_import_is_found_and_the_way_to_it_named():
    imports = _made_up({"_engine": ["_losses"], "_losses": ["_base"], "_base": []},
                       external={"_base": ["sklearn"]})
    direct = violations(imports, ["_engine"], ("_base",), ("sklearn",), through_imports=False)
    assert direct == []
    found = violations(imports, ["_engine"], ("_base",), ("sklearn",), through_imports=True)
    assert found == [
        "_engine: sklearn_nw/_base.py:2: import sklearn"
        "\n      reached through sklearn_nw/_losses.py:1: from ._base import x"
        "\n      reached through sklearn_nw/_engine.py:1: from ._losses import x",
        "_engine: sklearn_nw/_losses.py:1: from ._base import x"
        "\n      reached through sklearn_nw/_engine.py:1: from ._losses import x",
    ]


def test_cycles_are_found():
    assert cycles({"a": ["b"], "b": ["a"], "c": ["a"]}) == [["a", "b"]]
    assert cycles({"a": ["a"], "b": []}) == [["a"]]
    assert cycles({"a": ["b"], "b": ["c"], "c": ["b", "d"], "d": []}) == [["b", "c"]]
    assert cycles({"a": ["b"], "b": ["c"], "c": []}) == []
