"""Which public APIs did a library's newer version add? The first stage of the novel-API benchmark.

Both versions are installed into their own virtualenvs (`envs.py`) and introspected from inside them
(`introspect.py`). An API of the new version is a candidate when the old version knew it under none
of its names:

- none of its public access paths was public before (a function moved from `pkg.a` to `pkg.b` but
  re-exported as `pkg.func` in both is not new);
- its defining path (`canonical`) did not exist before: an existing object re-exported under a new
  path is not new, the object existed. That holds for a private object made public too (boltons 21.0.0
  added `MultiReplace`, defined in 20.2.1 but left out of `__all__`, to `__all__`): a model could
  have read it. The manifest lists those as `newly_public`;
- its (qualname inside the module, last module component without leading underscores) was not seen
  before: `pkg.strutils.camel` moved to `pkg.text.strutils.camel` or `pkg._strutils.camel` is not new;
- no path of it was a path of a dependency's object the old version re-exported: pydantic 2.5's
  `AnyUrl` was pydantic-core's `Url`, so 2.10's own `AnyUrl.build` is no new API.

Every candidate becomes one row of `apis.jsonl`, kept or with the first filter that matched.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from core.errors import UserError
from data_pipeline.novel_api.envs import (
    DATE,
    LibraryEnv,
    create_env,
    declared_requirements,
    error_line,
    install_extras,
    needed_extras,
    older,
    resolve_version,
    same_version,
    wheel_version,
)

INTROSPECT = Path(__file__).with_name("introspect.py")
# First match wins. old_module_failed_import: the old version could not show whether it had the API
# (its module neither imported nor readable from source).
FILTERS = (
    "old_module_failed_import",
    "private",
    "test_module",
    "unexported_module",
    "deprecated",
    "no_source",
    "thin_docstring",
    "inherited_docstring",
)
ROLES = ("old", "new")
TEST_MODULE = re.compile(r"(^|\.)(tests?|conftest|test_\w+|\w+_tests?)(\.|$)")  # numpy.testing is an API
MODULE_PATHS = ("exported", "all")


def discover(
    library: str,
    old: str,
    new: str,
    out: Path,
    import_name: str | None = None,
    old_wheel: Path | None = None,
    new_wheel: Path | None = None,
    min_doc_words: int = 5,
    timeout: float = 1800.0,
    dated: bool = True,
    module_paths: str = "exported",
) -> dict:
    """Install both versions, diff their APIs, write `out/apis.jsonl` and `out/discovery.json`.
    `module_paths`: exported (a package whose `__all__` names most of its submodules makes the
    others internal, see `usable_paths`) or all (every public path counts)."""
    out = Path(out)
    if module_paths not in MODULE_PATHS:
        raise UserError(f"module_paths={module_paths!r}: choose one of {MODULE_PATHS}")
    versions = {"old": pick_version(library, old, old_wheel), "new": pick_version(library, new, new_wheel)}
    if same_version(versions["old"], versions["new"]):
        raise UserError(f"{library}: old and new are both version {versions['old']}; nothing to compare")
    if not older(versions["old"], versions["new"]):
        raise UserError(
            f"{library}: old={versions['old']} is not older than new={versions['new']}; swap them "
            "(an API the new version removed would be read as added)"
        )
    wheels = {"old": old_wheel, "new": new_wheel}
    envs = both(lambda r: create_env(out / "envs", library, versions[r], wheels[r], timeout, dated))
    manifest: dict = {
        "library": library,
        "import_name": import_name,
        "old_version": versions["old"],
        "new_version": versions["new"],
        "python": {r: str(envs[r].python) if envs[r].ok else None for r in ROLES},
        # how each env was resolved: dated (uv --exclude-newer, the release's day) or today's dependencies
        "environments": {
            r: {"version": envs[r].version, "resolver": envs[r].resolver, "dependencies_as_of": envs[r].as_of}
            for r in ROLES
        },
        "min_doc_words": min_doc_words,
        "module_paths": module_paths,
    }
    install_errors = {r: envs[r].error for r in ROLES if not envs[r].ok}
    if install_errors:
        write_json(
            out / "discovery.json",
            {
                **manifest,
                "counts": {"install_errors": len(install_errors)},
                "failed_modules": {},
                "install_errors": install_errors,
            },
        )
        raise UserError(
            "; ".join(f"could not install {library} {versions[r]}: {e}" for r, e in install_errors.items())
            + f" (see {out / 'discovery.json'})"
        )
    import_name = import_name or find_import_name(envs["new"], library)
    listed = both(lambda r: introspect_with_extras(envs[r], import_name, library, timeout))
    found = {r: listed[r][0] for r in ROLES}
    extras = {r: listed[r][1] for r in ROLES}
    # the new version's candidates must run (bundles execute their examples): only imported modules count
    new_apis = [a for a in found["new"]["apis"] if not a.get("static")]
    candidates = novel(found["old"]["apis"], new_apis, found["old"].get("other_paths", []))
    promoted = newly_public(found["old"]["apis"], new_apis)
    static = found["old"].get("static_modules", [])
    unread = {m: e for m, e in found["old"]["failed_modules"].items() if m not in static}
    internal = internal_submodules(found["new"].get("submodules")) if module_paths == "exported" else set()
    rows = []
    for api in candidates:
        usable = usable_paths(api, import_name, internal)
        reason = filter_reason(api, usable, unread, min_doc_words)
        rows.append(row(api, usable, library, versions, found["new"]["license"], reason))
    rows.sort(key=lambda r: (r["qualname"], r["kind"]))
    filtered = {name: sum(r["filter"] == name for r in rows) for name in FILTERS}
    manifest.update(
        import_name=import_name,
        license={r: found[r]["license"] for r in ROLES},
        counts={
            "old_apis": sum(bool(a["paths"]) for a in found["old"]["apis"]),
            "new_apis": sum(bool(a["paths"]) for a in new_apis),
            "candidates": len(rows),
            "newly_public": len(promoted),
            "kept": sum(r["kept"] for r in rows),
            "filtered": filtered,
            "old_failed_modules": len(found["old"]["failed_modules"]),
            # old modules that failed to import, read from their source instead (and the candidates
            # whose novelty was decided against that reading)
            "old_static_modules": len(static),
            "decided_statically": sum(under(r, static) for r in rows),
            "new_failed_modules": len(found["new"]["failed_modules"]),
            "install_errors": 0,
        },
        newly_public=promoted,
        # first-level submodules left out of the package's __all__, whose paths do not count
        internal_submodules=sorted(internal),
        failed_modules={r: found[r]["failed_modules"] for r in ROLES},
        static_modules={r: found[r].get("static_modules", []) for r in ROLES},
        extras=extras,
        introspect_errors={r: found[r]["error"] for r in ROLES if found[r]["error"]},
        install_errors={},
    )
    write_text(out / "apis.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    write_json(out / "discovery.json", manifest)
    return manifest


def both(step: Callable[[str], Any]) -> dict[str, Any]:
    """step(role) for old and new side by side: each is mostly a subprocess."""
    with ThreadPoolExecutor(len(ROLES)) as pool:
        return dict(zip(ROLES, pool.map(step, ROLES), strict=True))


def pick_version(library: str, spec: str, wheel: Path | None) -> str:
    """The registry's version for `spec`, or the wheel's own (a version `spec` must then agree with)."""
    if wheel is None:
        return resolve_version(library, spec)
    found = wheel_version(wheel)
    if found is None:
        raise UserError(f"{wheel}: not a wheel file name (NAME-VERSION-PY-ABI-PLATFORM.whl)")
    if spec and not DATE.fullmatch(spec.strip()) and not same_version(spec, found):
        raise UserError(f"{library}: version {spec} was asked for but {wheel.name} is version {found}")
    return found


def find_import_name(env: LibraryEnv, library: str) -> str:
    """The distribution's one top-level package, or the one named like the library."""
    try:
        done = subprocess.run(
            [str(env.python), "-I", str(INTROSPECT), "--top-level", library],
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
            check=True,
        )
        names = [n for n in json.loads(done.stdout) if not n.startswith("_")]
    except (subprocess.SubprocessError, ValueError):
        names = []
    wanted = re.sub(r"[-.]+", "_", library).lower()
    if wanted in names:
        return wanted
    if len(names) == 1:
        return names[0]
    raise UserError(
        f"{library}: cannot tell its import name (top-level names: {names or 'none found'}); pass import_name"
    )


def run_introspect(env: LibraryEnv, import_name: str, library: str, timeout: float) -> dict:
    """The API listing from inside the env; a crash or timeout becomes a failure of the whole package."""
    cmd = [str(env.python), "-I", str(INTROSPECT), import_name, "--dist", library]
    env_vars = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    try:
        done = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=env.path,
            env=env_vars,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"introspection exited {done.returncode}: {error_line(done.stderr)}")
        result = json.loads(done.stdout)
        result["error"] = None
        return result
    except (subprocess.TimeoutExpired, RuntimeError, ValueError) as exc:
        error = (
            f"introspection timed out after {timeout:.0f}s"
            if isinstance(exc, subprocess.TimeoutExpired)
            else str(exc)
        )
        return {"apis": [], "failed_modules": {import_name: error}, "license": None, "error": error}


def introspect_with_extras(
    env: LibraryEnv, import_name: str, library: str, timeout: float
) -> tuple[dict, dict]:
    """The env's API listing, and what was added to it: modules that failed for want of an optional
    dependency the library declares as an extra get that extra installed (dated like the env) and
    the env is introspected again."""
    found = run_introspect(env, import_name, library, timeout)
    failed = {m: e for m, e in found["failed_modules"].items() if not TEST_MODULE.search(m)}
    extras = needed_extras(declared_requirements(env, library), failed) if failed else []
    if not extras:
        return found, {"installed": [], "error": None}
    error = install_extras(env, library, extras, timeout)
    if error:
        return found, {"installed": [], "error": error}
    return run_introspect(env, import_name, library, timeout), {"installed": extras, "error": None}


def tail_key(api: dict) -> tuple[str, str]:
    """(qualname inside its module, the module's last component without leading underscores)."""
    module = api["module"]
    return api["canonical"][len(module) + 1 :], module.rsplit(".", 1)[-1].lstrip("_")


def novel(old: list[dict], new: list[dict], old_other: list[str] = ()) -> list[dict]:
    """The APIs of `new` that `old` knew under none of their names (see the module docstring);
    `old_other`: paths that existed in `old` without being one of its APIs (a dependency's objects
    it re-exported and their attributes, its compiled classes' method descriptors)."""
    paths = {p for a in old for p in a["paths"]} | set(old_other)
    names = {a["canonical"] for a in old} | {tail_key(a) for a in old} | set(old_other)
    return [
        a for a in new if paths.isdisjoint(a["paths"]) and {a["canonical"], tail_key(a)}.isdisjoint(names)
    ]


def newly_public(old: list[dict], new: list[dict]) -> list[str]:
    """Public paths (shortest each) of new public APIs whose object existed in `old` only privately."""
    private = {a["canonical"] for a in old if not a["paths"]}
    public = {a["canonical"] for a in old if a["paths"]}
    return sorted(shortest(a["paths"]) for a in new if a["paths"] and a["canonical"] in private - public)


def internal_submodules(layout: dict | None) -> set[str]:
    """The first-level submodules a package leaves out of an `__all__` that names at least half of
    them (pandas names api, arrays, io, ... but not core, compat, util); empty when it declares none."""
    if not layout or layout.get("exported") is None:
        return set()
    public, exported = set(layout["public"]), set(layout["exported"])
    return public - exported if 2 * len(exported) >= len(public) else set()


def in_test_module(path: str) -> bool:
    return bool(TEST_MODULE.search(path.rsplit(".", 1)[0]))


def usable_paths(api: dict, package: str, internal: set[str]) -> list[str]:
    """The API's public paths a user would write: none through a test module (pandas.tests.* imports
    `Index` too), nor through one of the package's `internal` first-level submodules."""
    top = package + "."
    return [
        p
        for p in api["paths"]
        if not in_test_module(p) and not (p.startswith(top) and p[len(top) :].split(".", 1)[0] in internal)
    ]


def filter_reason(api: dict, usable: list[str], old_failed: dict[str, str], min_doc_words: int) -> str | None:
    """The first filter that drops `api`; `usable`: its paths a user would write (`usable_paths`);
    `old_failed`: old modules neither imported nor read statically."""
    if under(api, list(old_failed)):
        return "old_module_failed_import"
    if not api["paths"]:
        return "private"
    # a package's own test suite (pandas.tests.*) is no API
    if TEST_MODULE.search(api["module"]) or all(in_test_module(p) for p in api["paths"]):
        return "test_module"
    if not usable:
        return "unexported_module"
    if api["deprecated"]:
        return "deprecated"
    if not api["has_source"]:
        return "no_source"
    if len((api["doc"] or "").split()) < min_doc_words:
        return "thin_docstring"
    if api["inherited_doc"]:
        return "inherited_docstring"
    return None


def under(api: dict, modules: list[str]) -> bool:
    """Whether the API's module or one of its paths lies in one of `modules`."""
    names = [api["canonical"], api["module"], *api["paths"]]
    return any(n == m or n.startswith(m + ".") for n in names for m in modules)


def shortest(paths: list[str]) -> str:
    """Fewest components, then fewest characters, then alphabetical."""
    return min(paths, key=lambda p: (p.count("."), len(p), p))


def row(
    api: dict,
    usable: list[str],
    library: str,
    versions: dict[str, str],
    license: str | None,
    reason: str | None,
) -> dict:
    """A kept API is named by the shortest path a user would write, and lists every path outside the
    test suite (the spy wraps each: `pandas.core.frame.DataFrame` is `pandas.DataFrame`); a dropped
    one keeps all of its own."""
    kept = reason is None
    paths = [p for p in api["paths"] if not in_test_module(p)] if kept else api["paths"]
    named = usable if kept else paths
    return {
        "library": library,
        "old_version": versions["old"],
        "new_version": versions["new"],
        "qualname": shortest(named) if named else api["canonical"],
        "canonical": api["canonical"],
        "paths": paths,
        "kind": api["kind"],
        "module": api["module"],
        "signature": api["signature"],
        "doc": api["doc"],
        "source_file": api["source_file"],
        "lineno": api["lineno"],
        "license": license,
        "kept": reason is None,
        "filter": reason,
    }


def write_text(path: Path, text: str) -> None:
    """Write beside the target, then rename: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def write_json(path: Path, data: dict) -> None:
    write_text(path, json.dumps(data, indent=1) + "\n")
