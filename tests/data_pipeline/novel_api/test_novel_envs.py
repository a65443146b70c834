"""Dated environments, offline: a local index (PEP 691 JSON with PEP 700 upload times) holds two
releases of a dependency; the old library breaks with the newer one and installs dated with the
one that was current when it was released."""

from __future__ import annotations

import hashlib
import http.server
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import JSONHandler, local_server

from data_pipeline.novel_api.envs import create_env, file_version, release_time

PYPROJECT = """\
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "{version}"
dependencies = {dependencies}

[project.optional-dependencies]
fast = {fast}

[tool.setuptools]
packages = ["{name}"]
"""
# deplib 2.0 removed old_name; oldlib 1.0 (released between the two) imports it
RELEASES = {
    ("deplib", "1.0"): ("def old_name():\n    return 'old'\n", [], "2020-01-01T00:00:00Z"),
    ("deplib", "2.0"): ("def new_name():\n    return 'new'\n", [], "2023-01-01T00:00:00Z"),
    ("oldlib", "1.0"): ("from deplib import old_name\n", ["deplib"], "2021-06-01T12:00:00Z"),
    # deplib only as the extra `fast`: without it the package does not import
    ("extralib", "1.0"): ("import deplib\n", [], "2021-06-01T12:00:00Z"),
}
EXTRAS = {"extralib": ["deplib"]}


def _wheel(src: Path, name: str, version: str, code: str, dependencies: list[str], dist: Path) -> Path:
    (src / name).mkdir(parents=True)
    (src / name / "__init__.py").write_text(code)
    (src / "pyproject.toml").write_text(
        textwrap.dedent(
            PYPROJECT.format(
                name=name,
                version=version,
                dependencies=json.dumps(dependencies),
                fast=json.dumps(EXTRAS.get(name, [])),
            )
        )
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--disable-pip-version-check", "-q", "-w", str(dist), str(src)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return dist / f"{name}-{version}-py3-none-any.whl"


class _Index(JSONHandler, http.server.SimpleHTTPRequestHandler):
    """`/simple/<name>/`: the JSON simple API; `/files/<wheel>`: the wheels in `root`."""

    projects: dict[str, list[dict]] = {}
    root = Path()

    def do_GET(self):  # noqa: N802 (the handler's API)
        parts = [p for p in self.path.split("/") if p]
        if len(parts) == 2 and parts[0] == "simple" and parts[1] in self.projects:
            page = {"meta": {"api-version": "1.1"}, "name": parts[1], "files": self.projects[parts[1]]}
            self.reply_json(page, "application/vnd.pypi.simple.v1+json")
        elif len(parts) == 2 and parts[0] == "files":
            super().do_GET()
        else:
            self.send_error(404)

    def translate_path(self, path):
        return str(self.root / Path(path).name)


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    root = tmp_path_factory.mktemp("index")
    projects: dict[str, list[dict]] = {}
    for (name, version), (code, deps, uploaded) in RELEASES.items():
        wheel = _wheel(root / f"src-{name}-{version}", name, version, code, deps, root)
        projects.setdefault(name, []).append(
            {
                "filename": wheel.name,
                "url": f"/files/{wheel.name}",
                "hashes": {"sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()},
                "upload-time": uploaded,
            }
        )
    handler = type("Index", (_Index,), {"projects": projects, "root": root})
    with local_server(handler) as url:
        yield f"{url}/simple"


@pytest.fixture
def offline_index(index, monkeypatch, tmp_path):
    for key in ("UV_DEFAULT_INDEX", "PIP_INDEX_URL"):
        monkeypatch.setenv(key, index)
    monkeypatch.delenv("UV_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_NO_INDEX", raising=False)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")  # only the fixture index, never a machine's mirror
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    return index


def _imports(env, module: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(env.python), "-c", f"import {module}"], capture_output=True, text=True)


def test_the_release_time_comes_from_the_index(offline_index):
    assert release_time("oldlib", "1.0").isoformat() == "2021-06-01T12:00:00+00:00"
    assert release_time("oldlib", "9.9") is None
    assert file_version("Old_Lib-1.0.tar.gz") == "1.0" and file_version("x-2.0-py3-none-any.whl") == "2.0"


def test_an_old_version_broken_by_newer_dependencies_installs_with_dated_ones(offline_index, tmp_path):
    today = create_env(tmp_path / "undated", "oldlib", "1.0", None, timeout=300, dated=False)
    assert today.ok and today.resolver == "pip" and today.as_of is None
    assert _imports(today, "oldlib").returncode != 0  # deplib 2.0 has no old_name

    dated = create_env(tmp_path / "dated", "oldlib", "1.0", None, timeout=300)
    assert dated.ok, dated.error
    assert dated.resolver == "uv --exclude-newer" and dated.as_of == "2021-06-02T12:00:00Z"
    assert _imports(dated, "oldlib").returncode == 0  # deplib 1.0, current when oldlib 1.0 came out
    marker = json.loads((dated.path / "editforge-env.json").read_text())
    assert marker["as_of"] == dated.as_of and marker["installed"] == "1.0"


def test_an_installer_failure_is_one_line_with_its_cause():
    from data_pipeline.novel_api.envs import dated_flags, error_line

    uv = (
        "error: Failed to build `toolz==0.10.0`\n  cause: The build backend returned an error\n"
        "         AttributeError: 'HTMLParser' object has no attribute 'unescape'\n\nhint: Build failures ...\n"
    )
    assert (
        error_line(uv)
        == "error: Failed to build `toolz==0.10.0` (AttributeError: 'HTMLParser' object has no attribute 'unescape')"
    )
    assert error_line("Collecting x\nERROR: No matching distribution found for x==9\n") == (
        "ERROR: No matching distribution found for x==9"
    )
    flags = dated_flags("2019-07-12T20:28:09Z")
    assert flags[:2] == ["--exclude-newer", "2019-07-12T20:28:09Z"]
    assert any(f.startswith("setuptools=") for f in flags)  # build backends are not dated


def test_a_module_that_needs_a_declared_extra_gets_it(offline_index, tmp_path):
    from data_pipeline.novel_api.envs import declared_requirements, install_extras, needed_extras

    env = create_env(tmp_path / "envs", "extralib", "1.0", None, timeout=300)
    assert env.ok, env.error
    failed = _imports(env, "extralib")
    assert failed.returncode != 0
    error = {"extralib": "ModuleNotFoundError: No module named 'deplib'"}
    requires = declared_requirements(env, "extralib")
    assert needed_extras(requires, error) == ["fast"]
    assert needed_extras(requires, {"extralib": "ImportError: cannot import name 'x'"}) == []
    assert install_extras(env, "extralib", ["fast"], timeout=300) == ""
    assert _imports(env, "extralib").returncode == 0  # deplib 1.0, dated like the env


def test_extras_for_the_projects_own_tests_or_docs_are_not_installed():
    from data_pipeline.novel_api.envs import needed_extras

    requires = ['pytest; extra == "test"', 'sphinx; extra == "docs"', 'greenlet; extra == "asyncio"']
    failed = {
        "lib.a": "No module named 'pytest'",
        "lib.b": "No module named 'greenlet'",
        "lib.c": "No module named 'sphinx'",
    }
    assert needed_extras(requires, failed) == ["asyncio"]
