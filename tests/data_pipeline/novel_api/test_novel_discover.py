"""Novel-API discovery on two versions of a tiny library built as wheels here (offline), its install
failures, version resolution, and (slow) a real pair of releases from the registry."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from datetime import date
from pathlib import Path

import pytest

from core.errors import UserError
from data_pipeline.novel_api import envs as envs_module
from data_pipeline.novel_api.discover import FILTERS, discover, run_introspect
from data_pipeline.novel_api.envs import LibraryEnv, create_env, release_before, resolve_version

PYPROJECT = """\
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "novlib"
version = "{version}"
description = "A tiny library whose second version adds, moves, removes and deprecates APIs."
license = "MIT"

[tool.setuptools.packages.find]
include = ["novlib*"]
"""

GREET = '''
def greet(name):
    """Return a friendly greeting for the given name."""
    return f"hello {name}"


def _normalize(text):
    """Strip and lower-case the text before it is compared."""
    return text.strip().lower()


class Greeter:
    """Greets people by name, politely and at length."""

    def hello(self, name):
        """Say hello to the named person, politely."""
        return greet(name)
'''

SLUGIFY = '''
def slugify(text):
    """Turn the text into a lower-case, dash-separated slug."""
    return "-".join(text.lower().split())
'''

CAMEL = '''
def camel(text):
    """Join the words of the text in camel case."""
    return "".join(w.title() for w in text.split())
'''

MOVED = '''
def moved(x):
    """Return x doubled, whichever module defines it."""
    return 2 * x
'''

FIXED = '''
def fixed_fn():
    """Return the answer; version one could not import this module."""
    return 42
'''

V1 = {
    "novlib/__init__.py": '"""novlib 1.0."""\nfrom novlib.a import moved\nfrom novlib.core import greet, removed_fn\n',
    "novlib/a.py": MOVED,
    "novlib/core.py": GREET
    + '''

def removed_fn():
    """This function exists only in version one."""
''',
    "novlib/util.py": SLUGIFY,
    "novlib/strutils.py": CAMEL,
    "novlib/broken.py": "import novlib_no_such_dependency  # noqa: F401\n" + FIXED,
    "novlib/odd.py": "def odd_fn(:\n    return 1\n",  # neither imports nor parses: unreadable
}

V2 = {
    # moved: now defined in novlib.b, still novlib.moved. slugify: newly re-exported (existed).
    # _normalize: a private function made public as novlib.normalize: not new (the object existed),
    # listed in the manifest's newly_public.
    # __all__ names most submodules (as pandas does), not extra: shiny, only reachable through it, is
    # internal (unexported_module).
    "novlib/__init__.py": '"""novlib 2.0."""\nfrom novlib.b import moved\n'
    "from novlib.core import _normalize as normalize, greet, shout\nfrom novlib.util import slugify\n"
    '__all__ = ["moved", "normalize", "greet", "shout", "slugify", "b", "core", "util", "text", "broken", '
    '"odd", "gui"]\n',
    "novlib/b.py": MOVED,
    "novlib/core.py": "import warnings\n"
    + GREET
    + '''

def shout(text: str) -> str:
    """Return the text upper-cased, with an exclamation mark appended."""
    return text.upper() + "!"


def _hidden_helper():
    """An internal helper that callers should never use directly."""


def old_style(x):
    """Return x unchanged, as the first release did."""
    warnings.warn(
        "old_style goes away in 3.0; use shout",
        DeprecationWarning,
        stacklevel=2,
    )
    return x


def tiny():
    """Does stuff."""


exec(compile('def generated(x):\\n    """Return x; compiled from a template string at import."""\\n    return x\\n',
             "<generated>", "exec"))


class Farewell:
    """Says goodbye to people when they leave the room."""

    def bye(self, name: str) -> str:
        """Return a goodbye message addressed to the given name."""
        return f"bye {name}"

    def _private_m(self):
        """A private method that only the class itself calls."""


class Loud(Greeter):
    """A greeter that shouts every greeting it makes."""

    def hello(self, name):
        return shout(super().hello(name))
''',
    "novlib/util.py": SLUGIFY,
    "novlib/text/__init__.py": '"""Text helpers."""\n',
    "novlib/text/strutils.py": CAMEL,  # moved from novlib.strutils: same name, same module tail
    # failed to import in 1.0, read from its source there: fixed_fn existed, static_new is new
    "novlib/broken.py": FIXED
    + '''

def static_new(x):
    """Return x squared; version two added it to a module version one could not import."""
    return x * x
''',
    "novlib/odd.py": '''
def odd_fn(x):
    """Return whether x is odd; version one's module did not even parse."""
    return x % 2 == 1
''',
    "novlib/gui.py": "import novlib_no_such_gui_toolkit  # noqa: F401\n",  # fails in 2.0 only
    "novlib/tests/__init__.py": "",
    "novlib/tests/test_core.py": '''
def test_shout_adds_a_mark():
    """The library's own test suite, shipped inside the package: not an API."""
''',
    "novlib/extra.py": '''"""Extras with an explicit export list."""

__all__ = ["shiny"]
print("novlib.extra prints at import")  # must not reach the JSON on stdout


def shiny():
    """Return a shiny new value that version two introduced."""
    return "shiny"


def not_exported():
    """Public-looking, but left out of __all__, so private."""
''',
}

# qualname -> (kind, canonical, paths, filter) of every candidate, kept or not.
EXPECTED = {
    "novlib.broken.static_new": ("function", "novlib.broken.static_new", ["novlib.broken.static_new"], None),
    "novlib.odd.odd_fn": ("function", "novlib.odd.odd_fn", ["novlib.odd.odd_fn"], "old_module_failed_import"),
    "novlib.tests.test_core.test_shout_adds_a_mark": (
        "function",
        "novlib.tests.test_core.test_shout_adds_a_mark",
        ["novlib.tests.test_core.test_shout_adds_a_mark"],
        "test_module",
    ),
    "novlib.core.Farewell": ("class", "novlib.core.Farewell", ["novlib.core.Farewell"], None),
    "novlib.core.Farewell.bye": ("method", "novlib.core.Farewell.bye", ["novlib.core.Farewell.bye"], None),
    "novlib.core.Farewell._private_m": ("method", "novlib.core.Farewell._private_m", [], "private"),
    "novlib.core.Loud": ("class", "novlib.core.Loud", ["novlib.core.Loud"], None),
    "novlib.core.Loud.hello": (
        "method",
        "novlib.core.Loud.hello",
        ["novlib.core.Loud.hello"],
        "inherited_docstring",
    ),
    "novlib.core._hidden_helper": ("function", "novlib.core._hidden_helper", [], "private"),
    "novlib.core.generated": ("function", "novlib.core.generated", ["novlib.core.generated"], "no_source"),
    "novlib.core.old_style": ("function", "novlib.core.old_style", ["novlib.core.old_style"], "deprecated"),
    "novlib.core.tiny": ("function", "novlib.core.tiny", ["novlib.core.tiny"], "thin_docstring"),
    "novlib.extra.not_exported": ("function", "novlib.extra.not_exported", [], "private"),
    "novlib.extra.shiny": ("function", "novlib.extra.shiny", ["novlib.extra.shiny"], "unexported_module"),
    "novlib.shout": ("function", "novlib.core.shout", ["novlib.core.shout", "novlib.shout"], None),
}


def build_wheel(src: Path, files: dict[str, str], version: str, dist: Path) -> Path:
    for name, text in {**files, "pyproject.toml": PYPROJECT.format(version=version)}.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(textwrap.dedent(text) if name.endswith(".toml") else text)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--disable-pip-version-check", "-q", "-w", str(dist), str(src)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return dist / f"novlib-{version}-py3-none-any.whl"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("novlib")
    return {
        v: build_wheel(root / f"src{v}", files, v, root / "dist") for v, files in (("1.0", V1), ("2.0", V2))
    }


@pytest.fixture(scope="module")
def run(wheels, tmp_path_factory):
    out = tmp_path_factory.mktemp("discovery")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PIP_NO_INDEX", "1")  # offline: everything comes from the wheels
        start = time.perf_counter()
        manifest = discover("novlib", "1.0", "2.0", out, old_wheel=wheels["1.0"], new_wheel=wheels["2.0"])
        print(f"discover (two fresh envs): {time.perf_counter() - start:.1f}s")
    rows = [json.loads(line) for line in (out / "apis.jsonl").read_text().splitlines()]
    return out, manifest, rows


def test_finds_exactly_the_added_apis_and_filters_each_kind(run):
    _, _, rows = run
    got = {r["qualname"]: (r["kind"], r["canonical"], r["paths"], r["filter"]) for r in rows}
    assert got == EXPECTED
    assert [r["qualname"] for r in rows] == sorted(EXPECTED)
    assert all(r["kept"] == (r["filter"] is None) for r in rows)
    # not new: removed (removed_fn, strutils.camel's old path), moved (moved, camel), re-exported (slugify)
    named = " ".join(p for r in rows for p in [r["canonical"], *r["paths"]])
    for absent in ("removed_fn", "moved", "camel", "slugify", "greet", "Greeter", "normalize"):
        assert absent not in named


def test_rows_are_exact(run):
    out, _, rows = run
    site = next((out / "envs" / "2.0").glob("lib/python*/site-packages"))
    core = (site / "novlib" / "core.py").read_text().splitlines()
    common = {"library": "novlib", "old_version": "1.0", "new_version": "2.0", "license": "MIT", "kept": True}
    by_name = {r["qualname"]: r for r in rows}
    assert by_name["novlib.shout"] == {
        **common,
        "qualname": "novlib.shout",
        "canonical": "novlib.core.shout",
        "paths": ["novlib.core.shout", "novlib.shout"],
        "kind": "function",
        "module": "novlib.core",
        "signature": "(text: str) -> str",
        "doc": "Return the text upper-cased, with an exclamation mark appended.",
        "source_file": str(site / "novlib" / "core.py"),
        "lineno": core.index("def shout(text: str) -> str:") + 1,
        "filter": None,
    }
    assert by_name["novlib.core.Farewell.bye"] == {
        **common,
        "qualname": "novlib.core.Farewell.bye",
        "canonical": "novlib.core.Farewell.bye",
        "paths": ["novlib.core.Farewell.bye"],
        "kind": "method",
        "module": "novlib.core",
        "signature": "(self, name: str) -> str",
        "doc": "Return a goodbye message addressed to the given name.",
        "source_file": str(site / "novlib" / "core.py"),
        "lineno": core.index("    def bye(self, name: str) -> str:") + 1,
        "filter": None,
    }
    assert by_name["novlib.core.generated"]["source_file"] == "<generated>"
    assert all(list(r) == list(rows[0]) for r in rows)


def test_manifest_counts_every_filter_and_failed_module(run):
    out, manifest, _ = run
    assert json.loads((out / "discovery.json").read_text()) == manifest
    assert manifest["import_name"] == "novlib"  # found from the distribution's files
    assert manifest["counts"] == {
        "old_apis": 8,  # moved greet removed_fn Greeter Greeter.hello slugify camel, broken.fixed_fn (read)
        "new_apis": 20,
        "candidates": 15,
        "newly_public": 1,
        "kept": 5,
        "filtered": {f: (3 if f == "private" else 1) for f in FILTERS},
        "old_failed_modules": 2,
        "old_static_modules": 1,
        "decided_statically": 1,  # static_new: new against version one's source of novlib.broken
        "new_failed_modules": 1,
        "install_errors": 0,
    }
    old_failed = manifest["failed_modules"]["old"]
    assert old_failed["novlib.broken"] == "ModuleNotFoundError: No module named 'novlib_no_such_dependency'"
    assert old_failed["novlib.odd"].startswith("SyntaxError")
    assert manifest["failed_modules"]["new"] == {
        "novlib.gui": "ModuleNotFoundError: No module named 'novlib_no_such_gui_toolkit'"
    }
    assert manifest["static_modules"] == {"old": ["novlib.broken"], "new": ["novlib.gui"]}
    assert manifest["python"] == {
        v: str(out / "envs" / n / "bin" / "python") for v, n in (("old", "1.0"), ("new", "2.0"))
    }
    assert manifest["license"] == {"old": "MIT", "new": "MIT"}
    assert manifest["newly_public"] == ["novlib.normalize"]
    assert manifest["install_errors"] == {} and manifest["introspect_errors"] == {}


def test_submodules_left_out_of_a_package_all_are_internal_unless_every_path_counts(run, wheels, monkeypatch):
    """novlib 2.0's __all__ names seven of its nine public submodules, not extra (nor tests)."""
    out, manifest, _ = run
    assert manifest["internal_submodules"] == ["extra", "tests"] and manifest["module_paths"] == "exported"
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    again = out.parent / (out.name + "-all")
    (again / "envs").mkdir(parents=True)
    for env in (out / "envs").iterdir():  # the same environments, no second install
        (again / "envs" / env.name).symlink_to(env)
    counts = discover(
        "novlib", "1.0", "2.0", again, old_wheel=wheels["1.0"], new_wheel=wheels["2.0"], module_paths="all"
    )["counts"]
    rows = {r["qualname"]: r for r in map(json.loads, (again / "apis.jsonl").read_text().splitlines())}
    assert (
        rows["novlib.extra.shiny"]["kept"]
        and counts["kept"] == 6
        and counts["filtered"]["unexported_module"] == 0
    )
    with pytest.raises(UserError, match="module_paths='some'"):
        discover(
            "novlib",
            "1.0",
            "2.0",
            again,
            old_wheel=wheels["1.0"],
            new_wheel=wheels["2.0"],
            module_paths="some",
        )


def test_an_env_with_its_marker_is_reused(run, wheels):
    out, _, _ = run
    marker = out / "envs" / "1.0" / envs_module.MARKER
    before = marker.stat().st_mtime_ns
    start = time.perf_counter()
    env = create_env(out / "envs", "novlib", "1.0", wheels["1.0"])
    assert env.ok and env.python.exists() and time.perf_counter() - start < 2
    assert marker.stat().st_mtime_ns == before


def test_an_import_name_that_fails_is_recorded_not_empty(run):
    out, _, _ = run
    env = LibraryEnv("2.0", out / "envs" / "2.0" / "bin" / "python", out / "envs" / "2.0", True)
    found = run_introspect(env, "novlib_nope", "novlib", timeout=60)
    assert found["apis"] == [] and found["error"] is None
    assert found["failed_modules"] == {"novlib_nope": "ModuleNotFoundError: No module named 'novlib_nope'"}


def test_a_missing_wheel_is_one_user_error_counted_in_the_manifest(run, wheels, tmp_path):
    out, _, _ = run
    (tmp_path / "envs").symlink_to(out / "envs")  # the 1.0 env is reused through its marker
    missing = tmp_path / "novlib-3.0-py3-none-any.whl"
    with pytest.raises(UserError) as err:
        discover("novlib", "1.0", "3.0", tmp_path, old_wheel=wheels["1.0"], new_wheel=missing)
    assert (
        str(err.value)
        == f"could not install novlib 3.0: wheel not found: {missing} (see {tmp_path / 'discovery.json'})"
    )
    manifest = json.loads((tmp_path / "discovery.json").read_text())
    assert manifest["install_errors"] == {"new": f"wheel not found: {missing}"}
    assert manifest["counts"] == {"install_errors": 1}
    assert manifest["python"] == {"old": str(tmp_path / "envs" / "1.0" / "bin" / "python"), "new": None}
    assert not (tmp_path / "apis.jsonl").exists()


def test_a_version_the_offline_registry_lacks_is_pips_error_on_one_line(run, wheels, tmp_path, monkeypatch):
    out, _, _ = run
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "1.0").symlink_to(out / "envs" / "1.0")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    with pytest.raises(UserError) as err:
        discover("novlib", "1.0", "9.9", tmp_path, old_wheel=wheels["1.0"])
    pip_error = "ERROR: No matching distribution found for novlib==9.9"
    assert str(err.value) == f"could not install novlib 9.9: {pip_error} (see {tmp_path / 'discovery.json'})"
    assert "\n" not in str(err.value)
    manifest = json.loads((tmp_path / "discovery.json").read_text())
    assert manifest["install_errors"] == {"new": pip_error}
    assert not (tmp_path / "envs" / "9.9" / envs_module.MARKER).exists()  # a rerun tries again


def test_version_specs(monkeypatch, wheels, tmp_path):
    assert resolve_version("novlib", "20.2.1") == "20.2.1"
    assert resolve_version("novlib", " 1.0 ") == "1.0"
    with pytest.raises(UserError, match="neither a version"):
        resolve_version("novlib", "latest")
    with pytest.raises(UserError, match="not a date"):
        resolve_version("novlib", "2021-02-30")

    def files(when: str, yanked: bool = False) -> list[dict]:
        return [{"upload_time_iso_8601": f"{when}T12:00:00.000000Z", "yanked": yanked}]

    releases = {
        "1.0": files("2020-01-01"),
        "2.0": files("2021-01-01"),
        "1.9.5": files("2021-03-01"),  # a maintenance release after 2.0: 2.0 is still the newer API
        "2.1": files("2021-04-01", yanked=True),
        "3.0rc1": files("2021-05-01"),
        "3.0": files("2021-06-30"),  # on the cutoff day: not before it
        "4.0": [],
    }
    assert release_before(releases, date(2021, 6, 30)) == "2.0"
    assert release_before(releases, date(2021, 7, 1)) == "3.0"
    assert release_before(releases, date(2020, 1, 1)) is None
    monkeypatch.setattr(envs_module, "fetch_releases", lambda library: releases)
    assert resolve_version("novlib", "2021-06-30") == "2.0"
    with pytest.raises(UserError, match="no final, unyanked release was uploaded before 2019-01-01"):
        resolve_version("novlib", "2019-01-01")
    with pytest.raises(
        UserError, match="version 1.1 was asked for but novlib-1.0-py3-none-any.whl is version 1.0"
    ):
        discover("novlib", "1.1", "2.0", tmp_path, old_wheel=wheels["1.0"], new_wheel=wheels["2.0"])
    with pytest.raises(UserError, match="both version 1.0"):
        discover("novlib", "1.0", "1.0", tmp_path)
    assert not list(tmp_path.iterdir())


def _registry_reachable() -> str | None:
    """Why the registry cannot be used, or None."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "boltons", "--disable-pip-version-check"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return "the package registry cannot be reached: " + (done.stderr.strip().splitlines() or ["?"])[-1]
    return None


@pytest.mark.slow
def test_a_real_library_from_the_registry(tmp_path):
    why = _registry_reachable()
    if why:
        pytest.skip(why)
    start = time.perf_counter()
    manifest = discover("boltons", "20.2.1", "25.0.0", tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "apis.jsonl").read_text().splitlines()]
    print(f"boltons 20.2.1 -> 25.0.0 in {time.perf_counter() - start:.1f}s: {json.dumps(manifest['counts'])}")
    print("failed modules:", json.dumps(manifest["failed_modules"]), "licence:", manifest["license"])
    print("kept:", [r["qualname"] for r in rows if r["kept"]])
    assert manifest["counts"]["kept"] > 0
    assert "boltons.funcutils.noop" in {r["qualname"] for r in rows if r["kept"]}  # added in 21.0.0
    assert all(r["source_file"].endswith(".py") and r["lineno"] for r in rows if r["kept"])
    assert manifest["import_name"] == "boltons"


@pytest.mark.slow
def test_numpy_discovery_finds_the_same_new_apis_as_before_dated_envs(tmp_path):
    """numpy 1.26.0 -> 2.1.0 worked before dated environments and static reading: the same kept
    APIs come out now (data/numpy_kept_before.json, measured before: 58 of 377 candidates), but
    two: `numpy.f2py.rules.errmess`, an f2py helper whose only public path was `rules` importing
    it (a plain module's imports are no exports), so it is no candidate now; and
    `numpy.random.SeedSequence.generate_state`, which 1.26 had too (a Cython method under
    `contextlib`'s decorator, listed now among the paths that exist without being APIs). Private
    `_user_array_impl` names became candidates (filtered) once 1.26's incidental import paths no
    longer hid them."""
    why = _registry_reachable()
    if why:
        pytest.skip(why)
    before = json.loads((Path(__file__).parent / "data" / "numpy_kept_before.json").read_text())
    manifest = discover("numpy", before["old"], before["new"], tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "apis.jsonl").read_text().splitlines()]
    assert sorted(r["qualname"] for r in rows if r["kept"]) == sorted(
        set(before["kept"]) - {"numpy.f2py.rules.errmess", "numpy.random.SeedSequence.generate_state"}
    )
    user_array = [r for r in rows if r["canonical"].startswith("numpy.lib._user_array_impl.")]
    assert user_array and {r["filter"] for r in user_array} == {"private"}
    # beside those private names no candidate joined (errmess's and a few others' left)
    assert manifest["counts"]["candidates"] - len(user_array) <= before["candidates"]
    assert {e["resolver"] for e in manifest["environments"].values()} == {"uv --exclude-newer"}


@pytest.mark.slow
def test_a_cutoff_date_resolves_from_upload_times():
    try:
        assert resolve_version("boltons", "2021-01-01") == "20.2.1"
        assert resolve_version("boltons", "2021-06-30") == "21.0.0"
    except UserError as exc:
        if "cannot read release dates" in str(exc):
            pytest.skip(f"PyPI's JSON API cannot be reached: {exc}")
        raise


def test_an_empty_run_exits_non_zero_with_one_line(wheels, tmp_path):
    """Two versions with the same API: `all` stops after discovery, one `error:` line, exit 2."""
    same = build_wheel(tmp_path / "src", V1, "1.1", tmp_path / "dist")
    env = {**__import__("os").environ, "PIP_NO_INDEX": "1", "PYTHONPATH": str(Path(__file__).parents[3])}
    done = subprocess.run(
        [sys.executable, "-m", "data_pipeline.novel_api", "all", "library=novlib", "old=1.0", "new=1.1",
         f"old_wheel={wheels['1.0']}", f"new_wheel={same}", f"out={tmp_path / 'out'}"],
        capture_output=True, text=True, timeout=600, env=env, cwd=Path(__file__).parents[3],
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "discover: no kept APIs" in errors[0] and "no task can survive" in errors[0]
    assert "Traceback" not in done.stderr


def test_an_empty_stage_names_its_top_drop_reasons():
    from data_pipeline.novel_api.app import empty_output

    line = empty_output("bundles", {"kept": 0, "dropped": {"no_valid_example": 28, "no_signature": 3}})
    assert line.startswith("bundles: no bundles (top drop reasons: no_valid_example 28, no_signature 3); ")
    assert "no example was found" in line and "examples=PATH" in line  # the option that could help
    ran = {"examples_kept": 0, "example_failed": 5, "example_needs_network": 2}
    line = empty_output("bundles", {"kept": 0, "dropped": {"no_valid_example": 7}, "examples": ran})
    assert "examples ran: {'example_failed': 5, 'example_needs_network': 2}" in line
    line = empty_output("tasks", {"tasks": 0, "dropped": {"no_usable_example": 3}})
    assert "tasks.generator=llm" in line
    assert empty_output("tasks", {"tasks": 4, "dropped": {}}) is None


def test_a_docstring_is_deprecated_by_a_note_or_its_summary_not_by_a_mention():
    from data_pipeline.novel_api.introspect import says_deprecated

    assert says_deprecated("Old helper.\n\n.. deprecated:: 2.1\n   Use new_helper.")
    assert says_deprecated("Deprecated: use new_helper instead.")
    assert says_deprecated("Return x. This function is deprecated.\n\nMore text.")
    # pandas' DataFrame.map: its note is about the method it replaces
    doc = "Apply a function elementwise.\n\n.. versionadded:: 2.1.0\n\n   DataFrame.applymap was deprecated and renamed."
    assert not says_deprecated(doc)


def test_a_path_the_old_version_gave_a_dependencys_object_is_not_new():
    """pydantic 2.5's `AnyUrl` was pydantic-core's `Url`: 2.10's own `AnyUrl.build` is a path users
    already wrote, so it is no new API, while a method the dependency never had is."""
    import collections
    import types
    import typing

    from data_pipeline.novel_api.discover import novel
    from data_pipeline.novel_api.introspect import external_paths

    old = types.ModuleType("fakepkg")
    old.__path__ = []  # a package's __init__: what it imports, it exports
    old.Registry = collections.OrderedDict  # re-exported from a dependency
    old._Hidden = collections.Counter  # private: not a path users wrote
    old.Pairs = typing.Annotated[collections.deque, "pairs"]  # an alias: attributes reach deque

    def own():
        """Defined in the package itself."""

    own.__module__ = "fakepkg"
    old.own = own
    paths = external_paths("fakepkg", {"fakepkg": old})
    assert "fakepkg.Registry" in paths and "fakepkg.Registry.move_to_end" in paths
    assert "fakepkg.Pairs.appendleft" in paths
    assert not any(p.startswith(("fakepkg.own", "fakepkg._Hidden")) for p in paths)

    def api(canonical: str, path: str) -> dict:
        module, _, _ = canonical.rpartition(".")
        return {"canonical": canonical, "module": module, "paths": [path]}

    new = [
        api("fakepkg.registry.Registry.move_to_end", "fakepkg.Registry.move_to_end"),
        api("fakepkg.registry.Registry.freeze", "fakepkg.Registry.freeze"),
    ]
    assert [a["paths"] for a in novel([], new, paths)] == [["fakepkg.Registry.freeze"]]
    assert len(novel([], new)) == 2


def test_a_plain_modules_imports_are_no_exports_but_a_packages_are():
    """`pandas.io.sql` imports `DataFrame` and `flask.app` imports the sansio `App`: neither is a
    path users write. A package's `__init__` re-exports what it imports; `__all__` decides alone."""
    import types

    from data_pipeline.novel_api.introspect import namespace

    def function(module: str):
        def f():
            """A function."""

        f.__module__ = module
        return f

    plain = types.ModuleType("lib.sql")
    plain.read_sql, plain.DataFrame = function("lib.sql"), function("lib.frame")
    assert namespace(plain)[1] == {"read_sql"}
    package = types.ModuleType("lib")
    package.__path__ = []
    package.DataFrame = plain.DataFrame
    assert namespace(package)[1] == {"DataFrame"}
    plain.__all__ = ["DataFrame"]
    assert namespace(plain)[1] == {"DataFrame"}


def test_an_empty_discovery_names_the_import_name_it_read():
    from data_pipeline.novel_api.app import empty_output

    counts = {"candidates": 0, "kept": 0, "new_apis": 0, "old_apis": 0, "filtered": {}}
    line = empty_output(
        "discover", {**counts, "library": "python-dateutil", "import_name": "python_dateutil"}
    )
    assert (
        "import_name='python_dateutil'" in line
        and "pass import_name=" in line
        and "further apart" not in line
    )
    line = empty_output(
        "discover", {**counts, "new_apis": 9, "old_apis": 9, "library": "x", "import_name": "x"}
    )
    assert "further apart" in line and "import_name='x'" in line


COMPILED = '''"""Parsing, compiled by Cython as falcon's wheels are."""
import warnings


def parse_pair(text):
    """Split text at its first equals sign into a key and a value."""
    key, _, value = text.partition("=")
    return key.strip(), value.strip()


def old_parse(text):
    """Split text the old way."""
    warnings.warn("use parse_pair", DeprecationWarning)
    return parse_pair(text)


class Reader:
    """Reads key-value lines."""

    def feed_lines(self, lines):
        """Parse every line into a dict."""
        return dict(parse_pair(line) for line in lines)
'''


def _compiled(root: Path, source: str) -> dict:
    """The introspection of package `cylib` whose module `fast` Cython compiled from `source`."""
    package = root / "cylib"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "fast.py").write_text(source)
    build = subprocess.run(
        [sys.executable, "-m", "Cython.Build.Cythonize", "-i", "-q", "fast.py"],
        cwd=package, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr[-2000:]
    assert list(package.glob("fast.*.so")), "Cython built no extension"
    from data_pipeline.novel_api.discover import INTROSPECT

    env = {"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}
    listed = subprocess.run(
        [sys.executable, str(INTROSPECT), "cylib"], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(listed.stdout)


def test_a_cython_compiled_module_lists_its_functions_and_methods_with_their_source(tmp_path):
    """falcon 3.1.3's wheel compiles `falcon.inspect` with Cython: its functions are no Python
    functions to `inspect`, so `inspect_app` looked new in 4.0.2 (pure there), and the compiled
    classes of 4.0.2 (`HTTPContentTooLarge`) had no readable source. The `.py` shipped beside the
    extension is the source."""
    found = _compiled(tmp_path, COMPILED)
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    probe = "import cylib.fast as f; print(f.__file__.endswith('.so'), type(f.parse_pair).__name__)"
    compiled = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert compiled.stdout.split() == [
        "True",
        "cython_function_or_method",
    ]  # the compiled module is what imports
    apis = {a["canonical"]: a for a in found["apis"]}
    package = tmp_path / "cylib"
    assert {
        "cylib.fast.parse_pair",
        "cylib.fast.old_parse",
        "cylib.fast.Reader",
        "cylib.fast.Reader.feed_lines",
    } <= set(apis)
    lines = COMPILED.splitlines()
    for name, kind in (("parse_pair", "function"), ("Reader", "class"), ("Reader.feed_lines", "method")):
        api = apis[f"cylib.fast.{name}"]
        assert api["kind"] == kind and api["has_source"], api
        assert api["source_file"] == str(package / "fast.py")
        assert lines[api["lineno"] - 1].lstrip().startswith(("def ", "class ")), (name, api["lineno"])
        assert name.rsplit(".", 1)[-1] in lines[api["lineno"] - 1]
    assert apis["cylib.fast.old_parse"]["deprecated"] and not apis["cylib.fast.parse_pair"]["deprecated"]
    assert apis["cylib.fast.Reader.feed_lines"]["paths"] == ["cylib.fast.Reader.feed_lines"]


def test_a_method_compiled_without_binding_then_with_it_is_not_new(tmp_path):
    """numpy 1.26's `Generator.beta` is a `method_descriptor` (a Cython extension type's method
    without `binding`), 2.1's a Cython function: the old listing's other paths hold it, so it is
    no candidate."""
    from data_pipeline.novel_api.discover import novel

    as_extension_type = COMPILED.replace("import warnings", "import warnings\n\nimport cython").replace(
        "class Reader:", "@cython.cclass\nclass Reader:"
    )
    old = _compiled(tmp_path / "old", "# cython: binding=False\n" + as_extension_type)
    new = _compiled(tmp_path / "new", COMPILED)
    assert "cylib.fast.Reader.feed_lines" not in {a["canonical"] for a in old["apis"]}  # a method descriptor
    assert "cylib.fast.Reader.feed_lines" in old["other_paths"]
    assert "cylib.fast.Reader.feed_lines" in {a["canonical"] for a in new["apis"]}
    candidates = {a["canonical"] for a in novel(old["apis"], new["apis"], old["other_paths"])}
    assert "cylib.fast.Reader.feed_lines" not in candidates
    # without the other paths, the method would look new
    assert "cylib.fast.Reader.feed_lines" in {a["canonical"] for a in novel(old["apis"], new["apis"])}


def test_introspection_survives_class_attributes_whose_lookups_raise(tmp_path):
    """An attribute whose `__getattr__` raises KeyError (an attribute dict) or RuntimeError (an
    unbound proxy) is no method, and never ends the listing."""
    from data_pipeline.novel_api.introspect import Found, unlisted_method_paths

    class AttrDict(dict):
        __getattr__ = dict.__getitem__

    class Unbound:
        def __getattr__(self, name):
            raise RuntimeError("object is not bound")

    class Config:
        defaults = AttrDict(a=1)
        proxy = Unbound()

        def method(self):
            return 1

    entry = Found(Config, "class")
    entry.paths.add("pkg.Config")
    Config.compiled = len  # a builtin routine stands for a compiled method
    paths = unlisted_method_paths([entry], __name__.split(".")[0])
    assert "pkg.Config.compiled" in paths
    assert not [p for p in paths if p.endswith((".defaults", ".proxy", ".method"))], paths
