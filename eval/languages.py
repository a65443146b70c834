"""How a benchmark program and its tests run, per language.

Python runs in the sandbox's interpreter harness (a pass is its sentinel). The other
HumanEvalPack languages are compiled or interpreted by their toolchains as plain commands
in the same sandbox (a pass is exit code 0). Go and Rust are not supported: their
HumanEvalPack tests import third-party modules (testify; rand, regex, md5) that an offline
sandbox cannot fetch.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass

from core.errors import ConfigError

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
    raise ValueError(f"language {language!r} is not supported (python, js, cpp, java)")


TOOLCHAINS = {"python": None, "js": "node", "cpp": "g++", "java": "javac"}


def available_languages() -> list[str]:
    return [lang for lang, tool in TOOLCHAINS.items() if tool is None or shutil.which(tool)]


def check_languages(languages: Sequence[str], key: str = "benchmark") -> None:
    """Every language needs its toolchain on this machine."""
    unsupported = sorted(set(languages) - set(available_languages()))
    if unsupported:
        raise ConfigError(
            f"{key}.languages {unsupported} cannot run here (no toolchain); "
            f"use {key}.languages=[{','.join(available_languages())}]"
        )
