"""How a benchmark program and its tests run, per language.

Python runs in the sandbox's interpreter harness (a pass is its sentinel). The other
HumanEvalPack languages are compiled or interpreted by their toolchains as plain commands
in the same sandbox (a pass is exit code 0), one command per program: compile, then run the
tests. Go and Rust use what `eval.toolchains` prepares once (Go's compiled testify, Rust's
compiled crates), which the sandbox must be shown (`eval.toolchains.sandbox_paths`).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass

from core.errors import ConfigError
from eval.toolchains import go, rust

# HumanEvalPack's JavaScript tests use console.assert, which only prints on failure; and one
# solution (JavaScript/162) requires the npm package js-md5, served here by node's own crypto.
JS_PRELUDE = (
    "console.assert = (ok, ...msg) => { if (!ok) { throw new Error('Assertion failed ' + msg.join(' ')); } };\n"
    "{ const M = require('module'); const load = M._load;\n"
    "  M._load = function (name, ...rest) {\n"
    "    if (name === 'js-md5') { return (s) => require('crypto').createHash('md5').update(s).digest('hex'); }\n"
    "    return load.call(this, name, ...rest); }; }\n"
)


# bigcode-evaluation-harness gives HumanEvalFix C++ 60 s (humanevalpack.py LANGUAGE_TO_TIMEOUT).
CPP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class CommandJob:
    argv: list[str]
    files: dict[str, str]
    memory_mb: int | None = None  # a JVM reserves far more address space than it uses
    timeout_s: float | None = None  # replaces sandbox.timeout_s for this job (compile + run)


def command_job(language: str, program: str, tests: str) -> CommandJob:
    source = program + "\n" + tests + "\n"
    if language == "js":
        return CommandJob(["node", "main.js"], {"main.js": JS_PRELUDE + source})
    if language == "cpp":
        return CommandJob(
            ["sh", "-c", "g++ -std=c++17 -O1 -o main main.cpp -lcrypto && ./main"],
            {"main.cpp": source},
            timeout_s=CPP_TIMEOUT_S,
        )
    if language == "java":
        return CommandJob(
            ["sh", "-c", "javac -J-Xmx256m Main.java && java -Xmx256m -XX:+UseSerialGC Main"],
            {"Main.java": source},
            memory_mb=8192,
        )
    if language == "go":  # bigcode's file name: `go test` only runs tests of *_test.go files
        return CommandJob(
            ["sh", "-c", go.toolchain().script("test -count=1 main_test.go")], {"main_test.go": source}
        )
    if language == "rust":
        return CommandJob(
            ["sh", "-c", rust.toolchain().compile("main.rs", "main") + " && ./main"], {"main.rs": source}
        )
    raise ValueError(f"language {language!r} is not supported (python, js, cpp, java, go, rust)")


TOOLS = {"js": "node", "cpp": "g++", "java": "javac"}


def unavailable(language: str) -> str | None:
    """Why ``language``'s programs cannot run on this machine, or None when they can."""
    if language == "go":
        return go.problem()
    if language == "rust":
        return rust.problem()
    tool = TOOLS.get(language)
    return f"no {tool} on PATH" if tool is not None and shutil.which(tool) is None else None


def available_languages() -> list[str]:
    return [lang for lang in ("python", *TOOLS, "go", "rust") if unavailable(lang) is None]


def check_languages(languages: Sequence[str], key: str = "benchmark") -> None:
    """Every language needs its toolchain on this machine."""
    unsupported = sorted(set(languages) - set(available_languages()))
    if unsupported:
        reasons = "; ".join(f"{lang}: {unavailable(lang) or 'not supported'}" for lang in unsupported)
        raise ConfigError(
            f"{key}.languages {unsupported} cannot run here ({reasons}); "
            f"use {key}.languages=[{','.join(available_languages())}]"
        )
