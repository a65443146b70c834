"""Novel-API tasks from examples that need context: a documentation page whose blocks build on each
other (a mapped class over an in-memory database), top-level `await`, and an application called
through the library's own test client, each from a hand-built sdist, each a validated task that
`eval.run benchmark=novelapi model=reference` passes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from test_eval_run import run_eval
from test_novel_bundles import write_sdist
from test_novel_discover import build_wheel
from test_novel_e2e import novel_all

from data_pipeline.novel_api.mining import doc_programs

pytestmark = pytest.mark.slow

ORM_V1 = '''"""Rows of an in-memory database as plain classes."""
import sqlite3


class Model:
    """A mapped class: `table` names its table, `fields` its columns."""

    table = ""
    fields: tuple = ()


class Database:
    """A database held in memory for the life of the object, for tests and examples."""

    def __init__(self, path=":memory:"):
        self.connection = sqlite3.connect(path)

    def create_table(self, model):
        """Create the table of a mapped class, with one text column per field of it."""
        columns = ", ".join(f"{name} TEXT" for name in model.fields)
        self.connection.execute(f"CREATE TABLE {model.table} ({columns})")
'''
ORM_V2 = (
    ORM_V1
    + '''
    def insert_many(self, model, rows):
        """Insert many rows into the table of a mapped class and return how many were written.

        Each row is a dict from field names to values; fields a row lacks are stored as NULL.
        """
        names = ", ".join(model.fields)
        marks = ", ".join("?" for _ in model.fields)
        values = [tuple(row.get(name) for name in model.fields) for row in rows]
        self.connection.executemany(f"INSERT INTO {model.table} ({names}) VALUES ({marks})", values)
        return len(values)

    def count(self, model):
        """Count the rows stored in the table of a mapped class, however they were written."""
        return self.connection.execute(f"SELECT COUNT(*) FROM {model.table}").fetchone()[0]
'''
)
WEB_V1 = '''"""A tiny web application framework with an in-process test client."""


class App:
    """An application: routes from paths to handler functions."""

    def __init__(self):
        self.routes = {}

    def route(self, path):
        """Register the decorated function as the handler of the given path."""
        def register(handler):
            self.routes[path] = handler
            return handler
        return register


class TestClient:
    """Calls an application's handlers in process, as a server would for each request."""

    def __init__(self, app):
        self.app = app

    def get(self, path):
        """Send a GET request to the given path and return the handler's reply."""
        return self.app.routes[path]({"method": "GET", "body": None})
'''
WEB_V2 = (
    WEB_V1
    + '''
    def post_json(self, path, data):
        """Send a POST request whose body is the given data and return the handler's reply."""
        return self.app.routes[path]({"method": "POST", "body": dict(data)})


class Request:
    """A request as a handler sees it."""

    def __init__(self, headers):
        self.headers = dict(headers)

    def get_header_as_int(self, name, required=False):
        """Return the named header's value as an int: None when it is absent and not required."""
        value = self.headers.get(name)
        if value is None:
            if required:
                raise KeyError(name)
            return None
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"header {name} is no integer") from None
'''
)
AIO_V2 = '''"""Coroutines that fetch values concurrently."""
import asyncio


async def fetch_all(keys, delay=0.0):
    """Fetch the value of every key concurrently and return them in a dict keyed by the key."""
    async def one(key):
        await asyncio.sleep(delay)
        return key, key.upper()

    return dict(await asyncio.gather(*(one(k) for k in keys)))
'''
V1 = {"novlib/__init__.py": "", "novlib/orm.py": ORM_V1, "novlib/web.py": WEB_V1}
V2 = {"novlib/__init__.py": "", "novlib/orm.py": ORM_V2, "novlib/web.py": WEB_V2, "novlib/aio.py": AIO_V2}

ORM_PAGE = """Mapped classes
==============

Open a database held in memory:

.. code-block:: python

    from novlib.orm import Database, Model
    db = Database(":memory:")

A block that needs a server fails; the blocks after it that do not read what it binds still run:

.. code-block:: python

    import socket
    remote = socket.create_connection(("db.example.invalid", 5432), timeout=1)

Declare a mapped class and create its table:

.. code-block:: python

    class User(Model):
        table = "users"
        fields = ("name", "age")

    db.create_table(User)

A block that needs a database server fails and is counted so:

.. code-block:: python

    import socket
    socket.create_connection(("127.0.0.1", 9), timeout=1)
    db.insert_many(User, [{"name": "remote"}])

Then insert rows:

.. code-block:: python

    written = db.insert_many(User, [{"name": "ada", "age": 36}, {"name": "alan"}])
    print(written)
"""
ASYNC_PAGE = """Concurrency
===========

.. code-block:: python

    from novlib.aio import fetch_all
    values = await fetch_all(["a", "b"])
    print(values)
"""
APP_TESTS = """from novlib.web import App, TestClient


def make_app():
    app = App()

    @app.route("/echo")
    def echo(request):
        return {"method": request["method"], "got": request["body"]}

    return app


@pytest.mark.asyncio
async def test_fetch_all_in_a_coroutine():
    from novlib.aio import fetch_all

    assert await fetch_all(["x"]) == {"x": "X"}


def test_post_json_reaches_the_handler():
    client = TestClient(make_app())
    reply = client.post_json("/echo", {"a": 1})
    assert reply == {"method": "POST", "got": {"a": 1}}
"""
# falcon's way: a conftest whose `params=` fixture gives an async then a sync variant (the async
# one fails outside pytest's own set-up), a helper class set up from `__file__` and a `try`, and a
# test that reads the error `pytest.raises` caught, calling a method on an object it never names.
CONFTEST = """import pathlib

import pytest

try:
    import novlib_speedups  # noqa: F401

    HAS_SPEEDUPS = True
except ImportError:
    HAS_SPEEDUPS = False

HERE = pathlib.Path(__file__).resolve().parent


class _Utils:
    speedups = HAS_SPEEDUPS
    data = HERE / "data"

    @staticmethod
    def make_request(kind, headers):
        from novlib.web import Request

        if kind == "async":
            raise TypeError("an async request needs a coroutine responder")
        return Request(headers)


@pytest.fixture(params=["async", "sync"], ids=["asgi", "wsgi"])
def kind(request):
    return request.param


@pytest.fixture(scope="session")
def util():
    return _Utils()
"""
HEADER_TESTS = """import pytest


@pytest.fixture
def request_with_headers(kind, util):
    return util.make_request(kind, {"X-Int": "42", "X-Str": "forty-two"})


def test_get_header_as_int(request_with_headers):
    req = request_with_headers
    value = req.get_header_as_int("X-Int")
    assert value == 42
    with pytest.raises(ValueError) as info:
        req.get_header_as_int("X-Str")
    assert "no integer" in str(info.value)
"""
SDIST = {
    "novlib-2.0/tests/conftest.py": CONFTEST,
    "novlib-2.0/tests/test_headers.py": HEADER_TESTS,
    "novlib-2.0/docs/orm.rst": ORM_PAGE,
    "novlib-2.0/docs/async.rst": ASYNC_PAGE,
    "novlib-2.0/tests/test_web.py": APP_TESTS,
    **{f"novlib-2.0/src/{name}": text for name, text in V2.items()},
}


EXAMPLE_SCRIPT = '''"""Count what a table holds."""
from novlib.orm import Database, Model


class Item(Model):
    table = "items"
    fields = ("name",)


db = Database()
db.create_table(Item)
db.insert_many(Item, [{"name": "a"}, {"name": "b"}])
print(db.count(Item))
'''


def _repository(path: Path) -> tuple[Path, str]:
    """The library's repository: its example script at tag v2.0, a broken one committed after."""
    (path / "examples").mkdir(parents=True)
    (path / "examples" / "count_rows.py").write_text(EXAMPLE_SCRIPT)
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "examples"], check=True)
    subprocess.run([*git, "tag", "v2.0"], check=True)
    tagged = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    (path / "examples" / "count_rows.py").write_text("raise SystemExit('broken after the release')\n")
    subprocess.run([*git, "commit", "-qam", "after the release"], check=True)
    return path, tagged


def test_a_page_runs_as_a_session_with_only_the_blocks_each_builds_on():
    blocks = [code for _, code in doc_programs(ORM_PAGE)]
    insert = next(b for b in blocks if "insert_many" in b and "remote" not in b)
    assert "Database(':memory:')" in insert.replace('"', "'") and "class User(Model)" in insert
    assert "socket" not in insert and "remote" not in insert  # the failing blocks bind nothing it reads
    assert blocks[0].startswith("from novlib.orm import")


def test_a_name_an_earlier_block_only_imports_brings_the_import_alone():
    page = (
        ".. code-block:: python\n\n    from novlib.web import App, TestClient\n    App().serve_forever()\n\n"
        ".. code-block:: python\n\n    client = TestClient(None)\n"
    )
    assert [code for _, code in doc_programs(page)][1] == (
        "from novlib.web import App, TestClient\nclient = TestClient(None)"
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("context")
    wheels = {v: build_wheel(root / f"src{v}", f, v, root / "dist") for v, f in (("1.0", V1), ("2.0", V2))}
    repository, _ = _repository(root / "repository")
    sdist = write_sdist(root / "novlib-2.0.tar.gz", SDIST)
    return novel_all(
        wheels, root / "novel", f"sdist={sdist}", f"examples={repository}", "corpus.test_fraction=0.5"
    )


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_kind_of_context_becomes_a_validated_task(built):
    tasks = {t["id"]: t for t in _jsonl(built / "tasks.jsonl")}
    by_api = {}
    for task in tasks.values():
        by_api.setdefault(task["qualname"].rsplit(".", 1)[-1], []).append(task)
    assert {"insert_many", "fetch_all", "post_json"} <= set(by_api), sorted(by_api)
    assert all(t["c1"] for t in tasks.values())
    insert = next(t for t in by_api["insert_many"] if t["level"] == 1)
    assert "class User(Model)" in insert["context"] and "db.create_table(User)" in insert["context"]
    fetch = next(t for t in by_api["fetch_all"] if t["level"] == 1)  # the awaited call keeps its await
    assert "async def solve" in fetch["reference"] and "await " in fetch["reference"]
    assert "asyncio" in fetch["tests"]
    post = next(t for t in by_api["post_json"] if t["level"] == 1)  # the application, through the client
    assert "TestClient(make_app())" in post["context"] or "TestClient(" in post["context"]
    bundles = json.loads((built / "bundles.json").read_text())
    assert bundles["example_sources"]["docs"] >= 2 and bundles["example_sources"]["tests"] >= 2
    assert bundles["examples"]["example_needs_server"] == 1  # the block that connects to a server
    # the repository at the release's tag: its example script, not the broken one committed after it
    assert bundles["repository"]["tag"] == "v2.0" and bundles["sdist"] == "novlib-2.0.tar.gz"
    assert bundles["example_sources"]["examples"] == 2  # the script calls count and insert_many
    count = [t for t in tasks.values() if t["qualname"].endswith("count")]
    assert count and "class Item(Model)" in count[0]["context"]
    fetched = [b for b in _jsonl(built / "bundles.jsonl") if b["qualname"].endswith("fetch_all")][0]
    assert {e["source"] for e in fetched["E"]} == {"docs", "tests"}  # the async test's body awaits


def test_a_test_through_a_params_fixture_and_a_caught_error_becomes_a_validated_task(built):
    """The `params=` fixture's first variant fails, its second runs: one example (not two), with
    the conftest's helpers (a `try`, `__file__`) and the caught error as a namespace."""
    (bundle,) = [b for b in _jsonl(built / "bundles.jsonl") if b["qualname"].endswith("get_header_as_int")]
    (example,) = bundle["E"]
    assert example["source"] == "tests" and example["origin"].startswith("tests/test_headers.py:")
    code = example["code"]
    assert "return 'sync'" in code and "return 'async'" not in code
    assert "HAS_SPEEDUPS = False" in code and "pathlib.Path(__file__)" in code
    assert "info = _types.SimpleNamespace(value=_raised" in code and "import types as _types" in code
    tasks = [t for t in _jsonl(built / "tasks.jsonl") if t["qualname"].endswith("get_header_as_int")]
    assert tasks and all(t["c1"] for t in tasks)
    first = next(t for t in tasks if t["level"] == 1)
    # the task's setup is the test's: the conftest helpers and the fixtures' chosen variant
    assert "get_header_as_int" not in first["context"] and "return 'sync'" in first["context"]
    assert "req.get_header_as_int('X-Int')" in first["reference"]


def test_the_repository_is_read_at_the_release_tag_from_a_folder_or_a_git_url(tmp_path):
    from data_pipeline.novel_api.mining import read_repository

    repository, tagged = _repository(tmp_path / "repository")
    for source in (str(repository), f"file://{repository}"):
        files, where = read_repository(source, "2.0", tmp_path / f"sources-{len(source)}")
        assert files["examples/count_rows.py"] == EXAMPLE_SCRIPT
        assert where == {"examples": source, "tag": "v2.0", "commit": tagged}
    with pytest.raises(Exception, match="no tag v9.9 or 9.9"):
        read_repository(f"file://{repository}", "9.9", tmp_path / "none")


def test_a_failure_that_needed_a_network_or_a_server_says_so():
    from data_pipeline.novel_api.bundles import example_outcome
    from data_pipeline.novel_api.docsnippets import FAILED, Outcome

    gai = "socket.gaierror: [Errno -3] Temporary failure in name resolution"
    assert example_outcome(Outcome(FAILED, gai)) == "example_needs_network"
    assert example_outcome(Outcome(FAILED, "ConnectionRefusedError: [Errno 111]")) == "example_needs_server"
    assert example_outcome(Outcome(FAILED, "KeyError: 'x'")) == "example_failed"


def test_the_reference_passes_every_task(built, tmp_path):
    results = run_eval(
        ["benchmark=novelapi", f"benchmark.path={built}", "model=reference", "gen.n=1", "score.ks=[1]",
         "benchmark.cells=[Full]", f"out={tmp_path / 'eval'}"]
    )  # fmt: skip
    full = results["metrics"]["Full"]
    evaluated = [t for t in _jsonl(built / "tasks.jsonl") if t["split"] == "test"]  # the benchmark's split
    assert full["samples"] == len(evaluated) > 0 and full["pass@1"] == 1.0, full
