"""eval.novelapi.classify: hand-written failing programs per class, actually run against a tiny
fictional library `novlib` with a spy on every alias of the target `novlib.text.slugify`. The
classes are NovelAPIBench's (§3): WrongAPISelection (the target never invoked: a sibling or a
hallucinated symbol instead), WrongImport (the right symbol, a wrong or missing import path),
WrongParam (the right call, a wrong argument), WrongShapeDtype (the right call, a violation
raised inside the API's body), WrongLogic (the right call; the program around it is wrong)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from core.signatures import parse_signature
from eval.novelapi.classify import (
    Attempt,
    call_shape,
    classify,
    explain,
    parse_exception,
    target_symbol,
)
from eval.novelapi.library import names_in

TARGET = "novlib.text.slugify"
ALIASES = ("novlib.text.slugify", "novlib.compat.slugify")
SIGNATURE = "(text, sep='-', max_len=None)"

NOVLIB = {
    "__init__.py": "from . import text\n",
    "text.py": (
        "import re\n\n\n"
        "def slugify(text, sep='-', max_len=None):\n"
        "    words = re.findall(r'[a-z0-9]+', text.lower())\n"
        "    slug = sep.join(words)\n"
        "    if max_len is not None:\n"
        "        slug = slug[:max_len].rstrip(sep)\n"
        "    return slug\n\n\n"
        "def normalize(text):\n"
        "    return ' '.join(text.split())\n\n\n"
        "def split_words(text):\n"
        "    return re.findall(r'\\w+', text.lower())\n\n\n"
        "class Slugger:\n"
        "    def clean(self, text):\n"
        "        return ' '.join(text.split())\n"
    ),
    "compat.py": "from .text import slugify  # noqa: F401\n",
}

# Installs one spy on every alias; prints the record as one JSON line at exit.
PRELUDE = f"""\
import atexit as _atexit, functools as _functools, importlib as _importlib, json as _json
_SPY = []
def _install_spy(paths):
    module, name = paths[0].rsplit(".", 1)
    original = getattr(_importlib.import_module(module), name)
    @_functools.wraps(original)
    def spy(*args, **kwargs):
        _SPY.append({{"args": [repr(a) for a in args], "kwargs": {{k: repr(v) for k, v in kwargs.items()}}}})
        return original(*args, **kwargs)
    for path in paths:
        module, name = path.rsplit(".", 1)
        setattr(_importlib.import_module(module), name, spy)
    _atexit.register(lambda: print("@@spy " + _json.dumps({{"calls": _SPY}}), flush=True))
_install_spy({ALIASES!r})
del _install_spy
"""

# The tests of the task; a failed comparison follows the harness convention the classifier documents.
HARNESS = """

def _check(got, expected):
    if got != expected or type(got) is not type(expected):
        raise AssertionError(
            f"expected {expected!r} ({type(expected).__name__}), got {got!r} ({type(got).__name__})"
        )


_check(make_slug("Hello, World! Again"), "hello_world")
_check(make_slug("A B"), "a_b")
print("@@passed")
"""

REFERENCE = """\
from novlib.text import slugify


def make_slug(title):
    return slugify(title, sep="_", max_len=12)
"""


def _body(call: str) -> str:
    return f"from novlib.text import slugify\n\n\ndef make_slug(title):\n    return {call}\n"


# (id, expected class, program, a piece of the expected reason)
CASES = [
    # ---------------------------------------------------------------- OK
    ("ok-reference", "OK", REFERENCE, "passed"),
    (
        "ok-compat-alias-positional",
        "OK",
        'from novlib.compat import slugify as to_slug\n\n\ndef make_slug(title):\n    return to_slug(title, "_", 12)\n',
        "passed",
    ),
    (
        "ok-module-attribute",
        "OK",
        'import novlib.text as nt\n\n\ndef make_slug(title):\n    return nt.slugify(title, max_len=12, sep="_")\n',
        "passed",
    ),
    # ---------------------------------------------------------------- WrongSyntax
    ("syntax-unclosed-paren", "WrongSyntax", _body('slugify(title, sep="_", max_len=12'), "never closed"),
    (
        "syntax-indentation",
        "WrongSyntax",
        'from novlib.text import slugify\n\n\ndef make_slug(title):\nreturn slugify(title, sep="_", max_len=12)\n',
        "IndentationError",
    ),
    (
        "syntax-unterminated-string",
        "WrongSyntax",
        _body('slugify(title, sep="_, max_len=12)'),
        "unterminated",
    ),
    (
        "syntax-return-outside-function",  # parses, but compile() rejects it
        "WrongSyntax",
        'from novlib.text import slugify\n\nmake_slug = lambda title: slugify(title, sep="_", max_len=12)\n'
        "return make_slug\n",
        "'return' outside function",
    ),
    # ---------------------------------------------------------------- WrongImport
    (
        "import-from-package-root",  # ImportError and no call: rule 3 before rule 4
        "WrongImport",
        REFERENCE.replace("from novlib.text import", "from novlib import"),
        "ImportError: cannot import name 'slugify'",
    ),
    (
        "import-missing-module",
        "WrongImport",
        REFERENCE.replace("novlib.text", "novlib.strings"),
        "ModuleNotFoundError",
    ),
    (
        "import-attribute-of-package",
        "WrongImport",
        'import novlib\n\n\ndef make_slug(title):\n    return novlib.slugify(title, sep="_", max_len=12)\n',
        "module 'novlib' has no attribute 'slugify'",
    ),
    (
        "import-forgotten",
        "WrongImport",
        _body('slugify(title, sep="_", max_len=12)').split("\n", 1)[1],
        "import is missing",
    ),
    (
        "import-right-symbol-from-a-made-up-library",
        "WrongImport",
        REFERENCE.replace("novlib.text", "slugkit"),
        "slugify is novlib.text.slugify's symbol, at a wrong path",
    ),
    (
        "import-hidden-by-fallback",  # no exception: the static wrong path (rule 3d) beats rule 4
        "WrongImport",
        "try:\n    from novlib import slugify\nexcept ImportError:\n    import re\n\n"
        '    def slugify(text, sep="-", max_len=None):\n'
        "        return sep.join(re.findall(r'\\w+', text.lower()))[:max_len]\n\n\n"
        'def make_slug(title):\n    return slugify(title, sep="_", max_len=12)\n',
        "imports novlib.slugify",
    ),
    # ---------------------------------------------------------------- WrongAPISelection
    (
        "api-hallucinated-symbol",  # an ImportError, but of a name the library has nowhere
        "WrongAPISelection",
        REFERENCE.replace("import slugify", "import slugify_title").replace(
            "return slugify(", "return slugify_title("
        ),
        "slugify_title exists nowhere in the library",
    ),
    (
        "api-hallucinated-attribute",
        "WrongAPISelection",
        'import novlib.text as nt\n\n\ndef make_slug(title):\n    return nt.to_slug(title, sep="_", max_len=12)\n',
        "to_slug exists nowhere in the library",
    ),
    (
        "api-other-library-function",
        "WrongAPISelection",
        'from novlib.text import split_words\n\n\ndef make_slug(title):\n    return "_".join(split_words(title))[:12]\n',
        "called novlib.text.split_words instead",
    ),
    (
        "api-reimplemented-with-re",
        "WrongAPISelection",
        'import re\n\n\ndef make_slug(title):\n    return re.sub(r"[^a-z0-9]+", "_", title.lower())[:12]\n',
        "no novlib API called",
    ),
    (
        "api-own-slugify",
        "WrongAPISelection",
        'import novlib.text\n\n\ndef slugify(text, sep="-", max_len=None):\n'
        "    return sep.join(text.lower().split())[:max_len]\n\n\n"
        'def make_slug(title):\n    return slugify(title, sep="_", max_len=12)\n',
        "reimplemented it as its own slugify()",
    ),
    (
        "api-imported-but-unused",
        "WrongAPISelection",
        "from novlib.text import normalize, slugify  # noqa\n\n\n"
        'def make_slug(title):\n    return normalize(title).lower().replace(" ", "_")[:12]\n',
        "called novlib.text.normalize instead",
    ),
    (
        "api-selection-before-shape",  # a TypeError of values, but no call: rule 4 before rule 6
        "WrongAPISelection",
        'from novlib.text import split_words\n\n\ndef make_slug(title):\n    return split_words(title) + "_"\n',
        "never called",
    ),
    # ---------------------------------------------------------------- WrongParam
    (
        "param-unknown-keyword",
        "WrongParam",
        _body('slugify(title, separator="_", max_len=12)'),
        "unexpected keyword argument 'separator'",
    ),
    ("param-too-many-positional", "WrongParam", _body('slugify(title, "_", 12, True)'), "4 were given"),
    ("param-missing-required", "WrongParam", _body('slugify(sep="_", max_len=12)'), "missing 1 required"),
    (
        "param-omitted-argument",  # no exception at the call: the shape differs from the reference's
        "WrongParam",
        _body("slugify(title, max_len=12)"),
        "passes (text, max_len); the reference passes (text, sep, max_len)",
    ),
    (
        "param-before-shape",  # 12 lands in `sep` (AttributeError on an int): rule 5 before rule 6
        "WrongParam",
        _body("slugify(title, 12)"),
        "passes (text, sep)",
    ),
    # ---------------------------------------------------------------- WrongShapeDtype
    (
        "shape-list-argument",
        "WrongShapeDtype",
        _body('slugify(title.split(), sep="_", max_len=12)'),
        "'list' object has no attribute 'lower'",
    ),
    (
        "shape-str-max-len",
        "WrongShapeDtype",
        _body('slugify(title, sep="_", max_len="12")'),
        "slice indices must be integers",
    ),
    (
        "shape-bytes-separator",
        "WrongShapeDtype",
        _body('slugify(title, sep=b"_", max_len=12)'),
        "bytes-like object",
    ),
    # ---------------------------------------------------------------- WrongParam by value
    ("param-wrong-separator", "WrongParam", _body('slugify(title, sep="-", max_len=12)'), "sep='-' differs"),
    ("param-wrong-max-len", "WrongParam", _body('slugify(title, sep="_", max_len=5)'), "max_len=5 differs"),
    # ---------------------------------------------------------------- WrongLogic
    (
        "logic-wrong-case",
        "WrongLogic",
        _body('slugify(title, sep="_", max_len=12).upper()'),
        "AssertionError",
    ),
    (  # a type error of the candidate's own code, not inside the API's body
        "logic-returns-list",
        "WrongLogic",
        _body('slugify(title, sep="_", max_len=12).split("_")'),
        "expected 'hello_world' (str), got",
    ),
    (
        "logic-own-type-error",
        "WrongLogic",
        _body('slugify(title, sep="_", max_len=12) + 1'),
        "can only concatenate",
    ),
    (
        "logic-index-error",
        "WrongLogic",
        _body('slugify(title, sep="_", max_len=12).split("_")[5]'),
        "IndexError: list index out of range",
    ),
    (
        "logic-timeout",  # killed before exit, so no spy record: the AST shows the target is called
        "WrongLogic",
        "from novlib.text import slugify\n\n\ndef make_slug(title):\n"
        '    slug = slugify(title, sep="_", max_len=12)\n    while True:\n        slug = slug + ""\n',
        "'timeout'",
    ),
]


@pytest.fixture(scope="module")
def novlib_path(tmp_path_factory):
    root = tmp_path_factory.mktemp("novelapi")
    (root / "novlib").mkdir()
    for name, text in NOVLIB.items():
        (root / "novlib" / name).write_text(text)
    return root


def run(code: str, path, reference_calls: tuple[dict, ...] = (), timeout: float = 10.0) -> Attempt:
    """Run `code` + the tests under the spy, as the sandbox would, and build the Attempt."""
    program = PRELUDE + code + HARNESS
    env = {**os.environ, "PYTHONPATH": str(path), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        proc = subprocess.run(
            [sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=timeout
        )
        stdout, stderr = proc.stdout, proc.stderr
        status = "passed" if proc.returncode == 0 and "@@passed" in stdout else "failed"
    except subprocess.TimeoutExpired as expired:
        stdout = (
            (expired.stdout or b"").decode() if isinstance(expired.stdout, bytes) else expired.stdout or ""
        )
        stderr = (
            (expired.stderr or b"").decode() if isinstance(expired.stderr, bytes) else expired.stderr or ""
        )
        status = "timeout"
    spy = [line for line in stdout.splitlines() if line.startswith("@@spy ")]
    calls = tuple(json.loads(spy[-1][len("@@spy ") :])["calls"]) if spy else ()
    return Attempt(
        code=code + HARNESS,
        target=TARGET,
        aliases=ALIASES,
        signature=SIGNATURE,
        passed=status == "passed",
        status=status,
        stderr=stderr,
        calls=calls,
        reference_calls=reference_calls,
        library_folders=(str(path / "novlib"),),
        library_names=names_in([str(path / "novlib")]),
    )


@pytest.fixture(scope="module")
def reference_calls(novlib_path):
    attempt = run(REFERENCE, novlib_path)
    assert attempt.passed, attempt.stderr
    assert attempt.calls == (
        {"args": ["'Hello, World! Again'"], "kwargs": {"sep": "'_'", "max_len": "12"}},
        {"args": ["'A B'"], "kwargs": {"sep": "'_'", "max_len": "12"}},
    )
    return attempt.calls


@pytest.mark.parametrize(("expected", "code", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_program_gets_its_class_and_reason(novlib_path, reference_calls, expected, code, reason):
    attempt = run(code, novlib_path, reference_calls, timeout=1.5 if expected == "WrongLogic" else 10.0)
    cls, why = explain(attempt)
    assert (cls, attempt.passed) == (expected, expected == "OK"), (why, attempt.stderr, attempt.calls)
    assert reason in why
    assert "\n" not in why and classify(attempt) == cls


# ------------------------------------------------------------------------- the WrongImport boundary (§3.3)
# WrongImport is the correct symbol with a wrong or missing import path; anything else that was
# never invoked is WrongAPISelection, however near its name lies to the target's.
BOUNDARY = [
    (
        "sibling-api-at-the-wrong-path",  # split_words lives in novlib.text, not in novlib
        "WrongAPISelection",
        'from novlib import split_words\n\n\ndef make_slug(title):\n    return "_".join(split_words(title))\n',
        "split_words is another name of the library",
    ),
    (
        "method-name-used-as-a-function",  # Slugger.clean, imported as if a module function
        "WrongAPISelection",
        'from novlib.text import clean\n\n\ndef make_slug(title):\n    return clean(title).replace(" ", "_")\n',
        "clean is another name of the library",
    ),
    (
        "method-name-as-a-module-attribute",
        "WrongAPISelection",
        "import novlib.text\n\n\ndef make_slug(title):\n    return novlib.text.clean(title)\n",
        "module 'novlib.text' has no attribute 'clean'",
    ),
    (
        "made-up-symbol",
        "WrongAPISelection",
        'from novlib.text import slugify_title\n\n\ndef make_slug(title):\n    return slugify_title(title, "_")\n',
        "slugify_title exists nowhere in the library",
    ),
    (
        "right-symbol-from-the-wrong-module",  # a real module that lacks it
        "WrongImport",
        REFERENCE.replace("from novlib.text import", "from json import"),
        "slugify is novlib.text.slugify's symbol, at a wrong path",
    ),
    (
        "right-symbol-from-a-missing-module-imported-whole",
        "WrongImport",
        'import novlib.strings as ns\n\n\ndef make_slug(title):\n    return ns.slugify(title, sep="_", max_len=12)\n',
        "No module named 'novlib.strings'",
    ),
    (
        "right-symbol-never-imported",
        "WrongImport",
        'def make_slug(title):\n    return slugify(title, sep="_", max_len=12)\n',
        "the import is missing",
    ),
]


@pytest.mark.parametrize(
    ("expected", "code", "reason"), [c[1:] for c in BOUNDARY], ids=[c[0] for c in BOUNDARY]
)
def test_wrong_import_is_only_the_right_symbol_at_a_wrong_path(
    novlib_path, reference_calls, expected, code, reason
):
    attempt = run(code, novlib_path, reference_calls)
    assert "Slugger" in attempt.library_names and "clean" in attempt.library_names  # the sibling is known
    cls, why = explain(attempt)
    assert (cls, attempt.calls) == (expected, ()), (why, attempt.stderr)
    assert reason in why, why


METHOD = "novlib.text.Slugger.clean"


@pytest.mark.parametrize("modules", [frozenset(), frozenset({"novlib", "novlib.text", "novlib.compat"})])
@pytest.mark.parametrize(
    ("code", "stderr", "expected"),
    [
        # the method's name called as a module function: another symbol
        ("from novlib.text import clean\nclean('a b')\n", "ImportError: cannot import name 'clean' from 'novlib.text'", "WrongAPISelection"),
        ("import novlib.text\nnovlib.text.clean('a b')\n", "AttributeError: module 'novlib.text' has no attribute 'clean'", "WrongAPISelection"),
        # its class at a wrong path, or never imported: the right symbol
        ("from novlib import Slugger\nSlugger().clean('a b')\n", "ImportError: cannot import name 'Slugger' from 'novlib'", "WrongImport"),
        ("Slugger().clean('a b')\n", "NameError: name 'Slugger' is not defined", "WrongImport"),
    ],
)  # fmt: skip
def test_a_method_target_is_its_class_and_name(code, stderr, expected, modules):
    method = Attempt(
        code=code, target=METHOD, aliases=(METHOD,), signature="(self, text)", passed=False, status="failed",
        stderr=TB + stderr, library_names=frozenset({"Slugger", "clean", "slugify"}), library_modules=modules,
    )  # fmt: skip
    assert explain(method)[0] == expected, explain(method)


def test_the_symbol_of_a_qualified_name():
    modules = frozenset({"novlib", "novlib.text", "novlib.Caps"})
    assert target_symbol("novlib.text.slugify", modules) == ("slugify",)
    assert target_symbol("novlib.text.Slugger.clean", modules) == ("Slugger", "clean")
    assert target_symbol("novlib.Caps.Thing", modules) == ("Thing",)  # a module, whatever its case
    assert target_symbol("novlib.text.Slugger.clean") == ("Slugger", "clean")  # PEP 8 without modules
    assert target_symbol("novlib.text.slugify") == ("slugify",)


# ------------------------------------------------------------------------- precedence on synthetic attempts
def attempt(**changes) -> Attempt:
    base = {
        "code": REFERENCE,
        "target": TARGET,
        "aliases": ALIASES,
        "signature": SIGNATURE,
        "passed": False,
        "status": "failed",
        "stderr": "",
        "calls": ({"args": ["'y'"], "kwargs": {"sep": "'_'", "max_len": "12"}},),
        "reference_calls": ({"args": ["'y'"], "kwargs": {"sep": "'_'", "max_len": "12"}},),
    }
    return Attempt(**{**base, **changes})


TB = 'Traceback (most recent call last):\n  File "<string>", line 9, in <module>\n'
# the same, raised inside the library (the target's body)
TB_LIB = TB + '  File "/venv/lib/python3.11/site-packages/novlib/text.py", line 6, in slugify\n'


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"passed": True, "status": "passed", "stderr": TB + "ImportError: x", "calls": ()}, "OK"),
        ({"code": "def f(:\n", "stderr": TB + "ImportError: x", "calls": ()}, "WrongSyntax"),
        ({"status": "empty", "code": "   \n"}, "WrongSyntax"),
        ({"status": "syntax_error"}, "WrongSyntax"),
        ({"code": "x = 1\0"}, "WrongSyntax"),  # null byte: compile() raises ValueError / SyntaxError
        # the target never reached: the target's own symbol at a missing module is an import path;
        # a missing module the code reaches nothing of the target through, or another library, a
        # selection
        (
            {
                "code": "import novlib.txt as t\n\ndef make_slug(title):\n    return t.slugify(title)\n",
                "stderr": TB + "ModuleNotFoundError: No module named 'novlib.txt'",
                "calls": (),
            },
            "WrongImport",
        ),
        (
            {"stderr": TB + "ModuleNotFoundError: No module named 'novlib.txt'", "calls": ()},
            "WrongAPISelection",
        ),
        ({"stderr": TB + "ModuleNotFoundError: No module named 'numpy'", "calls": ()}, "WrongAPISelection"),
        (
            {"stderr": TB + "ImportError: cannot import name 'shorten' from 'novlib'", "calls": ()},
            "WrongAPISelection",
        ),
        (  # a sibling the library defines elsewhere is another API, not a wrong path to the target
            {
                "stderr": TB + "ImportError: cannot import name 'shorten' from 'novlib'",
                "calls": (),
                "library_names": frozenset({"shorten"}),
            },
            "WrongAPISelection",
        ),
        # once the target was called, an import failure is about something else
        ({"stderr": TB + "ModuleNotFoundError: No module named 'numpy'"}, "WrongLogic"),
        # AttributeError on another library's module is no import problem of the target
        ({"stderr": TB + "AttributeError: module 'os' has no attribute 'slug'"}, "WrongLogic"),
        # a NameError of some other variable is logic, not a forgotten import
        ({"stderr": TB + "NameError: name 'text' is not defined"}, "WrongLogic"),
        # a timeout loses the spy record: names the target -> logic, names nothing -> API selection
        ({"status": "timeout", "calls": ()}, "WrongLogic"),
        (
            {"status": "timeout", "calls": (), "code": "def make_slug(t):\n    while True: pass\n"},
            "WrongAPISelection",
        ),
        # binding TypeError without a signature, and one naming another function (-> logic)
        (
            {"signature": None, "stderr": TB + "TypeError: slugify() takes from 1 to 3 positional arguments"},
            "WrongParam",
        ),
        ({"stderr": TB + "TypeError: helper() missing 1 required positional argument: 'x'"}, "WrongLogic"),
        # a call the signature rejects, with no traceback at all (the program caught the TypeError)
        ({"calls": ({"args": ["'x'"], "kwargs": {"width": "3"}},)}, "WrongParam"),
        # "got multiple values" found by binding the record, and an omitted parameter (names differ)
        ({"calls": ({"args": ["'x'", "'-'"], "kwargs": {"sep": "'_'", "max_len": "12"}},)}, "WrongParam"),
        ({"calls": ({"args": ["'x'"], "kwargs": {"max_len": "12"}},)}, "WrongParam"),
        # same names bound positionally or by keyword: the same shape
        (
            {"calls": ({"args": ["'y'", "'_'", "12"], "kwargs": {}},), "stderr": TB + "AssertionError"},
            "WrongLogic",
        ),
        # a default passed explicitly counts as passed (the shapes compare names)
        (
            {
                "reference_calls": ({"args": ["'y'"], "kwargs": {"max_len": "12", "sep": "'-'"}},),
                "calls": ({"args": ["'x'"], "kwargs": {"max_len": "12"}},),
            },
            "WrongParam",
        ),
        # several reference shapes: matching any one of them is enough
        (
            {
                "reference_calls": ({"args": ["'y'"]}, {"args": ["'y'"], "kwargs": {"sep": "'_'"}}),
                "calls": ({"args": ["'y'", "'_'"], "kwargs": {}}, {"args": ["'y'"], "kwargs": {}}),
                "stderr": TB + "AssertionError: expected 'a' (str), got 'b' (str)",
            },
            "WrongLogic",
        ),
        # raised inside the library's body: a contract violation; raised in the program: its logic
        (
            {"stderr": TB_LIB + "ValueError: operands could not be broadcast together with shapes (3,) (4,)"},
            "WrongShapeDtype",
        ),
        (
            {
                "stderr": TB_LIB
                + "numpy.exceptions.AxisError: axis 2 is out of bounds for array of dimension 1"
            },
            "WrongShapeDtype",
        ),
        (
            {"stderr": TB + "ValueError: operands could not be broadcast together with shapes (3,) (4,)"},
            "WrongLogic",
        ),
        ({"stderr": TB + "AssertionError: expected 1.0 (float), got 1 (int)"}, "WrongLogic"),
        ({"stderr": TB + "AssertionError: expected 2 (int), got 1 (int)"}, "WrongLogic"),
        # the right call with another argument value than the reference's
        ({"calls": ({"args": ["'y'"], "kwargs": {"sep": "'-'", "max_len": "12"}},)}, "WrongParam"),
        ({"stderr": TB + "AttributeError: 'NoneType' object has no attribute 'lower'"}, "WrongLogic"),
        ({"status": "error", "stderr": ""}, "WrongLogic"),
    ],
)
def test_precedence_on_synthetic_attempts(changes, expected):
    cls, why = explain(attempt(**changes))
    assert cls == expected, why
    assert why


# ------------------------------------------------------------------------- helpers
def test_parse_exception_takes_the_last_of_chained_exceptions():
    stderr = (
        TB
        + "KeyError: 'a'\n\nDuring handling of the above exception, another exception occurred:\n\n"
        + TB
        + "    raise ValueError('bad\\nvalue')\n    ^^^^^^^^^^^^^^^^^^^^\nnovlib.errors.SlugError: bad\nsecond line\n"
    )
    info = parse_exception(stderr)
    assert (info.type, info.name, info.message) == (
        "novlib.errors.SlugError",
        "SlugError",
        "bad\nsecond line",
    )
    assert info.line == "novlib.errors.SlugError: bad"


def test_parse_exception_without_a_header_and_without_an_exception():
    syntax = "  File \"<string>\", line 1\n    def f(\n         ^\nSyntaxError: '(' was never closed\n"
    assert parse_exception(syntax).name == "SyntaxError"
    assert parse_exception("some output\nno error here\n") is None
    assert parse_exception(TB + "StopIteration\n").message == ""


def test_call_shapes_bind_to_the_signature():
    sig = parse_signature(
        "(text: str, /, sep: str = '-', *words, max_len: int | None = None, **extra) -> str"
    )
    assert call_shape({"args": ["'a'", "'-'"], "kwargs": {}}, sig) == {"text", "sep"}  # a default counts
    assert call_shape({"args": ["'a'", "'_'", "1", "2"], "kwargs": {"k": "3"}}, sig) == {
        "text",
        "sep",
        "*words[0]",
        "*words[1]",
        "**k",
    }
    with pytest.raises(TypeError):
        call_shape({"args": [], "kwargs": {"text": "'a'"}}, sig)  # positional-only passed by name
    assert parse_signature("(x=<object object at 0x7f>)") is not None
    assert parse_signature(None) is None and parse_signature("(((") is None
    assert call_shape({"args": ["1"], "kwargs": {"b": "2"}}, None) == {"#0", "b"}


def test_parse_exception_reads_an_exception_group_behind_its_margin():
    stderr = (
        "  + Exception Group Traceback (most recent call last):\n"
        '  |   File "<string>", line 3, in <module>\n'
        "  | ExceptionGroup: many (1 sub-exception)\n"
        "  +-+---------------- 1 ----------------\n"
        "    | Traceback (most recent call last):\n"
        '    |   File "<string>", line 2, in f\n'
        "    | TypeError: unsupported operand type(s) for +: 'int' and 'str'\n"
        "    +------------------------------------\n"
    )
    info = parse_exception(stderr)
    assert (info.name, info.message) == ("TypeError", "unsupported operand type(s) for +: 'int' and 'str'")
