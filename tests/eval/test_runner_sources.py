"""The code of ours that each language's run adds (``eval/runners/``) is checked by that language's
own compiler, where the toolchain is on the machine: whole files as they are, fragments inside the
smallest program that holds them the way ``command_job`` puts them. And ``command_job`` ships
exactly those files."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from eval.languages import RUNNERS, command_job, cpp, go, java, javascript, rust


def needs(tool: str):
    return pytest.mark.skipif(shutil.which(tool) is None, reason=f"{tool} is not installed")


def check(argv: list[str], cwd: Path) -> None:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{' '.join(argv)}:\n{done.stdout}{done.stderr}"


def test_every_runner_file_is_used_and_shipped():
    used = {
        javascript.JS_PRELUDE,
        javascript.JS_RUNNER,
        javascript.JS_TOKEN,
        javascript.JS_CHANNEL,
        javascript.JS_TRUSTED,
        javascript.JS_CANDIDATE,
        cpp.CPP_BEFORE_TESTS,
        cpp.CPP_TOKEN_SOURCE,
        java.JAVA_RUNNER,
        go.GO_RUNNER,
        rust.RUST_TOKEN,
    }
    on_disk = {path.read_text() for path in RUNNERS.iterdir() if path.is_file()}
    assert on_disk == used
    pyproject = (RUNNERS.parents[1] / "pyproject.toml").read_text()
    assert '"runners/*"' in pyproject  # package data: installed with the package


def test_command_jobs_carry_the_runner_files():
    js = command_job("js", "function f() {}", "console.assert(f() === undefined);")
    assert js.files["editforge_run.js"] == (RUNNERS / "editforge_run.js").read_text()
    assert js.files["main.js"].startswith(javascript.JS_PRELUDE)
    assert js.files["main.js"].endswith(javascript.JS_TOKEN)
    split = command_job("js", "function f() {}", "console.assert(f() === undefined);", split=True)
    assert split.files["editforge_candidate.js"] == javascript.JS_CHANNEL + javascript.JS_CANDIDATE
    assert split.files["main.js"] == "function f() {}"  # the program alone: the tests are not on its disk
    assert "console.assert" in split.trusted_input and not split.run_token
    java = command_job("java", "class Main {}", "")
    assert java.files["EditforgeRun.java"] == (RUNNERS / "EditforgeRun.java").read_text()


@needs("node")
def test_javascript_runner_files_parse(tmp_path):
    (tmp_path / "editforge_run.js").write_text(javascript.JS_RUNNER)
    check(["node", "--check", "editforge_run.js"], tmp_path)
    # main.js as command_job makes it, with an empty program and tests
    (tmp_path / "main.js").write_text(javascript.JS_PRELUDE + "\n" + javascript.JS_TOKEN)
    check(["node", "--check", "main.js"], tmp_path)
    # the split run's two sides, each as shipped to its process (the channel first)
    for name, side in (("trusted.js", javascript.JS_TRUSTED), ("candidate.js", javascript.JS_CANDIDATE)):
        (tmp_path / name).write_text(javascript.JS_CHANNEL + side)
        check(["node", "--check", name], tmp_path)


@needs("g++")
def test_cpp_runner_files_compile(tmp_path):
    (tmp_path / "editforge_token.cpp").write_text(cpp.CPP_TOKEN_SOURCE)
    check(["g++", "-std=c++17", "-Wall", "-Werror", "-fsyntax-only", "editforge_token.cpp"], tmp_path)
    tests = "#include <cassert>\n" + cpp.CPP_BEFORE_TESTS + "int main() {\n    assert(1 + 1 == 2);\n"
    (tmp_path / "main.cpp").write_text(tests + cpp.CPP_TOKEN + "}\n")
    check(["g++", "-std=c++17", "-Wall", "-Werror", "-fsyntax-only", "main.cpp"], tmp_path)


@needs("javac")
def test_java_runner_compiles(tmp_path):
    (tmp_path / "EditforgeRun.java").write_text(java.JAVA_RUNNER)
    (tmp_path / "Main.java").write_text(
        "public class Main {\n    public static void main(String[] a) {}\n}\n"
    )
    check(["javac", "-Xlint:all", "-Werror", "EditforgeRun.java", "Main.java"], tmp_path)


@needs("gofmt")
def test_go_runner_is_gofmt_clean(tmp_path):
    (tmp_path / "editforge_main_test.go").write_text(go.GO_RUNNER)
    done = subprocess.run(
        ["gofmt", "-l", "-e", "."], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr


@needs("go")
def test_go_runner_vets(tmp_path):
    (tmp_path / "go.mod").write_text("module editforge\n\ngo 1.19\n")
    (tmp_path / "editforge_main_test.go").write_text(go.GO_RUNNER)
    (tmp_path / "main_test.go").write_text(
        'package main\n\nimport "testing"\n\nfunc TestOne(t *testing.T) {}\n'
    )
    env_home = tmp_path / "home"
    env = {
        "HOME": str(env_home),
        "GOCACHE": str(tmp_path / "cache"),
        "GOFLAGS": "-mod=mod",
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        ["go", "vet", "."], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr


@needs("rustc")
def test_rust_token_fragment_compiles_in_a_test_function(tmp_path):
    source = "#[test]\nfn the_tests() {\n    {\n" + rust.RUST_TOKEN + "    }\n}\n"
    (tmp_path / "main.rs").write_text(source)
    check(["rustc", "--edition", "2021", "--test", "-D", "warnings", "--emit=metadata", "main.rs"], tmp_path)
