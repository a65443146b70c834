"""The evaluation's sandboxes, started on threads of their own.

Probing the backend and the cgroups and booting the servers takes about 0.2 s, on other cores than
the evaluating process's own start-up. `eval.run` begins the sandbox of its own interpreter as soon
as the config is valid, before the preflight checks and the benchmark's imports (`Begun`), and the
run starts any other it needs once the problems are loaded; an error is raised where the sandbox is
first used (`Future.result`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass

from core.sandbox.config import SandboxConfig
from eval.toolchains import sandbox_paths


@dataclass(frozen=True)
class Begun:
    """A sandbox of the evaluator's own interpreter, started before the run knew its problems."""

    future: Future  # of Sandbox
    languages: frozenset[str]  # whose toolchains it shows (a run with others starts its own)


def start_sandbox(
    config: SandboxConfig, python: str | None, languages: Iterable[str], measured_split: bool
) -> Future:
    """``config``'s pool for programs run by ``python`` (None: the sandbox's own interpreter),
    showing the toolchains of ``languages``, started on a thread."""
    future: Future = Future()

    def start() -> None:
        try:
            sandbox = config.open(
                python=python, read_only=sandbox_paths(languages), measured_split=measured_split
            )
        except BaseException as exc:  # raised where the sandbox is used
            future.set_exception(exc)
        else:
            future.set_result(sandbox)

    threading.Thread(target=start, name="sandbox-start", daemon=True).start()
    return future


def close_started(future: Future) -> None:
    """Stop a pool once it has started (nothing to do where it failed to)."""
    if future.exception() is None:
        future.result().close()
