"""EDIT-Bench (Chi et al. 2025, arXiv 2511.04486): real instructed code edits from inside an IDE.

Problems come from edit requests users made in VS Code (Copilot Arena's EditBenchExt): the file
they had open, the code they highlighted, their cursor and their instruction; the authors wrote
a test suite for each. The paper counts 545 problems: 109 core ones (EDIT-Bench-core), each in
five natural languages (GPT-4o translations), Python and JavaScript (some React).

Hub `copilot-arena/editbench` (the id its harness loads; its README links `copilot-arena/EditBench`),
one jsonl per split: `test` = the core problems (108, the harness says), `complete` = all
languages (540; the published results cover ids 1..545 minus 108, 237, 331, 439, 544). Each row,
as the official harness (github.com/waynchi/editbench, `edit_bench/evaluation.py`) reads it:

- `problem_id` (int), `pair_id` (str, the Copilot Arena record it came from);
- `programming_language`: "python" | "javascript" | "javascript/react";
- `original_code`, `highlighted_code`, `instruction`, `test_code` (str), `cursor_position`;
- `requirements` (requirements.txt text) and `python_version` (for `uv venv --python`);
- `test_harness`: {file name: text or null}: conftest.py and test_utils.py (Python), package.json
  and e.g. jest config or helpers (JavaScript), written next to the tests as they are.

The card's "original_code.py / instruction.txt / package_json / other_files" name these files.
A natural-language column is read into taxonomy when a row has one (`natural_language`; the
harness never reads one, so its name is not confirmed).

Mapped into `Problem`: id = str(problem_id), before = original_code, after = "" (the dataset has
no reference solution; EDIT-Bench scores by its tests only), tests = test_code, instructions =
{"instruction": ...}, language "python" | "js"; `EditBenchPayload` holds the rest and `files`, the
folder the harness builds (the edit goes to `implementation_file`, then `test_command` runs in it).

None of it runs in this project's offline sandbox, which runs program + tests as one script:
Python tests are pytest suites that load the implementation as a module file from that folder,
in a venv with the row's requirements; JavaScript runs `npm install && npm test` (jest). So
`Problem.not_runnable` lists why, including requirements not importable in this interpreter
(`payload.missing_packages`), npm dependencies, and code that
imports GUI or network libraries. The check reads the row and this interpreter; it installs nothing.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from core.benchmarks.options import BenchmarkOptions
from core.hub import is_hub, load_hub_dataset
from core.problems import BenchmarkError, Problem, check_unique, read_jsonl

HUB_ID = "copilot-arena/editbench"


@dataclass
class EditBenchOptions(BenchmarkOptions):
    name: str = "editbench"
    hub_default = True


@dataclass(frozen=True)
class EditBenchPayload:
    """The harness's folder for one problem (less the edit) and what running it would need."""

    highlighted_code: str
    cursor_position: Any
    requirements: str
    python_version: str | None
    test_harness: dict[str, str]  # file name -> text, written next to the tests
    files: dict[str, str]  # the whole folder the harness builds
    implementation_file: str  # where the edit goes
    test_command: tuple[str, ...]
    missing_packages: tuple[str, ...]  # requirements not importable in this interpreter
    npm_packages: tuple[str, ...] | None


SPLITS = ("test", "complete")
LANGUAGES = {"python": "python", "javascript": "js", "javascript/react": "js"}
_ANY = object()
FIELDS: dict[str, Any] = {
    "problem_id": (int, str),
    "pair_id": (str, type(None)),
    "programming_language": (str,),
    "original_code": (str,),
    "highlighted_code": (str, type(None)),  # context fields: tolerate a row without
    "instruction": (str,),
    "test_code": (str,),
    "requirements": (str, type(None)),
    "python_version": (str, type(None)),
    "test_harness": (dict,),
    "cursor_position": _ANY,
}
# The harness writes this file for one problem whose tests import it (create_question_folders).
MISSING_FILES = {"b8451da4-d914-442a-9eb5-6982148c1cab": {"app.py": "fastapp = {}"}}
# Distribution names whose import name differs; others import as the name with - replaced by _.
IMPORT_NAMES = {
    "beautifulsoup4": "bs4",
    "opencv-python": "cv2",
    "opencv-python-headless": "cv2",
    "pillow": "PIL",
    "python-dateutil": "dateutil",
    "python-dotenv": "dotenv",
    "pyyaml": "yaml",
    "scikit-learn": "sklearn",
    "scikit-image": "skimage",
}
GUI_MODULES = {
    "tkinter", "turtle", "pygame", "pyglet", "arcade", "kivy", "wx", "pyautogui", "customtkinter",
    "PyQt5", "PyQt6", "PySide2", "PySide6",
}  # fmt: skip
NETWORK_MODULES = {
    "requests", "httpx", "aiohttp", "urllib3", "urllib.request", "http.client", "socket", "websocket",
    "websockets", "smtplib", "ftplib", "selenium", "openai", "anthropic", "boto3", "yfinance",
}  # fmt: skip


def _check(record: dict[str, Any], where: str) -> None:
    pid = record.get("problem_id", "?")
    for key, types in FIELDS.items():
        if key not in record:
            raise BenchmarkError(f"{where}: problem {pid!r} lacks field {key!r}")
        value = record[key]
        if types is not _ANY and (not isinstance(value, types) or isinstance(value, bool)):
            names = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise BenchmarkError(
                f"{where}: problem {pid!r} field {key!r} must be {names}, got {type(value).__name__}"
            )
    if record["programming_language"] not in LANGUAGES:
        raise BenchmarkError(
            f"{where}: problem {pid!r} field 'programming_language' is {record['programming_language']!r}; "
            f"EDIT-Bench has {sorted(LANGUAGES)}"
        )
    for name, text in record["test_harness"].items():
        if not isinstance(text, (str, type(None))):
            raise BenchmarkError(
                f"{where}: problem {pid!r} field 'test_harness'[{name!r}] must be str or null, "
                f"got {type(text).__name__}"
            )


def requirement_names(text: str) -> list[str]:
    """Distribution names in a requirements.txt (versions, extras, markers, comments dropped)."""
    names: dict[str, str] = {}  # PEP 503 normalized name -> the name as written first
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-")) or ("://" in line and "@" not in line):
            continue  # comments, options (-r, -e, --index-url), bare URLs
        match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line)
        if match:
            names.setdefault(re.sub(r"[-_.]+", "-", match.group(0)).lower(), match.group(0))
    return list(names.values())


@cache
def importable(name: str) -> bool:
    """Whether requirement `name` is installed in this interpreter (distribution, else module)."""
    try:
        importlib.metadata.distribution(name)
        return True
    except importlib.metadata.PackageNotFoundError:
        pass  # not under its distribution name: it may still be importable as a module
    key = re.sub(r"[-_.]+", "-", name).lower()
    try:
        return importlib.util.find_spec(IMPORT_NAMES.get(key, key.replace("-", "_"))) is not None
    except (ImportError, ValueError):
        return False


def imported_modules(code: str) -> set[str]:
    """Absolute module names a Python file imports (by line, so code that does not parse works too)."""
    modules: set[str] = set()
    for match in re.finditer(r"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import|import[ \t]+([^\n#;]+))", code, re.M):
        if match.group(1):
            modules.add(match.group(1))
        else:
            modules.update(part.split()[0] for part in match.group(2).split(",") if part.split())
    return {m for m in modules if m and not m.startswith(".")}


def _flagged(modules: set[str], flagged: set[str]) -> list[str]:
    return sorted(m for m in modules if m in flagged or m.split(".")[0] in flagged)


def _layout(record: dict[str, Any], harness: dict[str, str]) -> tuple[dict[str, str], str, list[str]]:
    """The harness's folder for a problem (less the edit), where the edit goes, and the test command."""
    if record["programming_language"] == "python":
        files = {
            "original_code.py": record["original_code"],
            "test_code.py": record["test_code"],
            "requirements.txt": record["requirements"] or "",
        }
        implementation, command = "implementation1.py", ["python", "-m", "pytest", "test_code.py", "-v", "-s"]
    else:
        ext = "jsx" if record["programming_language"] == "javascript/react" else "js"
        files = {
            f"original_code.{ext}": record["original_code"],
            "tests/test_code.test.js": record["test_code"],
        }
        implementation, command = f"implementation1.{ext}", ["sh", "-c", "npm install && npm test"]
    files.update(harness)
    files.update(MISSING_FILES.get(record["pair_id"], {}))
    return files, implementation, command


def _npm_packages(package_json: str | None) -> list[str] | None:
    """Dependencies and devDependencies of package.json; None when it is absent or not JSON."""
    try:
        spec = json.loads(package_json) if package_json else None
    except json.JSONDecodeError:
        return None
    if not isinstance(spec, dict):
        return None
    deps = [spec.get(key) for key in ("dependencies", "devDependencies")]
    return sorted({name for group in deps if isinstance(group, dict) for name in group})


def _not_runnable(record: dict[str, Any], harness: dict[str, str]) -> tuple[list[str], list[str], list[str]]:
    """(reasons, missing Python packages, npm packages): why the offline sandbox cannot run it."""
    reasons: list[str] = []
    missing: list[str] = []
    npm: list[str] = []
    if record["programming_language"] == "python":
        reasons.append(
            "pytest suite: the harness writes original_code.py, the edit as implementation1.py, test_code.py, "
            "requirements.txt and the test_harness files into one folder and runs `python -m pytest "
            f"test_code.py` there in a venv (Python {record['python_version'] or '?'}); the tests load the "
            "implementation as a module file, while this sandbox runs program + tests as one script"
        )
        requirements = record["requirements"] or ""
        missing = [name for name in requirement_names(requirements) if not importable(name)]
        if missing:
            reasons.append(f"requirements not importable here: {', '.join(missing)}")
        urls = [line.strip() for line in requirements.splitlines() if "://" in line or line.startswith("-e")]
        if urls:
            reasons.append(f"requirements install from URLs or VCS: {'; '.join(urls)}")
        modules = imported_modules(record["original_code"])
        if gui := _flagged(modules, GUI_MODULES):
            reasons.append(f"imports GUI libraries ({', '.join(gui)}): needs a display")
        if net := _flagged(modules, NETWORK_MODULES):
            reasons.append(
                f"imports network libraries ({', '.join(net)}): may need the network, which the sandbox "
                "blocks, unless the tests mock it"
            )
    else:
        reasons.append(
            "jest suite: the harness writes original_code.js(x), the edit as implementation1.js(x), "
            "tests/test_code.test.js and the test_harness files into one folder and runs `npm install && "
            "npm test`; this sandbox runs one `node main.js` script"
        )
        packages = _npm_packages(harness.get("package.json"))
        if packages is None:
            reasons.append("test_harness has no valid package.json: `npm test` has nothing to run")
        elif packages:
            npm = packages
            reasons.append(f"npm dependencies need the npm registry: {', '.join(packages)}")
    return reasons, missing, npm


def problem_from_editbench(record: dict[str, Any], where: str) -> Problem:
    _check(record, where)
    pid = str(record["problem_id"])
    harness = {name: text for name, text in record["test_harness"].items() if text is not None}
    files, implementation, command = _layout(record, harness)
    reasons, missing, npm = _not_runnable(record, harness)
    return Problem(
        id=pid,
        name=f"editbench_{pid}",
        before=record["original_code"],
        after="",  # EDIT-Bench has no reference edit: its tests are the only judge
        tests=record["test_code"],
        instructions={"instruction": record["instruction"]},
        language=LANGUAGES[record["programming_language"]],
        taxonomy={
            "programming_language": record["programming_language"],
            "natural_language": record.get("natural_language"),
            "pair_id": record["pair_id"],
        },
        payload=EditBenchPayload(
            highlighted_code=record["highlighted_code"] or "",
            cursor_position=record["cursor_position"],
            requirements=record["requirements"] or "",
            python_version=record["python_version"],
            test_harness=harness,
            files=files,
            implementation_file=implementation,
            test_command=tuple(command),
            missing_packages=tuple(missing),
            npm_packages=None if npm is None else tuple(npm),
        ),
        not_runnable=tuple(reasons),
    )


def load_editbench(path: str | None, split: str = "test") -> list[Problem]:
    """Problems from `path` (a jsonl in the hub's schema; `split` is then not used), or from the
    hub's `split` (test: core problems, complete: every language) when `path` is None or `hub:ID`."""
    if split not in SPLITS:
        raise BenchmarkError(f"EDIT-Bench split {split!r}: choose one of {SPLITS}")
    if path is not None and not is_hub(path):
        records = read_jsonl(Path(path))
        return check_unique([problem_from_editbench(r, where) for where, r in records], path)
    ref = path or f"hub:{HUB_ID}"
    ds = load_hub_dataset(ref, None, split, "benchmark.path")
    name = ref.removeprefix("hub:")
    return check_unique(
        [problem_from_editbench(dict(r), f"{name}:{split}[{i}]") for i, r in enumerate(ds)], name
    )


def load(options: EditBenchOptions) -> list[Problem]:
    return load_editbench(options.path)
