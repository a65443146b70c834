"""How a benchmark program and its tests run, per language: one registry, one `Language` each.

Python runs in the sandbox's interpreter harness (a pass is its sentinel). The other
HumanEvalPack languages are compiled or interpreted by their toolchains as plain commands
in the same sandbox, one command per program: compile, then run the tests. Go and Rust use what
`eval.toolchains` prepares once (Go's compiled testify, Rust's compiled crates), which the
sandbox must be shown (`eval.toolchains.sandbox_paths`).

A pass is exit code 0 **and the run token** (`Sandbox.run_command(run_token=True)`): code of ours
that runs only once the last test has passed copies the token from descriptor 3 to descriptor 4
(JavaScript: after the tests; C++: at the end of the tests' `main`, through a function compiled
apart; Java: a `main` of its own that calls the tests'; Go: a `TestMain` in a file of its own,
after `m.Run()` returned 0 with the test flags at their defaults; Rust: at the end of the test
function). The compile steps run without those descriptors, and the sources are gone before the
run step. So a program that exits with code 0 before its tests end (an exit call, an exit or
shutdown hook, an uncaught-exception, signal or panic handler that exits, a static initializer)
fails, and so does one that reruns an edited copy of its own source. The tests' assertions are
also kept out of the program's reach where a language lets a program redefine them (JavaScript:
a module constant; C++: every macro the program defines is undefined before the tests, and a
failed assertion calls a function of ours; Rust: `::std`'s macros by path; Go: testify's import
kept unless the program declares it). A program written against this protocol can still read the
token itself: these programs share their process with their tests (docs/sandbox.md).

That code of ours is in `eval/runners/` as source files (each checked by its language's own
compiler in `tests/eval/test_runner_sources.py`): whole files for the run steps, and the fragments
put before or after the program's and the tests' text.

Each language is one module here (`python.py`, `javascript.py`, `cpp.py`, `java.py`, `go.py`,
`rust.py`): its toolchain check, its run, its test-density rules and its coverage measurer
(`base.Language`). Installed packages declare more under the entry-point group
`editforge.languages` (`name = "pkg.module:LANGUAGE"`); code can also call `register(...)`. The
runners, the audit and the benchmarks get a language from `get_language(name)` and never branch
on its name.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.errors import ConfigError
from core.plugins import EntryPoints
from eval.languages import cpp, go, java, javascript, python, rust
from eval.languages.base import RUNNERS, CommandJob, Language

__all__ = [
    "ENTRY_POINTS",
    "LANGUAGES",
    "RUNNERS",
    "CommandJob",
    "Language",
    "available_languages",
    "check_languages",
    "command_job",
    "get_language",
    "register",
    "unavailable",
]

ENTRY_POINTS = "editforge.languages"
PLUGINS = EntryPoints(ENTRY_POINTS, "a Language")
LANGUAGES: dict[str, Language] = {
    module.LANGUAGE.name: module.LANGUAGE for module in (python, javascript, cpp, java, go, rust)
}


def register(language: Language) -> Language:
    """Register ``language`` (replacing one of the same name)."""
    if not isinstance(language, Language):
        raise ConfigError(f"{language!r} is not a Language")
    LANGUAGES[language.name] = language
    return language


def get_language(name: str) -> Language | None:
    """The registered language ``name`` (installed plugins included), or None."""
    if name not in LANGUAGES:
        PLUGINS.load(register)
    return LANGUAGES.get(name)


def command_job(
    language: str, program: str, tests: str, helpers: str = "", split: bool = False
) -> CommandJob:
    """The command line and files that run ``program`` with ``tests`` (the token epilogue included;
    it does nothing where descriptors 3 and 4 are not open). ``split``: JavaScript's tests in a
    process of their own (``helpers``: benchmark text they call, bound on their side)."""
    found = get_language(language)
    if found is None:
        raise ValueError(f"language {language!r} is not supported ({', '.join(LANGUAGES)})")
    return found.job(program, tests, helpers, split)


def unavailable(language: str) -> str | None:
    """Why ``language``'s programs cannot run on this machine, or None when they can."""
    found = get_language(language)
    return found.unavailable() if found is not None else f"no language {language!r} is registered"


def available_languages() -> list[str]:
    PLUGINS.load(register)
    return [name for name, language in LANGUAGES.items() if language.unavailable() is None]


def check_languages(languages: Sequence[str], key: str = "benchmark") -> None:
    """Every language needs its toolchain on this machine."""
    unsupported = sorted(set(languages) - set(available_languages()))
    if unsupported:
        reasons = "; ".join(f"{lang}: {unavailable(lang) or 'not supported'}" for lang in unsupported)
        raise ConfigError(
            f"{key}.languages {unsupported} cannot run here ({reasons}); "
            f"use {key}.languages=[{','.join(available_languages())}]"
        )
