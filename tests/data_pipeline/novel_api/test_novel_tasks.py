"""Novel-API tasks from a bundle: three levels, descriptions that never name the API, tests built by
running the reference under the spy with the library's own interpreter, C1, and the spy failing a
solution that reimplements the API instead of calling it."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from core.benchmarks.novelapi import CANDIDATE_FILE, program, read_spy
from core.sandbox import make_sandbox
from data_pipeline.novel_api.tasks import TODO, build_tasks, drafts

NOVLIB = {
    "__init__.py": "from novlib.fields import Upper, load, tagged\nfrom novlib.text import slugify\n",
    # a class used as a type: `load` builds each field by calling its annotation
    "fields.py": (
        "class Upper(str):\n    def __new__(cls, value):\n        return str.__new__(cls, value.upper())\n\n\n"
        "def load(schema, data):\n"
        "    return {name: kind(data[name]) for name, kind in schema.__annotations__.items()}\n\n\n"
        "def tagged(label):\n    def apply(cls):\n        cls.label = label\n        return cls\n    return apply\n"
    ),
    "text.py": (
        "def _clean(text):\n    return ''.join(c if c.isalnum() else ' ' for c in text.lower())\n\n\n"
        "def slugify(text, sep='-', max_len=None):\n"
        "    words = _clean(text).split()\n    out = sep.join(words)\n"
        "    return out[:max_len] if max_len else out\n\n\n"
        "def title_slug(text):\n    return slugify(text.title(), sep='_')\n"
    ),
}


def make_novlib_python(root: Path) -> str:
    """A virtualenv in `root` whose site-packages hold the novlib library; its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "env")], check=True)
    site = next((root / "env" / "lib").glob("python*/site-packages"))
    (site / "novlib").mkdir()
    for name, text in NOVLIB.items():
        (site / "novlib" / name).write_text(text)
    return str(root / "env" / "bin" / "python")


@pytest.fixture(scope="module")
def python(tmp_path_factory) -> str:
    return make_novlib_python(tmp_path_factory.mktemp("novlib-env"))


@pytest.fixture(scope="module")
def sandbox(python):
    with make_sandbox(workers=2, python=python) as sb:
        yield sb


BUNDLE = {
    "qualname": "novlib.text.slugify",
    "library": "novlib",
    "version": "2.0",
    "module": "novlib.text",
    "paths": ["novlib.slugify", "novlib.text.slugify"],
    "S": {"name": "novlib.text.slugify", "signature": "slugify(text, sep='-', max_len=None)"},
    "E": [
        {"code": "print('no call here')", "output": "no call here\n"},
        {"code": "title = 'Hello, World'\nslugify(title, sep='+', max_len=8)", "output": "'hello+wo'"},
    ],
    "M": {
        "prose": "Turn text into a URL slug with slugify(). Non-alphanumerics become separators.",
        "code": "",
    },
}


def test_three_levels_pass_c1_and_never_name_the_api(sandbox):
    tasks, manifest = build_tasks([BUNDLE], sandbox)
    assert [t["level"] for t in tasks] == [1, 2, 3] and all(t["c1"] for t in tasks)
    assert manifest["dropped"] == {}
    for task in tasks:
        assert "slugify" not in task["description"].lower()
        assert TODO in task["context"] and TODO not in task["reference"]
        assert "'hello+wo'" in task["tests"]
        assert task["reference_calls"] == [
            {"args": ["'Hello, World'"], "kwargs": {"sep": "'+'", "max_len": "8"}}
        ]
    l1, l2, l3 = tasks
    assert "import novlib.text" in l1["context"] and "import novlib.text" not in l2["context"]
    assert "title = 'Hello, World'" in l1["context"] and "title" not in l3["context"]


def _run(sandbox, code, task):
    result = sandbox.run(
        program(code, task["paths"]), task["tests"], candidate_file=CANDIDATE_FILE, channel=True
    )
    return result, read_spy(result.channel)


def test_the_spy_fails_a_reimplementation_and_accepts_every_alias(sandbox):
    task = build_tasks([BUNDLE], sandbox)[0][1]  # L2: solve(arg0, arg1)
    assert task["reference"].count("novlib.text.slugify(") == 1
    reimplemented = (
        "def solve(arg0, arg1):\n    title = 'Hello, World'\n"
        "    words = ''.join(c if c.isalnum() else ' ' for c in title.lower()).split()\n"
        "    return arg0.join(words)[:arg1]\n"
    )
    result, spy = _run(sandbox, reimplemented, task)
    assert (
        not result.passed
        and spy["calls"] == []
        and spy["error"]["message"] == "the target API was never called"
    )
    through_a_library_helper = (
        "import novlib.text\ndef solve(arg0, arg1):\n    return novlib.text.title_slug('x')\n"
    )
    result, spy = _run(sandbox, through_a_library_helper, task)
    assert not result.passed and spy["calls"] == []  # the library's own call does not count
    alias = "from novlib import slugify\ndef solve(arg0, arg1):\n    return slugify('Hello, World', sep=arg0, max_len=arg1)\n"
    result, spy = _run(sandbox, alias, task)
    assert result.passed, result.stderr
    assert spy["calls"] == [{"args": ["'Hello, World'"], "kwargs": {"sep": "'+'", "max_len": "8"}}]
    wrong_type = "from novlib import slugify\ndef solve(a, b):\n    return list(slugify('Hello, World', sep=a, max_len=b))\n"
    result, _ = _run(sandbox, wrong_type, task)
    assert not result.passed and "expected 'hello+wo' (str), got [" in result.stderr


TYPED_EXAMPLE = """from novlib import Upper, load
record = {'name': 'ada', 'age': '36'}

class Person:
    name: Upper
    age: int
assert load(Person, record) == {'name': 'ADA', 'age': 36}
"""
TYPED = {
    "qualname": "novlib.fields.Upper",
    "kind": "class",
    "library": "novlib",
    "version": "2.0",
    "module": "novlib.fields",
    "paths": ["novlib.Upper", "novlib.fields.Upper"],
    "S": {"name": "novlib.fields.Upper", "signature": "Upper(value)"},
    "E": [{"code": TYPED_EXAMPLE, "output": "", "source": "tests"}],
    "M": {"prose": "A field type whose values Upper upper-cases.", "code": ""},
}


def test_a_class_used_as_a_type_becomes_a_task_that_needs_it(sandbox):
    """pydantic's `a: ClickHouseDsn`: the example never calls the class. The masked span is the
    statement that names it, the result the value the example checks; the reference passes, and
    fails with the class replaced by a bare one. A sample with a look-alike type of its own passes
    both runs, so the evaluation's second run rejects it."""
    tasks, manifest = build_tasks([TYPED], sandbox)
    assert [(t["id"], t["use"]) for t in tasks] == [("novlib.fields.Upper/L1", "type")], manifest
    task = tasks[0]
    assert "Upper" not in task["context"] and "Upper" not in task["description"]
    assert "from novlib import load\n" in task["context"] and "`Person`" in task["description"]
    assert "        name: novlib.fields.Upper\n" in task["reference"] and TODO in task["context"]
    own = (
        task["reference"]
        .replace("novlib.fields.Upper", "Mine")
        .replace(
            "def solve",
            "class Mine(str):\n    def __new__(cls, v):\n        return str.__new__(cls, v.upper())\n\n\ndef solve",
        )
    )
    for code, needs_it in ((task["reference"], True), (own, False)):
        runs = [
            sandbox.run(program(code, task["paths"], absent=absent, use="type"), task["tests"],
                        candidate_file=CANDIDATE_FILE, channel=True)
            for absent in (False, True)
        ]  # fmt: skip
        assert runs[0].passed and runs[1].passed is not needs_it, runs[1].stderr[-600:]
    # a class that takes its arguments in __new__ only: a direct call is recorded, and still runs
    called = "import novlib\ndef solve():\n    return {'name': novlib.Upper('ada'), 'age': 36}\n"
    result = sandbox.run(
        program(called, task["paths"], use="type"), task["tests"], candidate_file=CANDIDATE_FILE, channel=True
    )
    assert result.passed and read_spy(result.channel)["calls"] == [{"args": ["'ada'"], "kwargs": {}}]
    # the class named after the masked statement too (the context would give it away): no task
    shown = {
        **TYPED,
        "E": [
            {
                **TYPED["E"][0],
                "code": TYPED_EXAMPLE + "assert isinstance(load(Person, record)['name'], Upper)\n",
            }
        ],
    }
    assert [d.id for d in drafts(shown)] == ["novlib.fields.Upper/L1"]  # the first check is still the result
    leaked = {
        **TYPED,
        "E": [{**TYPED["E"][0], "code": TYPED_EXAMPLE.replace("assert load", "assert Upper and load")}],
    }
    assert drafts(leaked) == [] and [d.use for d in drafts({**TYPED, "kind": "function"})] == ["call"]


def test_a_function_called_as_a_decorator_becomes_a_task_on_its_statement(sandbox):
    """pydantic's `@with_config(ConfigDict(...))` on a class: the call runs at top level, but its
    value is a decorator; the task masks the decorated class, and the spy still sees the call."""
    example = "from novlib import tagged\n\n@tagged('x')\nclass Thing:\n    pass\nassert Thing.label == 'x'\n"
    bundle = {**TYPED, "qualname": "novlib.fields.tagged", "kind": "function", "paths": ["novlib.tagged", "novlib.fields.tagged"],
              "E": [{"code": example, "output": "", "source": "tests"}], "S": {"name": "novlib.fields.tagged", "signature": "tagged(label)"}}  # fmt: skip
    tasks, manifest = build_tasks([bundle], sandbox)
    assert [(t["id"], t["use"]) for t in tasks] == [("novlib.fields.tagged/L1", "call")], manifest
    assert "    @novlib.fields.tagged('x')\n    class Thing:" in tasks[0]["reference"]
    assert tasks[0]["reference_calls"] == [{"args": ["'x'"], "kwargs": {}}]


def test_a_type_task_whose_reference_passes_without_the_class_is_dropped(sandbox):
    """A class named in an annotation nobody reads: the reference passes with it taken away."""
    idle = TYPED_EXAMPLE.replace(
        "assert load(Person, record) == {'name': 'ADA', 'age': 36}", "assert len(record) == 2"
    )
    tasks, manifest = build_tasks([{**TYPED, "E": [{**TYPED["E"][0], "code": idle}]}], sandbox)
    assert tasks == [] and manifest["dropped"] == {"type_not_needed": 1}


def test_unusable_bundles_are_counted(sandbox):
    no_call = {**BUNDLE, "E": [BUNDLE["E"][0]]}
    raises = {**BUNDLE, "qualname": "novlib.text.slugify", "E": [{"code": "slugify(None)", "output": ""}]}
    tasks, manifest = build_tasks([no_call, raises], sandbox)
    assert tasks == []
    assert manifest["dropped"] == {"no_usable_example": 1, "reference_fails": 3}  # per task (L1-L3)
    assert Counter(d.level for d in drafts(BUNDLE)) == Counter({1: 1, 2: 1, 3: 1})
    # each failed reference says why, in the manifest (tasks.json)
    failures = manifest["reference_failures"]
    assert [f["id"].rsplit("/", 1)[-1] for f in failures] == ["L1", "L2", "L3"]
    assert all(f["reason"] == "reference_fails" and "Error" in f["why"] for f in failures), failures


@pytest.mark.parametrize(
    "code",
    [
        # a call the signature rejects, then a hard-coded answer
        "import novlib.text\ndef solve(arg0, arg1):\n    try:\n        novlib.text.slugify()\n"
        "    except TypeError:\n        pass\n    return 'hello+wo'\n",
        # a call at import time only
        "import novlib.text\nnovlib.text.slugify('x')\ndef solve(arg0, arg1):\n    return 'hello+wo'\n",
        # the tests skipped by replacing exec in __main__
        "import sys, novlib.text\nsys.modules['__main__'].exec = lambda *a, **k: None\ndef solve(arg0, arg1):\n"
        "    novlib.text.slugify('x')\n    return 1\n",
    ],
)
def test_the_spy_is_not_fooled(sandbox, code):
    task = build_tasks([BUNDLE], sandbox)[0][1]
    result, spy = _run(sandbox, code, task)
    assert not result.passed


def test_descriptions_keep_the_first_sentence_whole():
    from data_pipeline.novel_api.tasks import first_sentence

    assert first_sentence("Split a list, e.g. into chunks. Then more.") == "Split a list, e.g. into chunks."
    assert first_sentence("Read version 2.0 files.\nOther text.") == "Read version 2.0 files."
    assert first_sentence("One line without a stop") == "One line without a stop"
    assert first_sentence("") == ""


def test_an_object_with_the_default_repr_is_compared_by_its_attributes():
    """Its repr holds an address that changes every run; its type and attributes do not."""
    from data_pipeline.novel_api.tasks import NORM

    namespace: dict = {}
    exec(NORM.format(), namespace)
    norm = namespace["_norm"]

    class Parsed:
        def __init__(self, raw):
            self._raw, self.count = raw, 1

    assert norm(Parsed({"name": "x"})) == ("Parsed", {"_raw": {"name": "x"}, "count": 1})
    assert norm([Parsed(1), iter([2])]) == [("Parsed", {"_raw": 1, "count": 1}), [2]]
    assert norm(Parsed(1)) != norm(Parsed(2))


def test_the_target_call_runs_at_top_level_and_setup_classes_are_bound():
    """An example from a test: a class defined before the call is setup, not an import; a call of
    the API inside a function it defines is not the one a task can use."""
    from data_pipeline.novel_api.tasks import drafts

    code = "class Model:\n    size = 2\n\ndef later():\n    return api(0)\n\nm = Model()\nout = api(m)\n"
    bundle = {"qualname": "lib.mod.api", "module": "lib.mod", "library": "lib", "paths": ["lib.mod.api"],
              "M": {"prose": "Apply it."}, "E": [{"code": code, "output": "", "source": "tests"}]}  # fmt: skip
    first = drafts(bundle)[0]
    assert "from lib.mod import" not in first.reference  # Model and later are the example's own
    assert "class Model:" in first.reference and "result = lib.mod.api(m)" in first.reference


def test_a_lambda_parameter_or_comprehension_target_in_the_call_is_not_imported():
    """pandas' `df.map(lambda x: len(str(x)))`: `x` is the lambda's own, not a module name."""
    from data_pipeline.novel_api.tasks import drafts

    code = "import lib\nd = lib.Frame()\nout = d.api(lambda x: len(str(x)), [y for y in d])\n"
    bundle = {"qualname": "lib.Frame.api", "module": "lib.mod", "library": "lib", "paths": ["lib.Frame.api"],
              "M": {"prose": "Apply it."}, "E": [{"code": code, "output": "", "source": "doctest"}]}  # fmt: skip
    reference = drafts(bundle)[0].reference
    assert (
        "from lib.mod import" not in reference and "d.api(lambda x: len(str(x)), [y for y in d])" in reference
    )


def test_a_method_is_mined_only_where_its_class_is_named():
    from data_pipeline.novel_api.mining import mine

    files = {"tests/test_a.py": "from lib import Schema, other\n\ndef test_one():\n    other.build()\n\n"
             "def test_two():\n    Schema().build()\n"}  # fmt: skip
    found = mine(files, [{"qualname": "lib.Schema.build", "kind": "method", "module": "lib"}])
    assert [m.origin for m in found["lib.Schema.build"]] == ["tests/test_a.py:6"]


def test_a_parametrized_test_is_mined_with_its_first_case_bound():
    from data_pipeline.novel_api.mining import test_programs

    source = (
        "import pytest\nfrom lib import f\n\n"
        '@pytest.mark.parametrize("x, expected", [(1, 2), (3, 4)])\ndef test_a(x, expected):\n'
        "    assert f(x) == expected\n\n"
        '@pytest.mark.parametrize("v", [pytest.param(5, id="five")])\ndef test_b(v):\n    assert f(v)\n\n'
        "@pytest.mark.skip\ndef test_c():\n    f(1)\n\ndef test_d(tmp_path):\n    f(tmp_path)\n"
    )
    assert [(t.line, t.code) for t in test_programs("tests/test_x.py", source)] == [
        (5, "from lib import f\nx = 1\nexpected = 2\nassert f(x) == expected\n"),
        (9, "from lib import f\nv = 5\nassert f(v)\n"),
    ]  # test_c has another decorator, test_d one of pytest's own fixtures


CONFTEST = """import pytest
from lib import App, make_db

ROOT = "/srv"


@pytest.fixture
def app():
    return App(ROOT)


@pytest.fixture
def client(app):
    c = app.client()
    yield c
    c.close()  # teardown: never runs in the program


@pytest.fixture(params=["a", "b"])
def flavour(request):
    return request.param


@pytest.fixture(name="db")
def _db_fixture():
    return make_db()
"""

TESTS_WITH_FIXTURES = """import pytest
from lib import f


@pytest.fixture
def df(app):
    return app.frame([1, 2])


def test_uses_fixtures(client, df):
    assert f(client, df) == 3


@pytest.mark.parametrize("n", [7, 8])
def test_named_fixture_and_case(db, n):
    assert f(db, n)


def test_params_fixture(flavour):
    f(flavour)


def test_pytest_fixture(tmp_path):
    f(tmp_path)
"""


def test_tests_with_fixtures_of_their_file_and_conftests_are_mined_with_them_inlined():
    """pandas' case_when tests take a `df` fixture, flask's an `app`: a fixture of the test file
    or of a conftest.py above it is written in as a function and called (a yield fixture up to its
    yield); one with `params=` gives one program per param; one of pytest's own drops the test."""
    from data_pipeline.novel_api.mining import conftest_paths, mine, test_programs

    assert conftest_paths("tests/unit/test_x.py") == [
        "tests/unit/conftest.py",
        "tests/conftest.py",
        "conftest.py",
    ]
    listed = [
        (t.line, t.code) for t in test_programs("tests/unit/test_x.py", TESTS_WITH_FIXTURES, [CONFTEST])
    ]
    assert [line for line, _ in listed] == [10, 15, 19, 19]
    assert ["return 'a'" in listed[2][1], "return 'b'" in listed[3][1]] == [True, True]
    programs = dict(listed[:2])
    assert programs[10] == (
        "from lib import f\nfrom lib import App\nROOT = '/srv'\n\n"
        "def _fixture_app():\n    return App(ROOT)\napp = _fixture_app()\n\n"
        "def _fixture_client(app):\n    c = app.client()\n    yield c\n    c.close()\n"
        "client = next(_fixture_client(app))\n\n"
        "def _fixture_df(app):\n    return app.frame([1, 2])\ndf = _fixture_df(app)\n"
        "assert f(client, df) == 3\n"
    )
    assert "def _fixture_db():\n    return make_db()\ndb = _fixture_db()\nn = 7\n" in programs[15]
    assert "from lib import make_db" in programs[15]
    mined = mine({"tests/conftest.py": CONFTEST, "tests/unit/test_x.py": TESTS_WITH_FIXTURES},
                 [{"qualname": "lib.f", "kind": "function", "module": "lib"}])  # fmt: skip
    assert [m.origin for m in mined["lib.f"]] == [
        "tests/unit/test_x.py:19",
        "tests/unit/test_x.py:19",
        "tests/unit/test_x.py:15",
        "tests/unit/test_x.py:10",
    ]


def test_a_class_is_mined_where_it_is_named_outside_the_imports():
    from data_pipeline.novel_api.mining import mine

    files = {"tests/test_u.py": "from lib import FtpUrl, check\n\ndef test_import_only():\n    check(1)\n\n"
             "def test_annotation():\n    x: FtpUrl = check('ftp://a')\n"}  # fmt: skip
    found = mine(files, [{"qualname": "lib.FtpUrl", "kind": "class", "module": "lib"}])
    assert [m.origin for m in found["lib.FtpUrl"]] == ["tests/test_u.py:6"]


def test_a_doctest_is_one_session_and_an_expected_error_is_not_a_target():
    from data_pipeline.novel_api.tasks import drafts

    session = [
        {"code": "data = [3, 1]\n", "output": "", "source": "doctest"},
        {"code": "api(data)\n", "output": "[1, 3]", "source": "doctest"},
    ]
    bundle = {"qualname": "lib.api", "module": "lib", "library": "lib", "paths": ["lib.api"],
              "M": {"prose": "Sort it."}, "E": session}  # fmt: skip
    first = drafts(bundle)[0]
    assert "data = [3, 1]" in first.reference and "import data" not in first.reference
    raising = "try:\n    api(-1)\nexcept ValueError:\n    pass\nout = api([2])\n"
    bundle["E"] = [{"code": raising, "output": "", "source": "tests"}]
    assert "result = lib.api([2])" in drafts(bundle)[0].reference


def test_each_of_the_first_three_examples_becomes_tasks():
    from data_pipeline.novel_api.tasks import drafts

    examples = [{"code": f"api({n})\n", "output": "", "source": "tests"} for n in (1, 1, 2, 3, 4)]
    bundle = {"qualname": "lib.api", "module": "lib", "library": "lib", "paths": ["lib.api"],
              "M": {"prose": "Count."}, "E": examples}  # fmt: skip
    ids = [d.id for d in drafts(bundle)]
    # the repeated example counts once; three examples, each L1-L3 (its literal argument makes L2, L3)
    assert ids == ["lib.api/L1", "lib.api/L2", "lib.api/L3", "lib.api/e2/L1", "lib.api/e2/L2", "lib.api/e2/L3",
                   "lib.api/e3/L1", "lib.api/e3/L2", "lib.api/e3/L3"]  # fmt: skip
    assert [d.call for d in drafts(bundle) if d.level == 2] == ["solve(1)", "solve(2)", "solve(3)"]


def test_a_method_called_on_a_call_keeps_its_receiver_at_every_level():
    """pandas' `Styler(df, uuid_len=0).map(color, subset=['A'])`: L2 passes the literals as
    parameters to `map`, not to the constructor the chain starts with."""
    code = "import lib\nstyled = lib.Styler([1], uuid_len=0).map(str, subset='A')\n"
    bundle = {"qualname": "lib.Styler.map", "module": "lib.style", "library": "lib", "paths": ["lib.Styler.map"],
              "M": {"prose": "Apply it."}, "E": [{"code": code, "output": "", "source": "tests"}]}  # fmt: skip
    l2 = next(d for d in drafts(bundle) if d.level == 2)
    assert "result = lib.Styler([1], uuid_len=0).map(str, subset=arg0)" in l2.reference
