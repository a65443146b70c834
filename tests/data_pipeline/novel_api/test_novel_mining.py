"""Test programs mined from a library's suite the way its authors wrote it: `params=` fixtures,
`pytest.raises(...) as info`, conftest helpers set up in a `try` or from `__file__`, and a method
called on an object the test never names (falcon's `req.get_header_as_int`)."""

from __future__ import annotations

import ast
import subprocess
import sys

from data_pipeline.novel_api import mining
from data_pipeline.novel_api.docsnippets import bound_names, defined_names, free_names
from data_pipeline.novel_api.mining import PER_API, TRIED_PER_API, Mined, mine

CONFTEST = """import pytest

try:
    import no_such_speedups  # noqa: F401
    FAST = True
except ImportError:
    FAST = False


@pytest.fixture(params=["remote", pytest.param("local", id="local")])
def where(request):
    return request.param


@pytest.fixture
def reader(where):
    return {"where": where, "fast": FAST}
"""
TESTS = """import pytest


def test_reader_sees_its_variant(reader):
    assert reader["where"] in ("remote", "local")


def test_caught_error_is_read(reader):
    with pytest.raises(KeyError) as info:
        reader["missing"]
    assert info.value.args == ("missing",)
    assert info.type is KeyError
"""


def _run(program: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=False)


def test_a_params_fixture_gives_one_program_per_param_at_the_tests_line():
    programs = [(t.line, t.code) for t in mining.test_programs("tests/test_reader.py", TESTS, [CONFTEST])]
    first = [p for line, p in programs if line == 4]
    assert len(first) == 2, programs
    assert "return 'remote'" in first[0] and "return 'local'" in first[1]  # pytest.param's value
    assert all("request" not in p and "FAST = False" in p for p in first)  # the `try` helper comes along
    assert all(_run(p).returncode == 0 for p in first)


def test_a_fixture_reading_more_of_request_than_its_param_drops_the_test():
    conftest = CONFTEST.replace("return request.param", "return request.node.name")
    assert mining.test_programs("tests/test_reader.py", TESTS, [conftest]) == []


def test_pytest_raises_as_info_binds_value_and_type_and_still_fails_when_nothing_raises():
    programs = [
        t.code for t in mining.test_programs("tests/test_reader.py", TESTS, [CONFTEST]) if t.line == 8
    ]
    assert programs and "import types" in programs[0] and "pytest" not in programs[0]
    assert _run(programs[0]).returncode == 0
    silent = programs[0].replace("reader['missing']", "reader['where']")
    failed = _run(silent)
    assert failed.returncode != 0 and "did not raise" in failed.stderr


def test_a_tests_variants_share_one_of_the_apis_example_slots():
    conftest = CONFTEST.replace('"remote", pytest.param("local", id="local")', '"a", "b", "c"')
    files = {"tests/conftest.py": conftest}
    for n in range(TRIED_PER_API + 1):
        files[f"tests/test_{n}.py"] = f"import novlib\n\n\ndef test_{n}(reader):\n    novlib.shout(reader)\n"
    found = mine(files, [{"qualname": "novlib.shout", "kind": "function", "module": "novlib"}])[
        "novlib.shout"
    ]
    assert len({m.origin for m in found}) == TRIED_PER_API and len(found) == 3 * TRIED_PER_API


def test_a_bundle_keeps_the_first_variant_and_the_first_examples_per_source_that_run():
    from types import SimpleNamespace

    from data_pipeline.novel_api.bundles import _verified_examples

    mined = [Mined(f"v{i}", "tests", f"t.py:{i // 2}") for i in range(2 * (PER_API + 2))]  # two variants each
    mined.append(Mined("page", "docs", "d.rst:1"))
    draft = SimpleNamespace(examples=SimpleNamespace(doctest="", snippets=[], chunks=[]), mined=mined)
    # origin 0 fails both ways, origin 1 runs its second variant only, the rest run
    passed = [i >= 3 for i in range(len(mined) - 1)] + [True]
    kept = _verified_examples(draft, passed)
    tests = [e for e in kept if e["source"] == "tests"]
    assert [e["origin"] for e in tests] == [f"t.py:{n}" for n in range(1, PER_API + 1)]
    assert [e["code"] for e in tests][:2] == ["v3", "v4"]  # origin 1's second variant, origin 2's first
    assert [e["code"] for e in kept if e["source"] == "docs"] == ["page"]


def test_a_distinctive_method_name_is_found_without_its_class_but_a_short_one_is_not():
    text = (
        "import novlib\n\n\ndef test_headers():\n    req = novlib.make()\n"
        "    assert req.get_header_as_int('X') == 1\n    assert req.copy() is not req\n"
    )
    apis = [
        {"qualname": "novlib.Request.get_header_as_int", "kind": "method", "module": "novlib"},
        {"qualname": "novlib.Request.copy", "kind": "method", "module": "novlib"},
    ]
    found = mine({"tests/test_req.py": text}, apis)
    assert set(found) == {"novlib.Request.get_header_as_int"}


def test_names_bound_in_a_scope_resolve_there_and_a_scripts_file_is_not_free():
    tree = ast.parse(
        "def to_coroutine(f):\n    async def wrapper(*a):\n        return f(*a)\n    return wrapper\n"
        "try:\n    import fastjson as json\nexcept ImportError as missing:\n    json = None\n"
        "HERE = __file__\nprint(missing, json, HERE, elsewhere, [y for y in range(2)], lambda z: z)\n"
    )
    bound = bound_names(tree.body)
    assert {"to_coroutine", "json", "missing", "HERE"} <= bound and "wrapper" not in bound
    assert free_names(tree.body, bound) == ["elsewhere"]
    assert defined_names(tree.body[1]) == {"json"}  # what a top-level `try` defines or imports


def test_a_test_whose_own_lines_call_the_method_comes_before_shorter_ones_whose_fixtures_name_its_class():
    """pandas' `Index.diff`: `frame.diff(-1)` tests whose fixture builds an `Index` are shorter than
    the test that calls `idx.diff(periods)` itself, and never call the API."""
    conftest = "import pytest\nimport novlib\n\n\n@pytest.fixture\ndef frame():\n    return novlib.Frame(novlib.Index([1]))\n"
    files = {"tests/conftest.py": conftest}
    for n in range(TRIED_PER_API):
        files[f"tests/test_frame_{n}.py"] = f"def test_frame(frame):\n    frame.diff({n})\n"
    files["tests/test_index.py"] = (
        "import novlib\n\n\ndef test_index_diff():\n    idx = novlib.Index([10, 20, 30, 40, 50])\n"
        "    result = idx.diff(1)\n    assert list(result)[1:] == [10, 10, 10, 10]\n"
    )
    found = mine(files, [{"qualname": "novlib.Index.diff", "kind": "method", "module": "novlib"}])[
        "novlib.Index.diff"
    ]
    assert found[0].origin == "tests/test_index.py:4" and len(found[0].code) > len(found[1].code)
    assert "idx.diff(1)" in found[0].body and "Frame" not in found[0].body


def test_a_conftest_name_the_test_binds_itself_brings_no_helper():
    """pandas' conftest sets `idx` in an `if has_pyarrow:` block beside a hundred-line dict; a
    test that writes its own `idx = Index(...)` needs neither."""
    conftest = (
        "import novlib\n\ntry:\n    import pyarrow\n    has_pyarrow = True\nexcept ImportError:\n"
        "    has_pyarrow = False\nindices = {'big': novlib.Index(list(range(100)))}\n"
        "if has_pyarrow:\n    idx = novlib.Index(['x'])\n    indices['arrow'] = idx\n"
    )
    test = "import novlib\n\n\ndef test_round():\n    idx = novlib.Index([1.5])\n    assert list(idx.round(0)) == [2.0]\n"
    (program,) = mining.test_programs("tests/test_index.py", test, [conftest])
    assert program.code == "import novlib\nidx = novlib.Index([1.5])\nassert list(idx.round(0)) == [2.0]\n"


def test_a_name_a_fixture_binds_locally_still_brings_the_modules_helper():
    """A fixture's own `app = ...` or `import numpy as np` binds nothing at module level: the
    body's `app.add_route` and `np.arange` still need the module's `app` and import."""
    text = (
        "import numpy as np\nimport pytest\nimport mylib\n\napp = mylib.App()\n\n\n@pytest.fixture\n"
        "def client():\n    import numpy as np\n    app = mylib.App(testing=True)\n    return mylib.Client(app, np)\n\n\n"
        "def test_a(client):\n    app.add_route('/', lambda make: make)\n    assert np.arange(2).sum() == 1\n"
    )
    (program,) = mining.test_programs("tests/test_app.py", text, [])
    assert "app = mylib.App()\n" in program.code and program.code.startswith("import numpy as np\n")


def test_a_page_block_reading_np_gets_the_import_not_a_function_that_imports_it_locally():
    page = (
        ".. code-block:: python\n\n    import numpy as np\n\n"
        ".. code-block:: python\n\n    def show(a):\n        import numpy as np\n        return np.asarray(a)\n\n"
        ".. code-block:: python\n\n    print(np.arange(3))\n"
    )
    last = [code for _, code in mining.doc_programs(page)][-1]
    assert last == "import numpy as np\nprint(np.arange(3))", last


def test_odd_params_fixtures_and_a_main_guard_are_left_out_not_raised():
    deep = " + ".join(['"a"'] * 400)
    text = (
        "import pytest\nimport sys\nimport mylib\n\n\n@pytest.fixture(params=[1, 2])\ndef val():\n"
        f"    return {deep}\n\n\n@pytest.fixture(params=[*range(3)])\ndef star(request):\n    return request.param\n\n\n"
        "def test_uses_sys():\n    assert mylib.ok(sys.argv)\n\n\n"
        "if __name__ == '__main__':\n    import sys\n    sys.exit(pytest.main([__file__]))\n"
    )
    programs = mining.test_programs("tests/test_odd.py", text, [])  # no RecursionError
    assert [p.code for p in programs] == ["import sys\nimport mylib\nassert mylib.ok(sys.argv)\n"]


def test_a_caught_error_namespace_never_collides_with_a_tests_own_types():
    text = (
        "import pytest\nfrom sqlalchemy import types\n\n\ndef test_t():\n    with pytest.raises(TypeError) as info:\n"
        "        types.Integer(1, 2, 3)\n    assert info.type is TypeError\n"
    )
    (program,) = mining.test_programs("tests/test_types.py", text, [])
    assert "from sqlalchemy import types\nimport types as _types\n" in program.code
    assert "info = _types.SimpleNamespace(" in program.code


def test_params_combinations_try_every_fixtures_second_variant_first():
    from data_pipeline.novel_api.mining import _combinations

    assert _combinations([2, 4]) == [(0, 0), (0, 1), (1, 0), (1, 1)]
