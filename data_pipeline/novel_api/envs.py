"""One virtualenv per library version, so two versions (and their dependencies) never share a site-packages.

**Dated environments**: a version from the registry is installed with the dependencies that were
current when it was released, not today's (flask 2.2.0 does not import with a 2024 werkzeug). Its
release time comes from the index's JSON simple API (PEP 691, the `upload-time` of PEP 700) and
uv resolves with `--exclude-newer` one day after it; the resolver and the date go into the
marker and the discovery manifest. Where the index gives no date (a local wheel, an offline
mirror), pip installs the newest dependencies and the env says it is undated.

`create_env` never raises for a failed install: it returns `ok=False` with the installer's one-line
error, so a caller counts bad libraries instead of crashing on them. An env whose marker file records
the same library, version, wheel and date is reused (a rerun resumes). `resolve_version` turns a
cutoff date into the newest release uploaded before it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path

from packaging.version import InvalidVersion, Version

from core.errors import UserError

MARKER = "editforge-env.json"
PYPI_JSON = "https://pypi.org/pypi/{}/json"
SIMPLE_INDEX = "https://pypi.org/simple"
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
# Dependencies released up to a day after the library still count as "current when it was released".
DATED_MARGIN = timedelta(days=1)
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
INSTALLED_VERSION = "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))"
REQUIRES = "import importlib.metadata as m, json, sys; print(json.dumps(m.requires(sys.argv[1]) or []))"
MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")
# Set in the caller's environment these would send pip's install somewhere else than the venv.
PIP_REDIRECTS = ("PIP_TARGET", "PIP_PREFIX", "PIP_ROOT", "PIP_USER")


@dataclass
class LibraryEnv:
    version: str
    python: Path  # the venv's interpreter
    path: Path
    ok: bool
    error: str = ""  # one line when not ok
    resolver: str = "pip"  # "uv --exclude-newer" for a dated env
    as_of: str | None = None  # the dependencies' cutoff (ISO, UTC) of a dated env


class _Failed(Exception):
    """A step of the install failed; the message is one line."""


def wheel_version(wheel: Path) -> str | None:
    """The version in a wheel's file name (NAME-VERSION[-BUILD]-PY-ABI-PLATFORM.whl), None if not one."""
    parts = wheel.name.split("-")
    return parts[1] if wheel.name.endswith(".whl") and len(parts) in (5, 6) else None


def older(a: str, b: str) -> bool:
    """Whether version `a` comes before `b` (unparsable versions are taken as ordered)."""
    try:
        return Version(a) < Version(b)
    except InvalidVersion:
        return True


def same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def venv_python(path: Path) -> Path:
    return path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def create_env(
    root: Path,
    library: str,
    version: str | None,
    wheel: Path | None,
    timeout: float = 1800.0,
    dated: bool = True,
) -> LibraryEnv:
    """Install `library==version` (with its dependencies, dated when the index says when it was
    released and `dated` is on) or the wheel into `root/<version>`."""
    label = version or (wheel_version(wheel) if wheel is not None else None)
    if not label:
        why = f"{wheel.name} is not a wheel file name" if wheel is not None else "no version and no wheel"
        return LibraryEnv("", Path(), Path(root), False, f"{library}: {why}")
    path = Path(root) / re.sub(r"[^\w.+!-]", "_", label)
    python = venv_python(path)
    released = release_time(library, label) if dated and wheel is None else None
    as_of = (released + DATED_MARGIN).strftime("%Y-%m-%dT%H:%M:%SZ") if released else None

    def result(ok: bool, error: str = "") -> LibraryEnv:
        resolver = "uv --exclude-newer" if as_of else "pip"
        return LibraryEnv(label, python, path, ok, error, resolver, as_of)

    if wheel is not None and not wheel.is_file():
        return result(False, f"wheel not found: {wheel}")
    try:
        return result(*_install(path, python, library, label, wheel, timeout, as_of))
    except OSError as exc:  # an unwritable root, an unreadable wheel
        return result(False, f"{type(exc).__name__}: {exc}")


def _install(
    path: Path, python: Path, library: str, label: str, wheel: Path | None, timeout: float, as_of: str | None
) -> tuple[bool, str]:
    """(ok, error): the env its marker describes is reused, any other is recreated and installed."""
    want = {
        "library": library,
        "version": label,
        "wheel_sha256": _sha256(wheel) if wheel else None,
        "as_of": as_of,
    }
    if python.exists() and _read_marker(path) == want:
        return True, ""
    (path / MARKER).unlink(missing_ok=True)
    target = str(wheel.resolve()) if wheel is not None else f"{library}=={label}"
    try:
        _run([sys.executable, "-m", "venv", "--clear", str(path)], timeout)
        _pip_install(python, target, as_of, timeout)
        installed = _run([str(python), "-I", "-c", INSTALLED_VERSION, library], 120).strip()
    except _Failed as exc:
        return False, str(exc)
    if not same_version(installed, label):
        return False, f"installed {library} {installed}, not {label}"
    (path / MARKER).write_text(json.dumps({**want, "installed": installed}, indent=1) + "\n")
    return True, ""


# Build backends are exempt from the date: a 2019 setuptools does not run on today's Python, and
# what a build backend was at the release changes nothing of the library's API.
BUILD_BACKENDS = (
    "setuptools",
    "wheel",
    "flit-core",
    "hatchling",
    "poetry-core",
    "pdm-backend",
    "setuptools-scm",
)


def dated_flags(as_of: str) -> list[str]:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    exempt = [flag for name in BUILD_BACKENDS for flag in ("--exclude-newer-package", f"{name}={now}")]
    return ["--exclude-newer", as_of, *exempt]


def needed_extras(requires: list[str], failed: dict[str, str]) -> list[str]:
    """The library's extras that provide a module its failed imports miss (`greenlet` for
    sqlalchemy's asyncio): `requires` are its Requires-Dist lines, `failed` module -> error."""
    from packaging.requirements import InvalidRequirement, Requirement

    missing = {
        normalized_name(m.group(1).split(".")[0]) for e in failed.values() if (m := MISSING_MODULE.search(e))
    }
    extras: set[str] = set()
    for line in requires:  # extras for the project's own tests, docs or development are not the API's
        if re.search(r"extra\s*==\s*['\"](tests?|testing|dev|develop|docs?|lint|typing)['\"]", line):
            continue
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        marker = str(requirement.marker or "")
        named = re.findall(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
        if named and normalized_name(requirement.name) in missing:
            extras.update(named)
    return sorted(extras)


def install_extras(env: LibraryEnv, library: str, extras: list[str], timeout: float = 1800.0) -> str:
    """Add `library[extras]` (same version, same date) to the env; "" or the installer's one-line error."""
    target = f"{library}[{','.join(extras)}]=={env.version}"
    try:
        _pip_install(env.python, target, env.as_of, timeout)
    except _Failed as exc:
        return str(exc)
    return ""


def declared_requirements(env: LibraryEnv, library: str) -> list[str]:
    """The library's Requires-Dist lines, as its env's metadata gives them."""
    try:
        return json.loads(_run([str(env.python), "-I", "-c", REQUIRES, library], 120))
    except (_Failed, ValueError):
        return []


_UV_LOCK = threading.Lock()


def _pip_install(python: Path, target: str, as_of: str | None, timeout: float) -> None:
    """`target` into the env of `python`: dated by uv when there is a date, else by pip."""
    if as_of:
        _run(
            [uv_binary(), "pip", "install", "--python", str(python), *dated_flags(as_of), "-q", target],
            timeout,
        )
    else:
        _run(
            [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", "--no-input", target],
            timeout,
        )


def uv_binary() -> str:
    """uv's executable (a dependency of the project: its resolver can exclude newer releases).
    Looked up under a lock: `find_uv_bin` reads sysconfig, whose first use is not thread-safe."""
    with _UV_LOCK:
        try:
            from uv import find_uv_bin

            return find_uv_bin()
        except (ImportError, FileNotFoundError, TypeError):
            beside = Path(sys.executable).with_name("uv")
            found = shutil.which("uv") or (str(beside) if beside.exists() else None)
    if found is None:
        raise _Failed("uv is not installed (pip install uv): dated environments need its --exclude-newer")
    return found


def index_url() -> str:
    """The index uv resolves from: its own settings, else pip's, else PyPI."""
    for key in ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"):
        if os.environ.get(key):
            return os.environ[key].rstrip("/")
    return SIMPLE_INDEX


def normalized_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def file_version(filename: str) -> str | None:
    """The version in a distribution's file name: a wheel's, or an sdist's (`name-1.2.tar.gz`)."""
    if filename.endswith(".whl"):
        return wheel_version(Path(filename))
    for ext in (".tar.gz", ".zip", ".tar.bz2", ".tgz"):
        if filename.endswith(ext):
            stem = filename[: -len(ext)]
            return stem.rsplit("-", 1)[1] if "-" in stem else None
    return None


def index_files(library: str, index: str | None = None) -> tuple[str, list[dict]] | None:
    """(page URL, files) of the library's page in the index's JSON simple API (PEP 691); None when
    there is no index to ask (`PIP_NO_INDEX`, a local path) or it cannot be read."""
    url = f"{index or index_url()}/{normalized_name(library)}/"
    if os.environ.get("PIP_NO_INDEX") or not url.startswith(("http://", "https://")):
        return None
    request = urllib.request.Request(url, headers={"Accept": SIMPLE_JSON})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            files = json.load(response).get("files", [])
    except (urllib.error.URLError, OSError, ValueError, AttributeError):
        return None
    return url, [f for f in files if isinstance(f, dict)]


def release_time(library: str, version: str, index: str | None = None) -> datetime | None:
    """When `library==version`'s first file was uploaded (`upload-time`, PEP 700); None when the
    index cannot be read or gives no time."""
    page = index_files(library, index)
    times = [
        datetime.fromisoformat(f["upload-time"].replace("Z", "+00:00"))
        for f in (page[1] if page else [])
        if f.get("upload-time")
        and (found := file_version(str(f.get("filename", "")))) is not None
        and same_version(found, version)
    ]
    return min(times) if times else None


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_marker(path: Path) -> dict | None:
    try:
        found = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return (
        {k: found.get(k) for k in ("library", "version", "wheel_sha256", "as_of")}
        if isinstance(found, dict)
        else None
    )


def _run(cmd: list[str], timeout: float) -> str:
    """Run a step with the caller's pip settings (PIP_NO_INDEX, an index URL), never its PYTHON* ones."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") and k not in PIP_REDIRECTS}
    try:
        done = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise _Failed(f"{Path(cmd[0]).name} {' '.join(cmd[1:4])} timed out after {timeout:.0f}s") from None
    except OSError as exc:
        raise _Failed(f"{cmd[0]}: {exc}") from None
    if done.returncode != 0:
        raise _Failed(
            error_line(done.stderr or done.stdout) or f"{' '.join(cmd[:4])} exited {done.returncode}"
        )
    return done.stdout


def error_line(text: str) -> str:
    """pip's last `ERROR:` line (its verdict); uv's `error:` line with the exception behind it; else
    the last line of output."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    if errors:
        return errors[-1]
    verdict = next((line for line in lines if line.startswith("error:")), None)
    if verdict:
        causes = [line for line in lines if re.match(r"^[A-Za-z_.]*(Error|Exception): ", line)]
        return f"{verdict} ({causes[-1]})" if causes else verdict
    return (lines or [""])[-1]


def resolve_version(library: str, spec: str) -> str:
    """`spec` is a version ("20.2.1") or a cutoff date ("2021-06-30", from the registry's upload times)."""
    spec = spec.strip()
    if DATE.fullmatch(spec):
        try:
            cutoff = date.fromisoformat(spec)
        except ValueError:
            raise UserError(f"{library}: {spec!r} is not a date (YYYY-MM-DD)") from None
        found = release_before(fetch_releases(library), cutoff)
        if found is None:
            raise UserError(
                f"{library}: no final, unyanked release was uploaded before {spec}; pick a later date or a version"
            )
        return found
    try:
        return str(Version(spec))
    except InvalidVersion:
        raise UserError(
            f"{library}: {spec!r} is neither a version (like 20.2.1) nor a cutoff date (like 2021-06-30)"
        ) from None


def release_before(releases: dict[str, list[dict]], cutoff: date) -> str | None:
    """The highest final release whose first unyanked file was uploaded before `cutoff` (00:00 UTC).

    Highest version rather than latest upload: a maintenance release of an old line (3.2.10 uploaded
    after 4.0) must not hide the newer API that already existed at the cutoff.
    """
    limit = datetime.combine(cutoff, time(), tzinfo=timezone.utc)
    best: tuple[Version, str] | None = None
    for name, files in releases.items():
        try:
            version = Version(name)
        except InvalidVersion:
            continue
        live = [f for f in files if not f.get("yanked")]
        if version.is_prerelease or not live:
            continue
        uploaded = min(datetime.fromisoformat(f["upload_time_iso_8601"].replace("Z", "+00:00")) for f in live)
        if uploaded < limit and (best is None or version > best[0]):
            best = (version, name)
    return best[1] if best else None


def fetch_releases(library: str) -> dict[str, list[dict]]:
    url = PYPI_JSON.format(library)
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return json.load(response)["releases"]
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise UserError(f"{library}: no such project on PyPI ({url})") from None
        raise UserError(
            f"{library}: PyPI answered {exc.code} for {url}; pass an exact version instead"
        ) from None
    except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
        raise UserError(
            f"{library}: cannot read release dates from {url} ({exc}); pass an exact version instead of a date"
        ) from None
