"""The one wrapper every entry point runs under: strict config, checks first, one-line errors.

    APP = App("sft", SFTAppConfig, run=..., preflight=...)
    if __name__ == "__main__":
        run_app(APP)

Order: compose the config (Hydra; a command line of overrides alone through its compose API, once,
anything else through its own entry), convert it strictly (`to_validated`), run `preflight`
(checks of this machine that need no heavy import: paths exist, packages are installed,
the hub is reachable), then `run`, which imports the heavy stack itself. `--cfg job` also
validates before it prints. A `UserError` (and a config that does not compose) prints one
line, `error: <what was wrong and what to do>`, and exits 2; `EDITFORGE_DEBUG=1` shows the
traceback instead. Ctrl-C (SIGINT) prints one line, what was kept and that the same command resumes,
and exits 130. Any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import atexit
import functools
import gc
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from core.config import CONFIG_DIR, describe_config_error, register_resolvers, to_validated
from core.errors import UserError
from core.logs import quiet_libraries, rank, setup_logging

DEBUG_ENV = "EDITFORGE_DEBUG"
USER_ERROR_EXIT = 2
INTERRUPTED_EXIT = 128 + 2  # a shell's status for a command ended by SIGINT
RANK_ERROR_WAIT_ENV = "EDITFORGE_RANK_ERROR_WAIT_S"
RANK_ERROR_WAIT_S = 60.0  # how long a rank other than 0 leaves rank 0 to report a start-up error


@dataclass(frozen=True)
class App:
    config_name: str  # primary config in configs/
    schema: type  # its structured config; has `validate()`
    run: Callable[[Any, dict[str, Any]], Any]  # (validated config, resolved dict for the record)
    preflight: Callable[[Any], None] | None = None  # machine checks before anything heavy
    config_dir: Path = CONFIG_DIR  # an app whose groups would clash with others' has a folder of its own
    output_key: str = "out"  # the config key of the folder that keeps finished work (named on Ctrl-C)
    interrupted: str = (
        ""  # what Ctrl-C keeps, where a run does not resume ({out}: the folder); "": it resumes
    )


def run_app(app: App, argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    _freeze_heap_at_exit()
    quiet_libraries()
    register_resolvers()
    full_error = os.environ.get("HYDRA_FULL_ERROR")
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra re-raises instead of printing its own report
    validated: list[Any] = []
    try:
        _run(app, argv, validated)
    except KeyboardInterrupt:
        if rank() == 0:
            print(f"interrupted: {interrupted_message(app, validated)}", file=sys.stderr, flush=True)
        sys.exit(INTERRUPTED_EXIT)
    except Exception as err:
        if os.environ.get(DEBUG_ENV, "") not in ("", "0") or not is_user_error(err):
            raise
        print_user_error(err)
        sys.exit(USER_ERROR_EXIT)
    finally:
        if full_error is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = full_error


@functools.cache
def _freeze_heap_at_exit() -> None:
    """The interpreter's last collections at exit walk every object the command made, only to
    free what the exit frees anyway (about 70 ms of `eval.run`'s 1.8 s): frozen, they skip them.
    Registered once, before the libraries' own handlers, so it runs after them."""
    atexit.register(gc.freeze)


def print_user_error(err: BaseException) -> None:
    """One `error:` line for the whole launch, however the ranks are scheduled.

    Every rank meets the same start-up check, and rank 0 speaks for them. Another rank waits
    before it exits: torchrun stops the whole launch at the first rank that exits, which must
    not be one that stays silent while rank 0 is still on its way to the line (eight ranks on
    two cores start seconds apart). If rank 0 never fails (a check only this rank failed), the
    rank speaks for itself after the wait.
    """
    if rank() != 0:
        time.sleep(float(os.environ.get(RANK_ERROR_WAIT_ENV, RANK_ERROR_WAIT_S)))
        print(f"error: rank {rank()}: {one_line(err)}", file=sys.stderr, flush=True)
        return
    print(f"error: {one_line(err)}", file=sys.stderr, flush=True)


def interrupted_message(app: App, validated: list[Any]) -> str:
    """What an interrupted run kept, and how to go on."""
    if not validated:
        return "nothing was started"
    value: Any = validated[0]
    for part in app.output_key.split("."):
        value = getattr(value, part, None)
    if app.interrupted:
        return app.interrupted.format(out=f"{app.output_key}={value}")
    if value is None:
        return "what finished is kept; the same command goes on from there"
    return f"what finished is kept in {app.output_key}={value}; the same command resumes from there"


def _run(app: App, argv: list[str], validated: list[Any]) -> None:
    import hydra
    from hydra._internal.utils import get_args_parser

    args = get_args_parser().parse_args(argv)
    if args.cfg:  # Hydra prints without calling the task: validate here first
        validate_overrides(app, args.overrides, args.config_name)

    failed: list[BaseException] = []

    def task(cfg: Any) -> None:
        from omegaconf import OmegaConf

        try:
            setup_logging()
            config: Any = to_validated(cfg, app.schema)
            validated.append(config)
            if app.preflight is not None:
                app.preflight(config)
            # a DictConfig's container is a dict with str keys
            record = cast("dict[str, Any]", OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
            app.run(config, record)
        except Exception as err:  # raised below, past Hydra's "Error executing job" log line
            failed.append(err)

    if only_overrides(argv):  # composed once: Hydra's own entry composes twice (the first for its run mode)
        task(compose_config(app, args.overrides))
        if failed:
            raise failed[0]
        return
    task.__module__ = app.run.__module__  # Hydra names the job after the task's module
    main = hydra.main(version_base=None, config_path=str(app.config_dir), config_name=app.config_name)(task)
    saved = sys.argv
    sys.argv = [saved[0], *argv]
    try:
        main()
    finally:
        sys.argv = saved
    if failed:
        raise failed[0]


def only_overrides(argv: list[str]) -> bool:
    """Whether a command line is config overrides alone: no Hydra flag (--multirun, --cfg, --help,
    --config-name ...) and no override of Hydra's own settings (hydra.*, hydra/...), which only
    Hydra's own entry applies."""
    return all(not arg.startswith("-") and not arg.lstrip("+~").startswith("hydra") for arg in argv)


def compose_config(app: App, overrides: list[str], config_name: str | None = None) -> Any:
    """`app`'s config composed with `overrides` (Hydra's compose API), without Hydra's own node."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(app.config_dir), version_base=None):
            return compose(config_name=config_name or app.config_name, overrides=list(overrides))
    finally:
        GlobalHydra.instance().clear()


def validate_overrides(app: App, overrides: list[str], config_name: str | None = None) -> Any:
    """Compose `app`'s config with `overrides` and convert it strictly (no preflight, no run)."""
    return to_validated(compose_config(app, overrides, config_name), app.schema)


def is_user_error(err: BaseException) -> bool:
    """UserErrors, and configs that do not compose or parse (bad override, unknown option)."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    return isinstance(err, (UserError, HydraException, OmegaConfBaseException))


def one_line(err: BaseException) -> str:
    """The error's message on one line (Hydra's own messages span several)."""
    from omegaconf.errors import OmegaConfBaseException

    cause = err.__cause__
    if isinstance(err, OmegaConfBaseException):
        return describe_config_error(err)
    if not isinstance(err, UserError) and isinstance(cause, OmegaConfBaseException):
        return describe_config_error(cause)
    return collapse(str(err)) or type(err).__name__


def collapse(text: str) -> str:
    """Multi-line text as one line: "Header:" + its indented items become "Header: a, b";
    Hydra's "Config search path:" listing is dropped.

    >>> collapse("Could not find 'recipe/x'\\n\\nAvailable options in 'recipe':\\n\\ta\\n\\tb")
    "Could not find 'recipe/x'; Available options in 'recipe': a, b"
    """
    parts: list[list[str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if raw[:1].isspace() and parts and parts[-1][0].endswith(":"):
            parts[-1].append(line)
        else:
            parts.append([line])
    kept = [p for p in parts if p[0] != "Config search path:"]
    return "; ".join(p[0] + (" " + ", ".join(p[1:]) if len(p) > 1 else "") for p in kept)
