"""Knowledge bundles of novel APIs: S parsed per docstring style, E verified against the new version
(failing and hanging examples dropped and counted), M prose and source with helpers inlined, the
drop reasons, and the knowledge text per evaluation cell."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from core.knowledge import CELL_PRESETS, cell_parts, render_knowledge
from data_pipeline.novel_api.bundles import build_bundles, make_spec
from data_pipeline.novel_api.docsnippets import find_examples

CORE = '''\
"""The tiny library's functions."""


def _traced(fn):
    return fn


def add(a: int, b: int = 2) -> int:
    """Add two numbers.

    The second one defaults to two.

    Parameters
    ----------
    a : int
        The first number.
    b : int, optional
        The second number.

    Returns
    -------
    int
        Their sum.

    Examples
    --------
    >>> add(1)
    3
    >>> x = add(2, 3)
    >>> x
    5
    """
    return a + b


def scale(x, factor=2.0):
    """Scale a value.

    Args:
        x (float): The value.
        factor: How much to multiply by.

    Returns:
        float: The scaled value.

    Example:
        >>> scale(2, 3)
        6
    """
    return x * factor


@_traced
def join(parts, sep="-"):
    """Join strings with a separator.

    Empty parts are kept.

    :param parts: the strings
    :type parts: list[str]
    :param sep: the separator
    :returns: the joined string
    :rtype: str

    >>> join(["a", "", "b"])
    'a--b'
    """
    return sep.join(parts)


def broken():
    """Claim the wrong result.

    >>> broken()
    2
    """
    return 1


def spin():
    """Never return.

    >>> while True: pass
    """


def quiet(x):
    """Do nothing, without an example."""
    return x


def render(value):
    """Render a value as text.

    .. code-block:: python

        from novlib import render
        assert render(3) == "<3>"

    ```python
    render(undefined_name)
    ```
    """
    return f"<{value}>"


def _deep():
    return 0


def _zero():
    """A helper's docstring."""
    return _deep()


def _sum_all(values):
    # a comment that survives
    acc = _zero()
    for v in values:
        acc += v
    return acc


def total(values):
    """Sum the values.

    >>> total([1, 2, 3]) + _zero()
    6
    """
    return _sum_all(values)


class Box:
    """A box with one value.

    >>> Box(2).get()
    2
    """

    def __init__(self, value):
        """Store the value."""
        self.value = value

    def get(self):
        """The value."""
        return self.value

    def ping(self):
        """Only a docstring."""
'''

INIT = '''"""novlib: a tiny library for the bundle tests."""

from novlib.core import Box, add, broken, join, quiet, render, scale, spin, total

__all__ = ["Box", "add", "broken", "join", "quiet", "render", "scale", "spin", "total"]
'''

GONE = '''def vanished(x):
    """Gone after discovery.

    >>> vanished(1)
    1
    """
    return x
'''

SIGNATURES = {
    "add": "(a: int, b: int = 2) -> int",
    "scale": "(x, factor=2.0)",
    "join": "(parts, sep='-')",
    "broken": "()",
    "spin": "()",
    "quiet": "(x)",
    "render": "(value)",
    "total": "(values)",
    "Box": "(value)",
}


def _definitions(path: Path) -> dict[str, ast.AST]:
    tree = ast.parse(path.read_text())
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}


def _row(name: str, node: ast.AST, source: Path, **extra) -> dict:
    lineno = min([node.lineno, *(d.lineno for d in node.decorator_list)])  # as co_firstlineno gives
    module = extra.pop("module", "novlib.core")
    return {
        "library": "novlib",
        "old_version": "1.0",
        "new_version": "2.0",
        "qualname": name,
        "canonical": f"{source.stem if source.stem != 'core' else 'novlib.core'}.{name}",
        "paths": [f"novlib.{name}", f"novlib.core.{name}"],
        "kind": "class" if isinstance(node, ast.ClassDef) else "function",
        "module": module,
        "signature": SIGNATURES.get(name),
        "doc": ast.get_docstring(node),
        "source_file": str(source),
        "lineno": lineno,
        "license": "MIT",
        "kept": True,
        "filter": None,
        **extra,
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("novel")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    package = site / "novlib"
    package.mkdir()
    (package / "__init__.py").write_text(INIT)
    (package / "core.py").write_text(CORE)
    (package / "gone.py").write_text(GONE)
    defs = _definitions(package / "core.py")
    rows = {name: _row(name, defs[name], package / "core.py") for name in SIGNATURES}
    rows["total"]["module"] = "novlib"  # its doctest's globals must still be novlib.core's (it uses _zero)
    rows["Box"]["license"] = "BSD-3-Clause"
    gone = _definitions(package / "gone.py")["vanished"]
    rows["vanished"] = _row("vanished", gone, package / "gone.py", module="novlib.gone", signature="(x)")
    rows["nosig"] = _row("nosig", defs["quiet"], package / "core.py", signature=None)
    rows["private"] = _row("_deep", defs["_deep"], package / "core.py", kept=False, filter="private")
    out = root / "out"
    out.mkdir()
    (out / "apis.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows.values()))
    python = {"old": str(venv / "bin" / "python"), "new": str(venv / "bin" / "python")}
    (out / "discovery.json").write_text(json.dumps({"python": python, "import_name": "novlib"}))
    (package / "gone.py").unlink()
    seen: list[tuple[int, int]] = []
    started = time.monotonic()
    manifest = build_bundles(out, timeout_s=2.0, progress=lambda done, total: seen.append((done, total)))
    seconds = time.monotonic() - started
    bundles = {b["qualname"]: b for b in map(json.loads, (out / "bundles.jsonl").read_text().splitlines())}
    return out, manifest, bundles, seen, seconds


def test_manifest_counts_every_api_and_example(built):
    out, manifest, bundles, seen, seconds = built
    assert json.loads((out / "bundles.json").read_text()) == manifest
    assert manifest["input"] == 11  # kept rows only
    assert manifest["kept"] == 6 == len(bundles)
    assert manifest["dropped"] == {"no_signature": 1, "source_unreadable": 1, "no_valid_example": 3}
    assert manifest["input"] == manifest["kept"] + sum(manifest["dropped"].values())
    # doctests of add, scale, join, broken, spin, total, Box; render's two snippets
    assert manifest["examples"] == {
        "examples_kept": 6,
        "example_failed": 2,
        "example_timeout": 1,
        "example_needs_network": 0,
        "example_needs_server": 0,
    }
    failures = {(f["qualname"], f["kind"], f["status"]) for f in manifest["example_failures"]}
    assert failures == {
        ("broken", "doctest", "failed"),
        ("spin", "doctest", "timeout"),
        ("render", "snippet", "failed"),
    }
    assert seen[-1] == (9, 9)
    assert sorted(bundles) == ["Box", "add", "join", "render", "scale", "total"]
    assert seconds < 20


def test_numpy_style_bundle_exactly(built):
    bundle = built[2]["add"]
    assert bundle == {
        "qualname": "add",
        "kind": "function",
        "library": "novlib",
        "version": "2.0",
        "license": "MIT",
        "paths": ["novlib.add", "novlib.core.add"],
        "module": "novlib.core",
        "S": {
            "name": "add",
            "signature": "add(a: int, b: int = 2) -> int",
            "params": [
                {"name": "a", "type": "int", "default": None, "description": "The first number."},
                {"name": "b", "type": "int", "default": "2", "description": "The second number."},
            ],
            "returns": {"type": "int", "description": "Their sum."},
        },
        "E": [
            {"code": "add(1)", "output": "3", "source": "doctest"},
            {"code": "x = add(2, 3)\nx", "output": "5", "source": "doctest"},
        ],
        "M": {
            "prose": "Add two numbers.\n\nThe second one defaults to two.",
            "code": "def add(a: int, b: int = 2) -> int:\n    return a + b",
        },
    }


def test_google_and_sphinx_styles(built):
    bundles = built[2]
    scale = bundles["scale"]["S"]
    assert scale["params"] == [
        {"name": "x", "type": "float", "default": None, "description": "The value."},
        {"name": "factor", "type": None, "default": "2.0", "description": "How much to multiply by."},
    ]
    assert scale["returns"] == {"type": "float", "description": "The scaled value."}
    assert bundles["scale"]["E"] == [{"code": "scale(2, 3)", "output": "6", "source": "doctest"}]
    assert bundles["scale"]["M"]["prose"] == "Scale a value."
    join = bundles["join"]
    assert join["S"]["params"] == [
        {"name": "parts", "type": "list[str]", "default": None, "description": "the strings"},
        {"name": "sep", "type": None, "default": "'-'", "description": "the separator"},
    ]
    assert join["S"]["returns"] == {"type": "str", "description": "the joined string"}
    assert join["E"] == [{"code": 'join(["a", "", "b"])', "output": "'a--b'", "source": "doctest"}]
    assert join["M"] == {
        "prose": "Join strings with a separator.\n\nEmpty parts are kept.",
        "code": '@_traced\ndef join(parts, sep="-"):\n    return sep.join(parts)',
    }


def test_snippets_run_and_only_clean_ones_are_kept(built):
    render = built[2]["render"]
    assert render["E"] == [
        {"code": 'from novlib import render\nassert render(3) == "<3>"', "output": "", "source": "docstring"}
    ]
    assert render["M"]["prose"] == "Render a value as text."
    assert "undefined_name" not in json.dumps(render)


def test_helpers_inlined_to_depth_two_and_docstrings_stripped(built):
    total = built[2]["total"]
    assert total["module"] == "novlib"
    assert total["E"] == [{"code": "total([1, 2, 3]) + _zero()", "output": "6", "source": "doctest"}]
    assert total["M"]["code"] == textwrap.dedent(
        """\
        def _zero():
            return _deep()


        def _sum_all(values):
            # a comment that survives
            acc = _zero()
            for v in values:
                acc += v
            return acc


        def total(values):
            return _sum_all(values)"""
    )
    box = built[2]["Box"]
    assert box["license"] == "BSD-3-Clause"
    assert box["S"]["signature"] == "Box(value)"
    assert box["M"]["code"] == textwrap.dedent(
        """\
        class Box:
            def __init__(self, value):
                self.value = value

            def get(self):
                return self.value

            def ping(self):
                ..."""
    )


def test_signature_text_with_reprs_and_markers():
    text = "(a, /, b: dict[str, int] = {'k': 1}, *, c=<object object at 0x7f>, **kw) -> 'X'"
    spec = make_spec({"qualname": "f", "signature": text}, None)
    assert [(p["name"], p["type"], p["default"]) for p in spec["params"]] == [
        ("a", None, None),
        ("b", "dict[str, int]", "{'k': 1}"),
        ("c", None, "<object object at 0x7f>"),
        ("**kw", None, None),
    ]
    assert spec["returns"] == {"type": "'X'", "description": None}
    assert make_spec({"qualname": "f", "signature": "no parens"}, None) is None


def test_examples_found_in_every_block_kind():
    found = find_examples(
        "Title.\n\nExample::\n\n    x = 1\n\n```py\ny = 2\n```\n\n.. code-block:: bash\n\n   ls\n\n"
        ">>> 1 + 1  # doctest: +SKIP\n2\n>>> 2 + 2\n4\n"
    )
    assert found.snippets == ["x = 1", "y = 2"]
    assert found.chunks == [("2 + 2", "4")]
    assert found.text == "Title.\n\nExample:\n\n.. code-block:: bash\n\n   ls"


BUNDLE = {
    "qualname": "add",
    "library": "novlib",
    "version": "2.0",
    "paths": ["novlib.add", "novlib.core.add"],
    "module": "novlib.core",
    "S": {
        "name": "add",
        "signature": "add(a: int, b: int = 2) -> int",
        "params": [
            {"name": "a", "type": "int", "default": None, "description": "The first number."},
            {"name": "b", "type": "int", "default": "2", "description": None},
        ],
        "returns": {"type": "int", "description": "Their sum."},
    },
    "E": [{"code": "from novlib import add\nadd(1)", "output": "3", "source": "doctest"}],
    "M": {
        "prose": "Add two numbers; add is fast.",
        "code": "def add(a: int, b: int = 2) -> int:\n    return a + b",
    },
}


def test_render_each_part():
    assert render_knowledge(BUNDLE, frozenset()) == ""
    assert render_knowledge(BUNDLE, CELL_PRESETS["name-only"]) == (
        "API: novlib.add (novlib 2.0)\nAlso importable as: novlib.core.add"
    )
    assert render_knowledge(BUNDLE, {"S_sig"}) == (
        "Signature: add(a: int, b: int = 2) -> int\nParameters:\n- a (int): The first number.\n"
        "- b (int, default 2)\nReturns: int: Their sum."
    )
    assert render_knowledge(BUNDLE, {"E"}) == (
        "Examples:\n```python\nfrom novlib import add\nadd(1)\n```\nOutput:\n```\n3\n```"
    )
    assert render_knowledge(BUNDLE, CELL_PRESETS["M"]) == "How it works:\nAdd two numbers; add is fast."
    assert render_knowledge(BUNDLE, CELL_PRESETS["M_code"]) == (
        "Source:\n```python\ndef add(a: int, b: int = 2) -> int:\n    return a + b\n```"
    )
    wrapped = {"name": "a", "type": None, "default": None, "description": "One.\nTwo."}
    multi = {**BUNDLE, "S": {**BUNDLE["S"], "params": [wrapped], "returns": None}}
    assert render_knowledge(multi, {"S_sig"}).endswith("Parameters:\n- a: One.\n  Two.")
    full = render_knowledge(BUNDLE, CELL_PRESETS["Full"])
    order = ["API:", "Signature:", "Parameters:", "Examples:", "How it works:", "Source:"]
    assert [full.index(h) for h in order] == sorted(full.index(h) for h in order)
    with pytest.raises(ValueError, match="unknown knowledge parts"):
        render_knowledge(BUNDLE, {"S"})


def test_the_studys_twelve_cells_ablate_prose_and_source_apart():
    assert len(CELL_PRESETS) == 12
    assert cell_parts("S+M") == {"S_name", "S_sig", "M_prose"}
    assert cell_parts("k1_full_mcode") == cell_parts("S+M_code") == {"S_name", "S_sig", "M_code"}
    assert cell_parts("k1a_k1b_k2_mcode") == {"S_name", "S_sig", "E", "M_code"}
    assert cell_parts("k1a_only") == {"S_name"}
    assert cell_parts("Full") == {"S_name", "S_sig", "E", "M_prose", "M_code"}
    with pytest.raises(ValueError, match="a preset"):
        cell_parts("S+X")


def test_render_stripped_masks_every_name():
    text = render_knowledge(BUNDLE, CELL_PRESETS["Full"], stripped=True)
    assert "add" not in text.replace("Add", "")
    assert "API: <API> (novlib 2.0)\nAlso importable as: <API>" in text
    assert "Signature: <API>(a: int" in text
    assert "from novlib import <API>\n<API>(1)" in text
    assert "Add two numbers; <API> is fast." in text
    assert "def <API>(a: int" in text
    assert "address" in render_knowledge({**BUNDLE, "M": {"prose": "address", "code": ""}}, {"M_prose"}, True)


SDIST = {
    "novlib-2.0/tests/test_core.py": """import pytest
from novlib.core import quiet, spin
from not_installed_helpers import IsStr  # a test dependency no mined program reads

LIMIT = 3


def _double(v):
    return 2 * v


def test_quiet_returns_its_argument():
    value = _double(LIMIT)
    assert quiet(value) == 6


def test_needs_a_fixture(tmp_path):
    assert quiet(tmp_path) == tmp_path


def test_uses_pytest():
    with pytest.raises(TypeError):
        quiet()


class TestSpin:
    def test_spin_is_slow(self):
        spin()
""",
    "novlib-2.0/docs/usage.rst": """Usage
=====

Boxes hold a value:

.. code-block:: python

    from novlib.core import Box
    box = Box(4)
    assert box.get() == 4

A broken block is dropped:

.. code-block:: python

    from novlib.core import Box
    Box(1, 2, 3)
""",
    "novlib-2.0/src/novlib/core.py": "def quiet(x):\n    return x\n",
}


def _sdist(path: Path) -> Path:
    return write_sdist(path, SDIST)


def write_sdist(path: Path, files: dict[str, str]) -> Path:
    """A .tar.gz holding `files` (paths inside it, with their top folder) as an sdist does."""
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_examples_mined_from_a_test_function_and_an_rst_block_become_validated_examples(built, tmp_path):
    import shutil

    from data_pipeline.novel_api.mining import mine_sdist, read_sdist, test_programs

    out, _, _, _, _ = built
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    rows = [json.loads(line) for line in (copy / "apis.jsonl").read_text().splitlines()]
    sdist = _sdist(tmp_path / "novlib-2.0.tar.gz")
    files = read_sdist(sdist)
    assert "tests/test_core.py" in files and "docs/usage.rst" in files  # the top folder dropped
    programs = {t.line: t.code for t in test_programs("tests/test_core.py", files["tests/test_core.py"])}
    # no fixture: the first test, the one whose pytest.raises became a try, the Test class's method
    assert list(programs) == [12, 21, 27]
    assert "except TypeError:\n    pass\nelse:\n    raise AssertionError" in programs[21]
    # only the imports the program reads: not spin, not the test dependency
    assert programs[12] == (
        "from novlib.core import quiet\nLIMIT = 3\n\ndef _double(v):\n    return 2 * v\n"
        "value = _double(LIMIT)\nassert quiet(value) == 6\n"
    )
    mined = mine_sdist(sdist, [r for r in rows if r.get("kept")]).examples
    assert {q: [m.origin for m in ms] for q, ms in mined.items()} == {
        "quiet": ["tests/test_core.py:12", "tests/test_core.py:21"],  # the shortest first
        "spin": ["tests/test_core.py:27"],
        "Box": ["docs/usage.rst:16", "docs/usage.rst:8"],  # the shortest first
    }
    manifest = build_bundles(copy, timeout_s=2.0, mined=mined)
    bundles = {b["qualname"]: b for b in map(json.loads, (copy / "bundles.jsonl").read_text().splitlines())}
    quiet = bundles["quiet"]["E"]  # no docstring example: kept for its tests
    assert quiet[0] == {
        "code": programs[12],
        "output": "",
        "source": "tests",
        "origin": "tests/test_core.py:12",
    }
    assert [e["origin"] for e in quiet] == ["tests/test_core.py:12", "tests/test_core.py:21"]
    box = [e for e in bundles["Box"]["E"] if e["source"] == "docs"]
    assert [e["origin"] for e in box] == ["docs/usage.rst:8"]  # the broken block did not run
    # spin's doctest hangs, its test runs: a bundle now
    assert [(e["source"], e["origin"]) for e in bundles["spin"]["E"]] == [("tests", "tests/test_core.py:27")]
    assert manifest["kept"] == 8 and manifest["dropped"]["no_valid_example"] == 1  # broken only
    assert manifest["example_sources"]["tests"] == 3 and manifest["example_sources"]["docs"] == 1
    assert manifest["mined_examples"] == 5


CONFTEST = """import itertools
from itertools import chain
import novlib as nl
import pytest

@pytest.fixture(autouse=True)
def add_doctest_imports(doctest_namespace):
    doctest_namespace["nl"] = nl
    doctest_namespace["chain"] = chain
    doctest_namespace["it"] = itertools
    doctest_namespace["made"] = make()  # no import binds it: not taken
"""

ALIASED = '''def twice(x):
    """Twice x; its doctest takes `nl` and `chain` from the project's doctest namespace.

    >>> list(chain([twice(1)], [nl.add(1, 1)]))
    [2, 2]
    """
    return 2 * x
'''


def test_doctests_that_take_the_projects_doctest_namespace_for_granted_run_with_its_imports(built, tmp_path):
    """pandas' docstrings use `pd` unimported: its conftest puts it in every doctest. The names come
    from the sdist's conftest.py, and each example that uses one gets its import written in."""
    from data_pipeline.novel_api.mining import doctest_namespace
    from data_pipeline.novel_api.tasks import drafts

    namespace = doctest_namespace({"conftest.py": CONFTEST, "docs/conftest.py": "x = (", "a.py": CONFTEST})
    assert namespace == {
        "nl": "import novlib as nl",
        "chain": "from itertools import chain",
        "it": "import itertools as it",
    }
    out, _, _, _, _ = built
    python = json.loads((out / "discovery.json").read_text())["python"]["new"]
    module = next(Path(python).parents[1].glob("lib/python*/site-packages")) / "novlib" / "aliased.py"
    module.write_text(ALIASED)
    row = _row("twice", _definitions(module)["twice"], module, module="novlib.aliased", signature="(x)")
    results = {}
    for label, given in (("without", None), ("with", namespace)):
        folder = tmp_path / label
        folder.mkdir()
        (folder / "apis.jsonl").write_text(json.dumps(row) + "\n")
        (folder / "discovery.json").write_text((out / "discovery.json").read_text())
        results[label] = build_bundles(folder, timeout_s=5.0, namespace=given)
    assert results["without"]["kept"] == 0  # NameError: nl
    assert results["with"]["kept"] == 1 and results["with"]["doctest_namespace"] == namespace
    bundle = json.loads((tmp_path / "with" / "bundles.jsonl").read_text())
    code = bundle["E"][0]["code"]
    assert (
        code.startswith("from itertools import chain\nimport novlib as nl\n")
        and "itertools as it" not in code
    )
    assert "import novlib as nl" in drafts(bundle)[0].reference  # the task stands alone too


def test_prose_drops_lines_left_dangling_by_removed_examples():
    from data_pipeline.novel_api.bundles import prose

    text = "Chunk a list.\n\nTo split ten items in threes:\n\nSee also the docs.\n\nLike this::"
    assert prose(None, text) == "Chunk a list.\n\nSee also the docs."
    kept = "Options:\n  - a: one\n  - b: two\nAnd a closing line."
    assert prose(None, kept) == kept  # an introduction with its block still there stays


def test_a_class_without_a_signature_takes_its_bases_arguments():
    """An exception class inherits a builtin __init__ that inspect cannot describe."""
    spec = make_spec({"qualname": "lib.InvalidName", "kind": "class", "signature": None}, None)
    assert spec["signature"] == "lib.InvalidName(*args, **kwargs)"
    assert make_spec({"qualname": "lib.f", "kind": "function", "signature": None}, None) is None


def test_an_example_sees_the_librarys_top_level_names(built):
    """A snippet listed under a submodule that uses a name only the package's top level exports."""
    from data_pipeline.novel_api.docsnippets import OK, Unit, run_examples

    python = json.loads((built[0] / "discovery.json").read_text())["python"]["new"]
    site = next(Path(python).parents[1].glob("lib/python*/site-packages"))
    (site / "novlib" / "extra.py").write_text("def helper():\n    return 1\n")
    units = [
        Unit("snippet", "novlib.extra", "helper", "assert add(1) == 3 and helper() == 1"),
        Unit("doctest", "novlib.extra", "helper", ">>> add(1) + helper()\n4\n"),
    ]
    assert [o.status for o in run_examples(python, units, 5.0)] == [OK, OK]


def test_a_doctest_written_before_numpy_2_passes_with_numpys_1_25_printing():
    """pandas 2.2's docstrings show `[0.0, 1.0]` where numpy 2 prints `np.float64(0.0)`: the runner
    tries numpy's legacy printing once, then restores it; a wrong value still fails."""
    import sys

    from data_pipeline.novel_api.docsnippets import FAILED, OK, Unit, run_examples

    numpy = pytest.importorskip("numpy")
    if int(numpy.__version__.split(".")[0]) < 2:
        pytest.skip("needs numpy 2")
    old_style = ">>> import numpy as np\n>>> [np.float64(0.5), np.int64(2)]\n[0.5, 2]\n"
    units = [
        Unit("doctest", "numpy", "numpy.float64", old_style),
        Unit("doctest", "numpy", "numpy.float64", ">>> import numpy as np\n>>> np.float64(0.5)\n0.75\n"),
        Unit(
            "doctest",
            "numpy",
            "numpy.float64",
            ">>> import numpy as np\n>>> np.float64(0.5)\nnp.float64(0.5)\n",
        ),
    ]
    assert [o.status for o in run_examples(sys.executable, units, 10.0)] == [OK, FAILED, OK]
