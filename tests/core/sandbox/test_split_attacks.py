"""Wrong programs that try to pass hidden tests, run split and in process (bwrap backend).

Every attack runs twice: ``split=True`` (the tests in a trusted process, the program behind the
plain-data protocol) must not pass; the in-process outcome is asserted as it is today, so that
the documentation can say which routes the split closes (``in_process_passes`` in each test's id).
The hidden tests are HumanEval-style (``check(candidate)`` with expected values in the test text),
so a wrong program passes only by learning the expected values or by forging the verdict. After
each attack a correct program must still pass split: the sandbox keeps working.

Families: native code or bytecode of the program's own, fork oracles and lying objects, state
kept from one run for the next, the protocol boundary; and controls (correct programs pass split).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
import sysconfig
import textwrap

import pytest

from core.sandbox import SandboxLimits, bwrap_available, make_sandbox

LIMITS = SandboxLimits(timeout_s=4.0, memory_mb=512, max_output_bytes=100_000, max_processes=64, disk_mb=64)
HAS_NUMPY = importlib.util.find_spec("numpy") is not None
HAS_CC = shutil.which("cc") is not None and os.path.exists(
    os.path.join(sysconfig.get_paths()["include"], "Python.h")
)


@pytest.fixture(scope="module")
def sandbox():
    """Not strict: the attacks import ctypes and numpy (strict mode would refuse them in process;
    the split candidate may use them anyway)."""
    if not bwrap_available():
        pytest.skip("bubblewrap cannot run here")
    with make_sandbox("bwrap", limits=LIMITS, workers=2, strict=False) as sb:
        yield sb


@pytest.fixture(scope="module")
def single_worker():
    """One worker: consecutive runs share a server, so what one run leaves the next would see."""
    if not bwrap_available():
        pytest.skip("bubblewrap cannot run here")
    with make_sandbox("bwrap", limits=LIMITS, workers=1, strict=False) as sb:
        yield sb


def program(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


CONTROL = (
    "def add(a, b):\n    return a + b\n",
    "def check(candidate):\n    assert candidate(2, 3) == 5\ncheck(add)\n",
)


def still_works(sandbox) -> None:
    after = sandbox.run(*CONTROL, split=True)
    if not (after.passed and after.mode == "split"):
        pytest.fail(f"the sandbox stopped working after the attack: {after}")


def attack(sandbox, text: str, tests: str, in_process_passes: bool):
    """Run ``text`` against ``tests`` split and in process; the split run must not pass.

    The in-process outcome and the sandbox's health are checked with ``pytest.fail``, the split
    verdict with an assertion."""
    split = sandbox.run(text, tests, split=True)
    in_process = sandbox.run(text, tests)
    if in_process.mode != "in_process" or in_process.passed is not in_process_passes:
        pytest.fail(f"in process: expected passed={in_process_passes}, got {in_process}")
    if split.mode != "split" or split.status == "error" or "\n" in split.detail:
        pytest.fail(f"the split run did not end in a one-line verdict: {split}")
    still_works(sandbox)
    assert not split.passed, f"the attack passed split: {split}"
    return split, in_process


def cases(table: dict) -> list:
    """pytest params named ``<attack>-in_process_<passes|fails>``, marks kept."""
    params = []
    for name, (text, tests, passes, *marks) in table.items():
        outcome = "passes" if passes else "fails"
        params.append(pytest.param(text, tests, passes, id=f"{name}-in_process_{outcome}", marks=marks))
    return params


# -- hidden tests ------------------------------------------------------------------------------
HIDDEN = program("""
    def check(candidate):
        assert candidate(3) == 7340912
        assert candidate(5) == 2281559
        assert candidate(8) == 9100473
    check(f)
""")
# the expected values in the test function's locals (a table of cases)
HIDDEN_IN_LOCALS = program("""
    def check(candidate):
        cases = {3: 7340912, 5: 2281559, 8: 9100473}
        for arg, expected in cases.items():
            assert candidate(arg) == expected
    check(f)
""")
# a small answer domain, so that a program can try every answer
HIDDEN_DIGITS = program("""
    def check(candidate):
        assert candidate(12) == 7
        assert candidate(40) == 2
        assert candidate(91) == 5
    check(f)
""")
# the tests accept any error for a negative input (`except BaseException`)
HIDDEN_REFUSAL = program("""
    def check(candidate):
        for bad in (-1, -7):
            try:
                candidate(bad)
            except BaseException:
                continue
            raise AssertionError("a negative input must raise")
        assert candidate(2) == 7
    check(f)
""")


def hidden_visit(checked: str, imports: str = "") -> str:
    """Tests that pass the program a callback, ``visit``, whose ``checked`` statements assert
    ``v >= 0`` before it records ``v``."""
    body = textwrap.indent(textwrap.dedent(checked).strip("\n"), " " * 8)
    return (
        imports
        + "def check(candidate):\n    seen = []\n    def visit(v):\n"
        + body
        + "\n        seen.append(v)\n    candidate([3, -1, 2], visit)\n    assert seen == [3, 2]\ncheck(f)\n"
    )


CHECKED = 'assert v >= 0, "visit must only see non-negative values"'
# an assertion inside a callback the tests pass to the program
HIDDEN_VISIT = hidden_visit(CHECKED)
# the same callback, its assertion deep in statements the trusted side counts asserts in (a `with`
# in a `for ... else`, a `match` case, a `try ... finally` in a method): an assert left uncounted
# would be one the program could swallow
HIDDEN_VISIT_IN_WITH = hidden_visit(
    f"for _ in range(1):\n    continue\nelse:\n    with contextlib.nullcontext():\n        {CHECKED}",
    imports="import contextlib\n",
)
HIDDEN_VISIT_IN_MATCH = hidden_visit(f"match v:\n    case int():\n        if v < 100:\n            {CHECKED}")
HIDDEN_VISIT_IN_METHOD_TRY = program("""
    class Visitor:
        def __init__(self):
            self.seen = []
        def __call__(self, v):
            try:
                while True:
                    assert v >= 0, "visit must only see non-negative values"
                    break
            finally:
                self.seen.append(v)
    def check(candidate):
        visit = Visitor()
        candidate([3, -1, 2], lambda v: visit(v))
        assert [v for v in visit.seen if v >= 0] == [3, 2]
    check(f)
""")
# HumanEval's float checks (HumanEval/2, /4): abs(candidate(x) - expected) < 1e-6
HIDDEN_CLOSE = program("""
    def check(candidate):
        assert abs(candidate([1.0, 2.0, 3.0]) - 2.0 / 3.0) < 1e-6
        assert abs(candidate([1.0, 2.0, 3.0, 4.0]) - 1.0) < 1e-6
    check(f)
""")

# -- family 1: native code and bytecode of the program's own -----------------------------------
CTYPES_FRAME_CONSTS = program("""
    import ctypes
    api = ctypes.pythonapi
    api.PyEval_GetFrame.restype = ctypes.c_void_p
    api.PyFrame_GetBack.restype = ctypes.c_void_p
    api.PyFrame_GetBack.argtypes = [ctypes.c_void_p]
    api.PyFrame_GetCode.restype = ctypes.py_object
    api.PyFrame_GetCode.argtypes = [ctypes.c_void_p]
    def f(x):
        # the C API hands out every frame and its code: no audit event on the way
        frame = api.PyEval_GetFrame()
        while frame:
            ints = [c for c in api.PyFrame_GetCode(frame).co_consts if type(c) is int]
            for i, c in enumerate(ints[:-1]):
                if c == x and ints[i + 1] > 1000:
                    return ints[i + 1]
            frame = api.PyFrame_GetBack(frame)
        return x
""")
# ctypes scan of the process's own heap for the tests' code object (type pointer, then the
# co_filename "<tests>"), reading through a pipe so that unmapped pages give EFAULT, not SIGSEGV
CTYPES_HEAP_SCAN = program("""
    import ctypes, os, struct, types
    libc = ctypes.CDLL(None, use_errno=True)
    libc.write.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
    PAGE = 4096
    R, W = os.pipe()
    def peek(addr, size):
        if addr <= 0 or libc.write(W, addr, size) != size:
            return None
        return os.read(R, size)
    CODE_TYPE, STR_TYPE = id(types.CodeType), id(str)
    _calibration = compile("0", "<calibration>", "exec")
    _words = struct.unpack("<64Q", peek(id(_calibration), 512))
    FILENAME_AT = _words.index(id(_calibration.co_filename)) * 8
    STR_DATA = 48  # sizeof(PyASCIIObject) on 3.11
    def is_tests_code(addr):
        head = peek(addr, FILENAME_AT + 8)
        if head is None or struct.unpack_from("<Q", head, 8)[0] != CODE_TYPE:
            return False
        text = peek(struct.unpack_from("<Q", head, FILENAME_AT)[0], STR_DATA + 8)
        return (
            text is not None
            and struct.unpack_from("<Q", text, 8)[0] == STR_TYPE
            and text[STR_DATA:STR_DATA + 8] == b"<tests>\\0"
        )
    def scan():
        table, seen, needle = {}, set(), struct.pack("<Q", CODE_TYPE)
        for anchor in {id(o) & ~(PAGE - 1) for o in (scan, os, types, ctypes, {}, bytes(100000))}:
            for step in range(-2048, 2048):
                addr = anchor + step * PAGE
                if addr in seen:
                    continue
                seen.add(addr)
                page = peek(addr, PAGE)
                at = -1 if page is None else page.find(needle)
                while at >= 8:
                    if at % 8 == 0 and is_tests_code(addr + at - 8):
                        code = ctypes.cast(addr + at - 8, ctypes.py_object).value
                        ints = [c for c in code.co_consts if type(c) is int]
                        table.update(zip(ints[::2], ints[1::2]))
                    at = page.find(needle, at + 1)
        return table
    TABLE = None
    def f(x):
        global TABLE
        if TABLE is None:
            TABLE = scan()
        return TABLE.get(x, x)
""")
PROC_SELF_MEM = program(r"""
    import ctypes, os, re
    libc = ctypes.CDLL(None, use_errno=True)
    # libc's open, below the audit hook: only Landlock stands in the way
    MAPS = libc.open(b"/proc/self/maps", os.O_RDONLY)
    MEM = libc.open(b"/proc/self/mem", os.O_RDONLY)
    print("opened", MAPS, MEM)
    TABLE = {}
    def scan():
        for line in os.read(MAPS, 1 << 20).decode().splitlines():
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if line.split()[1].startswith("r"):
                try:
                    data = os.pread(MEM, hi - lo, lo)
                except OSError:
                    continue
                TABLE.update((int(a), int(b)) for a, b in re.findall(rb"candidate\((\d+)\) == (\d+)", data))
    def f(x):
        if MAPS >= 0 and MEM >= 0 and not TABLE:
            scan()
        return TABLE.get(x, x)
""")
# another process's memory (the server's, the trusted side's: forks of one parent, so the
# addresses of this process's own objects are mapped there too)
PROCESS_VM_READV = program(r"""
    import ctypes, os, re
    libc = ctypes.CDLL(None, use_errno=True)
    class IOVec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
    libc.process_vm_readv.argtypes = [
        ctypes.c_int, ctypes.POINTER(IOVec), ctypes.c_ulong, ctypes.POINTER(IOVec), ctypes.c_ulong, ctypes.c_ulong
    ]
    PAGE = 1 << 16
    BUF = ctypes.create_string_buffer(PAGE)
    def scan():
        found, read = {}, []
        anchors = {id(o) & ~(PAGE - 1) for o in (os, re, ctypes, scan, {})}
        for pid in range(1, 300):
            if pid == os.getpid():
                continue
            for anchor in anchors:
                for step in range(-64, 64):
                    local, remote = IOVec(ctypes.cast(BUF, ctypes.c_void_p), PAGE), IOVec(anchor + step * PAGE, PAGE)
                    got = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
                    if got < 0 and ctypes.get_errno() in (1, 3):  # EPERM, ESRCH: next process
                        break
                    if got > 0:
                        read.append(pid)
                        for a, b in re.findall(rb"candidate\((\d+)\) == (\d+)", BUF.raw[:got]):
                            found[int(a)] = int(b)
                else:
                    continue
                break
        print("read the memory of", sorted(set(read)))
        return found
    TABLE = scan()
    def f(x):
        return TABLE.get(x, x)
""")
# a C extension compiled on the fly with the system's cc into /tmp and loaded: the frames'
# co_consts and locals from C
C_EXTENSION = program('''
    import importlib.util, os, subprocess, sysconfig
    SOURCE = r"""
    #include <Python.h>
    static PyObject *stack(PyObject *self, PyObject *unused) {
        PyObject *out = PyList_New(0);
        PyFrameObject *frame = PyEval_GetFrame();
        Py_XINCREF(frame);
        while (frame != NULL) {
            PyCodeObject *code = PyFrame_GetCode(frame);
            PyObject *consts = PyObject_GetAttrString((PyObject *)code, "co_consts");
            PyObject *locals = PyFrame_GetLocals(frame);
            if (consts) PyList_Append(out, consts);
            if (locals) PyList_Append(out, locals);
            Py_XDECREF(consts); Py_XDECREF(locals); Py_DECREF(code);
            PyFrameObject *back = PyFrame_GetBack(frame);
            Py_DECREF(frame);
            frame = back;
        }
        return out;
    }
    static PyMethodDef methods[] = {{"stack", stack, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
    static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "stealer", NULL, -1, methods};
    PyMODINIT_FUNC PyInit_stealer(void) { return PyModule_Create(&module); }
    """
    os.makedirs("/tmp/efx-cc", exist_ok=True)
    with open("/tmp/efx-cc/stealer.c", "w") as fh:
        fh.write(SOURCE)
    TARGET = "/tmp/efx-cc/stealer" + sysconfig.get_config_var("EXT_SUFFIX")
    BUILT = subprocess.run(
        ["cc", "-shared", "-fPIC", "-I", sysconfig.get_paths()["include"], "-o", TARGET, "/tmp/efx-cc/stealer.c"],
        capture_output=True, text=True,
    )
    print("cc exited with", BUILT.returncode, BUILT.stderr[-300:])
    spec = importlib.util.spec_from_file_location("stealer", TARGET)
    stealer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stealer)
    def f(x):
        for item in stealer.stack():
            if type(item) is tuple:
                ints = [c for c in item if type(c) is int]
                for a, b in zip(ints[::2], ints[1::2]):
                    if a == x and b > 1000:
                        return b
            elif type(item) is dict:
                for value in list(item.values()):
                    if type(value) is dict and x in value:
                        return value[x]
        return x
''')
# sys._getframe from code compiled under another file name (the audit hook's caller rule is by
# file name): the test function's locals
FOREIGN_FILE_FRAMES = program('''
    STEALER = """
    import sys
    def f(x):
        frame = sys._getframe(1)
        while frame is not None:
            for value in list(frame.f_locals.values()):
                if type(value) is dict and x in value:
                    return value[x]
            frame = frame.f_back
        return x
    """
    exec(compile(STEALER, "<stealer>", "exec"), globals())
''')
# a code object rebuilt under another file name (code.replace), then run as a function
CODE_REPLACE = program("""
    import sys, types
    def _steal(x):
        frame = sys._getframe(1)
        while frame is not None:
            for value in list(frame.f_locals.values()):
                if type(value) is dict and x in value:
                    return value[x]
            frame = frame.f_back
        return x
    def f(x):
        try:
            code = _steal.__code__.replace(co_filename="<elsewhere>", co_name="elsewhere")
            return types.FunctionType(code, globals())(x)
        except PermissionError as exc:
            print("refused:", exc)
            return x
""")
GC_OBJECTS = program("""
    import gc
    def f(x):
        try:
            objects = gc.get_objects()
        except PermissionError as exc:
            print("refused:", exc)
            return x
        for obj in objects:
            if type(obj) is dict and x in obj and type(obj[x]) is int and obj[x] > 1000:
                return obj[x]
        return x
""")
# every descriptor 3..64 gets a forged "passed" record (the trusted side's report, raw and framed)
# and a random would-be nonce
FD_SPRAY = program("""
    import json, os, struct
    FORGED = json.dumps({"passed": True, "tests_passed": 3, "tests_total": 3, "delegated": 0}).encode()
    def f(x):
        for fd in range(3, 65):
            for data in (FORGED, struct.pack(">I", len(FORGED)) + FORGED, os.urandom(16).hex().encode()):
                try:
                    os.write(fd, data)
                except OSError:
                    pass
        return x
""")

NATIVE = {
    "ctypes_frame_consts": (CTYPES_FRAME_CONSTS, HIDDEN, True),
    "ctypes_heap_scan_for_the_tests_code": (CTYPES_HEAP_SCAN, HIDDEN, True),
    "proc_self_mem_scan": (PROC_SELF_MEM, HIDDEN, False),  # Landlock refuses /proc/self/maps and mem
    "process_vm_readv_of_the_other_processes": (PROCESS_VM_READV, HIDDEN, False),  # not dumpable
    "c_extension_built_with_cc": (  # in process too: Python runs' scratch folders are noexec
        C_EXTENSION,
        HIDDEN,
        False,
        pytest.mark.skipif(not HAS_CC, reason="no cc or no Python.h here"),
    ),
    "c_extension_reads_the_tests_locals": (
        C_EXTENSION,
        HIDDEN_IN_LOCALS,
        False,
        pytest.mark.skipif(not HAS_CC, reason="no cc or no Python.h here"),
    ),
    "getframe_under_a_foreign_file_name": (FOREIGN_FILE_FRAMES, HIDDEN_IN_LOCALS, True),  # docs: remains
    "code_replace_under_a_foreign_file_name": (CODE_REPLACE, HIDDEN_IN_LOCALS, False),  # audit hook
    "gc_get_objects": (GC_OBJECTS, HIDDEN_IN_LOCALS, False),  # audit hook
    "fd_spraying_a_forged_report": (FD_SPRAY, HIDDEN, False),  # "the pass sentinel was altered"
}


@pytest.mark.parametrize(("text", "tests", "in_process_passes"), cases(NATIVE))
def test_native_code_of_the_program_decides_nothing(sandbox, text, tests, in_process_passes):
    split, _ = attack(sandbox, text, tests, in_process_passes)
    assert split.tests_passed == 0, split


def test_the_split_candidate_reads_no_other_process(sandbox):
    """The candidate may use process_vm_readv; it reads no process but itself."""
    split = sandbox.run(PROCESS_VM_READV, HIDDEN, split=True)
    assert "read the memory of []" in split.stdout, split


# -- family 2: fork oracles, lying objects and exceptions ---------------------------------------
# Each call forks a copy per answer; the copy's tests run on, and its stderr tells whether they
# failed (AssertionError) or reached their end (then only the report pipe, closed in every fork,
# fails). The parent returns the answer whose copy reached the end.
FORK_ORACLE = program("""
    import os
    def f(x):
        for guess in range(10):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                os.dup2(w, 2)
                os.close(w)
                return guess
            os.close(w)
            text = b""
            while chunk := os.read(r, 65536):
                text += chunk
            os.close(r)
            os.waitpid(pid, 0)
            if text and b"AssertionError" not in text:
                return guess
        return 0
""")
# the program forks at import: two processes answer, each differently
FORK_AT_IMPORT = program("""
    import os
    CHILD = os.fork() == 0
    def f(x):
        return 7 if CHILD else 2
""")
# a fork writes a reply of its own (every answer) on every writable pipe, then the call answers
ANSWER_TWICE = program("""
    import fcntl, json, os, stat, struct, sys
    def seq():
        try:
            frame = sys._getframe(1)
        except PermissionError:
            return None
        while frame is not None:
            message = frame.f_locals.get("message")
            if type(message) is dict and "seq" in message:
                return message["seq"]
            frame = frame.f_back
    def pipes():
        for fd in range(3, 64):
            try:
                st = os.fstat(fd)
            except OSError:
                continue
            if stat.S_ISFIFO(st.st_mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & 3 == 1:
                yield fd
    def f(x):
        number = seq()
        if os.fork() == 0:
            for guess in range(10):
                body = json.dumps({"re": number, "v": guess}).encode()
                for fd in pipes():
                    os.write(fd, struct.pack(">I", len(body)) + body)
            os._exit(0)
        os.wait()
        return 0
""")
EQUAL_TO_EVERYTHING = program("""
    class Anything:
        def __eq__(self, other):
            return True
        __hash__ = object.__hash__
    def f(x):
        return Anything()
""")
INT_SUBCLASS = program("""
    class Int(int):
        def __eq__(self, other):
            return True
        __hash__ = int.__hash__
    def f(x):
        return Int(x)
""")
STR_SUBCLASS = program("""
    class Str(str):
        def __eq__(self, other):
            return True
        __hash__ = str.__hash__
    def f(x):
        return Str(x)
""")
# a slice crosses as data only when its bounds are ints or None; bounds of the program's own types
# make it a handle, whose equality decides nothing (the class: plain-looking data that carries code)
SLICE_OF_LYING_INTS = program("""
    class Int(int):
        def __eq__(self, other):
            return True
        __hash__ = int.__hash__
    def f(x):
        return slice(Int(0), Int(0), Int(0))
""")
SLICE_WITH_ONE_LYING_STEP = program("""
    class Int(int):
        def __eq__(self, other):
            return True
        __hash__ = int.__hash__
    def f(x):
        return slice(1, 7, Int(0))
""")
SLICE_OF_ANYTHING = program("""
    class Anything:
        def __eq__(self, other):
            return True
        __hash__ = object.__hash__
    def f(x):
        return slice(Anything(), Anything(), Anything())
""")
HIDDEN_SLICE = program("""
    def check(candidate):
        assert candidate(3) == slice(1, 7, 2)
        assert candidate(4) == slice(1, 7, 2)
    check(f)
""")
LIST_SUBCLASS_LEN = program("""
    class Items(list):
        def __eq__(self, other):
            return True
        def __len__(self):
            return 4
    def f(x):
        return Items()
""")
HIDDEN_LIST = program("""
    def check(candidate):
        assert candidate(3) == [1, 2, 3]
        assert len(candidate(4)) == 4
    check(f)
""")
BOOL_LIES = program("""
    class Yes:
        def __bool__(self):
            return True
        def __len__(self):
            return 1
    def f(x):
        return Yes()
""")
HIDDEN_PREDICATE = program("""
    def check(candidate):
        assert candidate(4)
        assert not candidate(3)
        assert candidate(10)
    check(f)
""")
EXIT_ON_REFUSAL = program("""
    import sys
    def f(x):
        if x < 0:
            sys.exit(0)
        return 7
""")
KEYBOARD_INTERRUPT_ON_REFUSAL = program("""
    def f(x):
        if x < 0:
            raise KeyboardInterrupt
        return 7
""")
GENERATOR_EXIT_ON_REFUSAL = program("""
    def f(x):
        if x < 0:
            raise GeneratorExit
        return 7
""")
EXIT_SUBCLASS_ON_REFUSAL = program("""
    class Quiet(SystemExit):
        pass
    def f(x):
        if x < 0:
            raise Quiet(0)
        return 7
""")
SWALLOWS_CALLBACK_ASSERTION = program("""
    def f(xs, visit):
        for x in xs:
            try:
                visit(x)
            except AssertionError:
                pass
""")
SWALLOWS_CALLBACK_BASE_EXCEPTION = program("""
    def f(xs, visit):
        for x in xs:
            try:
                visit(x)
            except BaseException:
                pass
""")
# an exception class of the program's that subclasses AssertionError, caught next to it
SWALLOWS_AS_ASSERTION_SUBCLASS = program("""
    class Skipped(AssertionError):
        pass
    def f(xs, visit):
        for x in xs:
            try:
                try:
                    visit(x)
                except AssertionError as exc:
                    raise Skipped(*exc.args) from None
            except Skipped:
                pass
""")

# a returned module makes the trusted side import it: a stdlib module whose import acts
RUNS_STDLIB_MAIN_ON_REFUSAL = program("""
    import types
    def f(x):
        if x < 0:
            return types.ModuleType("unittest.__main__")
        return 7
""")
RUNS_STDLIB_TESTS_ON_REFUSAL = program("""
    import types
    def f(x):
        if x < 0:
            return types.ModuleType("test.autotest")
        return 7
""")

FORKS_AND_LIES = {
    "fork_oracle_learns_each_answer": (FORK_ORACLE, HIDDEN_DIGITS, True),
    "fork_at_import_two_answerers": (FORK_AT_IMPORT, HIDDEN_DIGITS, False),
    "a_fork_answers_too": (ANSWER_TWICE, HIDDEN_DIGITS, False),
    "equal_to_everything": (EQUAL_TO_EVERYTHING, HIDDEN, True),
    "int_subclass_eq": (INT_SUBCLASS, HIDDEN, True),
    "str_subclass_eq": (STR_SUBCLASS, HIDDEN, True),
    "list_subclass_eq_and_len": (LIST_SUBCLASS_LEN, HIDDEN_LIST, True),
    "slice_of_lying_ints": (SLICE_OF_LYING_INTS, HIDDEN_SLICE, True),
    "slice_with_one_lying_step": (SLICE_WITH_ONE_LYING_STEP, HIDDEN_SLICE, True),
    "slice_of_anything": (SLICE_OF_ANYTHING, HIDDEN_SLICE, True),
    "bool_and_len_lie": (BOOL_LIES, HIDDEN_PREDICATE, False),
    "systemexit_caught_by_the_tests": (EXIT_ON_REFUSAL, HIDDEN_REFUSAL, True),
    "keyboardinterrupt_caught_by_the_tests": (KEYBOARD_INTERRUPT_ON_REFUSAL, HIDDEN_REFUSAL, True),
    "generatorexit_caught_by_the_tests": (GENERATOR_EXIT_ON_REFUSAL, HIDDEN_REFUSAL, True),
    "systemexit_subclass_caught_by_the_tests": (EXIT_SUBCLASS_ON_REFUSAL, HIDDEN_REFUSAL, True),
    "stdlib_main_module_imported_by_the_trusted_side": (RUNS_STDLIB_MAIN_ON_REFUSAL, HIDDEN_REFUSAL, False),
    "stdlib_test_suite_imported_by_the_trusted_side": (RUNS_STDLIB_TESTS_ON_REFUSAL, HIDDEN_REFUSAL, False),
    "callback_assertion_swallowed": (SWALLOWS_CALLBACK_ASSERTION, HIDDEN_VISIT, True),
    "callback_assertion_swallowed_as_base_exception": (SWALLOWS_CALLBACK_BASE_EXCEPTION, HIDDEN_VISIT, True),
    "callback_assertion_rethrown_as_a_subclass": (SWALLOWS_AS_ASSERTION_SUBCLASS, HIDDEN_VISIT, True),
    "callback_assertion_in_for_else_with_swallowed": (
        SWALLOWS_CALLBACK_ASSERTION,
        HIDDEN_VISIT_IN_WITH,
        True,
    ),
    "callback_assertion_in_match_case_swallowed": (SWALLOWS_CALLBACK_ASSERTION, HIDDEN_VISIT_IN_MATCH, True),
    "callback_assertion_in_method_try_swallowed": (
        SWALLOWS_CALLBACK_ASSERTION,
        HIDDEN_VISIT_IN_METHOD_TRY,
        True,
    ),
}
CALLBACK_TESTS = (HIDDEN_VISIT, HIDDEN_VISIT_IN_WITH, HIDDEN_VISIT_IN_MATCH, HIDDEN_VISIT_IN_METHOD_TRY)


@pytest.mark.parametrize(("text", "tests", "in_process_passes"), cases(FORKS_AND_LIES))
def test_forks_and_lying_objects_decide_nothing(sandbox, text, tests, in_process_passes):
    split, _ = attack(sandbox, text, tests, in_process_passes)
    if text in (
        EXIT_ON_REFUSAL,
        KEYBOARD_INTERRUPT_ON_REFUSAL,
        GENERATOR_EXIT_ON_REFUSAL,
        EXIT_SUBCLASS_ON_REFUSAL,
    ):
        assert split.detail.startswith("the program raised"), split
    if tests in CALLBACK_TESTS:
        assert "inside a callback" in split.detail, split
    if text in (FORK_AT_IMPORT, ANSWER_TWICE):
        # two processes answer: a stray answer breaks the protocol, unless a wrong answer the trusted
        # side took first (2 from the parent at import, the fork's 0) already failed a check
        assert split.detail == "AssertionError" or split.detail.startswith(
            "protocol: an answer to no request"
        ), split


def test_lying_truth_values_are_counted(sandbox):
    """``bool`` of a handle is the program's to answer: delegated, and counted."""
    split = sandbox.run(BOOL_LIES, HIDDEN_PREDICATE, split=True)
    assert not split.passed and split.tests_passed == 1 and split.delegated_checks == 2, split


# Operators between a handle and the tests' plain data run the program's code, which sees the
# expected value as the operand and answers whatever makes the check hold; the result is plain
# data, so the check is not delegated and not counted (delegated_checks stays 0).
SUB_IS_ZERO = program("""
    class Close:
        def __sub__(self, other):
            return 0.0
        __rsub__ = __sub__
    def f(xs):
        return Close()
""")
SUB_SELF_ABS_ZERO = program("""
    class Close:
        def __sub__(self, other):
            return self
        def __abs__(self):
            return 0.0
    def f(xs):
        return Close()
""")
HIDDEN_CLOSE_REVERSED = program("""
    def check(candidate):
        assert abs(2.0 / 3.0 - candidate([1.0, 2.0, 3.0])) < 1e-6
    check(f)
""")
HIDDEN_NUMPY_ISCLOSE = program("""
    import numpy as np
    def check(candidate):
        assert np.isclose(candidate([1.0, 2.0, 3.0]), 2.0 / 3.0)
        assert np.allclose(candidate([1.0, 2.0, 3.0, 4.0]), 1.0)
    check(f)
""")
OPERATORS = {
    "sub_returns_zero": (SUB_IS_ZERO, HIDDEN_CLOSE, True),
    "rsub_returns_zero": (SUB_IS_ZERO, HIDDEN_CLOSE_REVERSED, True),
    "sub_returns_self_abs_zero": (SUB_SELF_ABS_ZERO, HIDDEN_CLOSE, True),
    "numpy_isclose_through_sub": (
        SUB_IS_ZERO,
        HIDDEN_NUMPY_ISCLOSE,
        True,
        pytest.mark.skipif(not HAS_NUMPY, reason="numpy is not installed"),
    ),
}


@pytest.mark.parametrize(("text", "tests", "in_process_passes"), cases(OPERATORS))
def test_operators_on_a_handle_decide_nothing(sandbox, text, tests, in_process_passes):
    """An operator between a handle and the tests' data is computed by the program, which sees the
    operand (the expected value): it never makes a clean split pass, only a delegated one."""
    split = sandbox.run(text, tests, split=True)
    in_process = sandbox.run(text, tests)
    if in_process.passed is not in_process_passes:
        pytest.fail(f"in process: expected passed={in_process_passes}, got {in_process}")
    still_works(sandbox)
    assert split.mode == "split" and (not split.passed or split.delegated_checks >= 1), split


# -- family 3: state kept from one run for the next (one worker, bwrap) -------------------------
PREAMBLE = (
    "import ctypes, os, socket, stat, time\nlibc = ctypes.CDLL(None, use_errno=True)\nMADE, FOUND = [], []\n"
)
STATE = {
    "file_contents": (
        """
        for path in ("/tmp/efx-left", "/dev/shm/efx-left", "efx-left"):
            with open(path, "w") as fh:
                fh.write("7340912")
            MADE.append(path)
        """,
        """
        for path in ("/tmp/efx-left", "/dev/shm/efx-left", "efx-left", "/tmp/work/efx-left"):
            if os.path.exists(path):
                FOUND.append(open(path).read())
        """,
    ),
    "file_names": (
        """
        for folder in ("/tmp", "/dev/shm", "."):
            os.mkdir(f"{folder}/efx-7340912")
            open(f"{folder}/efx-2281559", "w").close()
            MADE.append(folder)
        """,
        """
        for folder in ("/tmp", "/dev/shm", ".", "/tmp/work"):
            FOUND += [name for name in os.listdir(folder) if name.startswith("efx")]
        """,
    ),
    "folder_times": (
        """
        for folder in ("/tmp", "/dev/shm", "."):
            os.utime(folder, (1111111, 7340912))
            MADE.append(folder)
        """,
        """
        for folder in ("/tmp", "/dev/shm", "."):
            st = os.stat(folder)
            if int(st.st_mtime) == 7340912 or int(st.st_atime) == 1111111:
                FOUND.append(folder)
        """,
    ),
    "extended_attributes": (
        """
        open("/tmp/efx-x", "w").close()
        open("/dev/shm/efx-x", "w").close()
        for path in ("/tmp", "/dev/shm", ".", "/tmp/efx-x", "/dev/shm/efx-x"):
            try:
                os.setxattr(path, "user.efx", b"7340912")
                MADE.append(path)
            except OSError as exc:
                print("refused", path, exc)
        """,
        """
        for path in ("/tmp", "/dev/shm", ".", "/tmp/efx-x", "/dev/shm/efx-x"):
            try:
                FOUND += [path + ":" + name for name in os.listxattr(path)]
            except OSError:
                pass
        """,
    ),
    "folder_modes": (
        """
        for folder in ("/tmp", "/dev/shm", "."):
            os.chmod(folder, 0o1733)
            MADE.append(oct(os.stat(folder).st_mode))
        """,
        """
        for folder in ("/tmp", "/dev/shm", "."):
            if stat.S_IMODE(os.stat(folder).st_mode) == 0o1733:
                FOUND.append(folder)
        """,
    ),
    "unix_sockets": (  # bound in /tmp and in the abstract namespace, kept open by a daemon
        """
        named = socket.socket(socket.AF_UNIX)
        named.bind("/tmp/efx.sock")
        named.listen()
        abstract = socket.socket(socket.AF_UNIX)
        abstract.bind("\\0efx-left")
        abstract.listen()
        MADE += ["/tmp/efx.sock", "abstract"]
        if os.fork() == 0:
            os.setsid()
            time.sleep(60)
            os._exit(0)
        """,
        """
        for address in ("/tmp/efx.sock", "\\0efx-left"):
            client = socket.socket(socket.AF_UNIX)
            try:
                client.connect(address)
                FOUND.append(address)
            except OSError:
                pass
        FOUND += ["/tmp/efx.sock exists"] if os.path.lexists("/tmp/efx.sock") else []
        """,
    ),
    "sysv_ipc": (
        """
        libc.shmat.restype = ctypes.c_void_p
        shm = libc.shmget(0x45465821, 4096, 0o1666)  # IPC_CREAT | 0666
        if shm >= 0:
            ctypes.memmove(libc.shmat(shm, None, 0), b"7340912", 7)
            MADE.append("shm")
        MADE += ["sem"] if libc.semget(0x45465822, 1, 0o1666) >= 0 else []
        MADE += ["msg"] if libc.msgget(0x45465823, 0o1666) >= 0 else []
        """,
        """
        FOUND += ["shm"] if libc.shmget(0x45465821, 0, 0) >= 0 else []
        FOUND += ["sem"] if libc.semget(0x45465822, 0, 0) >= 0 else []
        FOUND += ["msg"] if libc.msgget(0x45465823, 0) >= 0 else []
        """,
    ),
    "posix_mqueue": (
        """
        queue = libc.mq_open(b"/efx-left", os.O_CREAT | os.O_RDWR, 0o600, None)
        print("mq_open", queue, ctypes.get_errno())
        MADE += ["mq"] if queue >= 0 else []
        """,
        """
        FOUND += ["mq"] if libc.mq_open(b"/efx-left", os.O_RDONLY) >= 0 else []
        """,
    ),
    "environment": (
        """
        os.environ["EFX_LEFT"] = "7340912"
        os.putenv("EFX_LEFT_TOO", "2281559")
        MADE.append("env")
        """,
        """
        FOUND += [name for name in os.environ if name.startswith("EFX")]
        """,
    ),
}
# what a run may not even make (RLIMIT_MSGQUEUE is 0); where the kernel refuses user xattrs on
# tmpfs (before Linux 6.6) nothing is made either
MAY_BE_REFUSED = {"posix_mqueue", "extended_attributes"}


@pytest.mark.parametrize("route", sorted(STATE))
def test_nothing_reaches_the_next_run(single_worker, route):
    """Run 1 leaves state, run 2 (same worker) passes only if it finds it: it must not, split
    (and in process: both modes get fresh /tmp and /dev/shm mounts under bwrap)."""
    leave, find = (program(text) for text in STATE[route])
    for split in (True, False):
        left = single_worker.run(PREAMBLE + leave + "print('MADE', MADE)\n", "assert True\n", split=split)
        found = single_worker.run(
            PREAMBLE + find + "print('FOUND', FOUND)\n",
            "assert FOUND, 'nothing of the earlier run'\n",
            split=split,
        )
        assert left.passed and "MADE" in left.stdout, left
        if route == "posix_mqueue":
            assert "MADE []" in left.stdout, left  # POSIX message queues cannot be created
        elif route not in MAY_BE_REFUSED:
            assert "MADE []" not in left.stdout, left
        assert left.fresh_scratch is True and found.fresh_scratch is True, (left, found)
        assert left.mode == found.mode == ("split" if split else "in_process")
        assert not found.passed, f"split={split}: run 2 found {found.stdout!r}"
        assert "FOUND []" in found.stdout and "nothing of the earlier run" in found.detail, found


def test_scratch_is_fresh_under_bwrap_only(single_worker):
    """``fresh_scratch``: True under bwrap (new tmpfs mounts per run), False on the local backend
    (its folders are emptied; folder metadata and host-wide state can carry over)."""
    for split in (True, False):
        assert single_worker.run(*CONTROL, split=split).fresh_scratch is True
    with make_sandbox("local", limits=LIMITS, workers=1, strict=False) as local:
        for split in (True, False):
            result = local.run(*CONTROL, split=split)
            assert result.passed and result.fresh_scratch is False, result


# -- family 4: the protocol boundary -------------------------------------------------------------
CHANNEL_WRITER = program("""
    import fcntl, json, os, stat, struct, sys
    def seq():  # the request being answered (None: not a split run's candidate)
        try:
            frame = sys._getframe(1)
        except PermissionError:  # in process the audit hook refuses it
            return None
        while frame is not None:
            message = frame.f_locals.get("message")
            if type(message) is dict and "seq" in message:
                return message["seq"]
            frame = frame.f_back
        return None
    def pipes():
        for fd in range(3, 65):
            try:
                st = os.fstat(fd)
            except OSError:
                continue
            if stat.S_ISFIFO(st.st_mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & 3 == 1:
                yield fd
    def send(message, framed=True):
        body = json.dumps(message).encode() if type(message) is dict else message
        for fd in pipes():
            try:
                os.write(fd, struct.pack(">I", len(body)) + body if framed else body)
            except OSError:
                pass
""")
FORGED_OUTCOME = CHANNEL_WRITER + program("""
    def f(x):
        outcome = {"passed": True, "tests_passed": 3, "tests_total": 3, "delegated": 0, "kind": None}
        send(outcome, framed=False)
        send(outcome)
        print(json.dumps(outcome))
        return x
""")
FORGED_REPLY_FIRST = CHANNEL_WRITER + program("""
    def f(x):
        send({"re": seq() or 2, "v": x + 1})  # a guess, ahead of the real answer
        return x
""")
FORGED_REQUESTS = CHANNEL_WRITER + program("""
    def f(x):
        send({"op": "end"})
        for handle in range(1, 10):
            send({"op": "tcall", "seq": 99, "h": handle, "args": ["l"], "kw": ["d"]})
        return x
""")
FORGED_TRUSTED_VALUES = CHANNEL_WRITER + program("""
    def f(x, key):
        number = seq()
        if number is not None:  # split: the forged answer names the tests' own key function
            send({"re": number, "v": ["H", 1]})
            import time
            time.sleep(60)
        return x
""")
HIDDEN_WITH_KEY = program("""
    def check(candidate):
        key = lambda v: -v
        assert candidate(3, key) == 7340912
        assert candidate(5, key) == 2281559
    check(f)
""")
PROTOCOL = {
    "forged_passed_outcome_on_every_pipe": (FORGED_OUTCOME, HIDDEN, False),
    "forged_reply_ahead_of_the_real_one": (FORGED_REPLY_FIRST, HIDDEN, False),
    "forged_end_and_callback_requests": (FORGED_REQUESTS, HIDDEN, False),
    "forged_reply_naming_a_trusted_object": (FORGED_TRUSTED_VALUES, HIDDEN_WITH_KEY, False),
}


@pytest.mark.parametrize(("text", "tests", "in_process_passes"), cases(PROTOCOL))
def test_forged_protocol_messages_decide_nothing(sandbox, text, tests, in_process_passes):
    split, _ = attack(sandbox, text, tests, in_process_passes)
    assert split.tests_passed == 0, split
    if text in (FORGED_OUTCOME, FORGED_REQUESTS):  # a frame that is no message, requests not served
        assert split.detail.startswith("protocol:"), split
    else:  # a well-formed forged answer is taken as the answer: a wrong one
        assert split.detail == "AssertionError", split


# The tests hand a handle to numpy, which asks it for __array_interface__: the program answers
# with an address of its own (id(json), a module imported before the processes forked, so mapped
# at the same address on the trusted side) and numpy builds an array on the trusted side's memory
# there. The tests pass only when numpy built no such array.
ARRAY_INTERFACE = program("""
    import json
    class Peek:
        @property
        def __array_interface__(self):
            return {"shape": (16,), "typestr": "|u1", "data": (id(json), True), "version": 3}
    def f():
        return Peek()
""")
ARRAY_INTERFACE_TESTS = program("""
    import numpy as np
    try:
        raw = np.asarray(f())
    except Exception:
        raw = None
    assert raw is None or raw.dtype == object, "an array over the trusted side's memory: " + bytes(raw).hex()
""")


@pytest.mark.skipif(not HAS_NUMPY, reason="numpy is not installed")
def test_no_array_over_trusted_memory(sandbox):
    split = sandbox.run(ARRAY_INTERFACE, ARRAY_INTERFACE_TESTS, split=True)
    still_works(sandbox)
    assert split.passed, split


# -- controls: correct programs pass split -------------------------------------------------------
CONTROLS = {
    "functions": (
        "def add(a, b):\n    return a + b\n",
        "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate('a', 'b') == 'ab'\ncheck(add)\n",
    ),
    "class_with_methods": (
        program("""
            class Stack:
                def __init__(self):
                    self.items = []
                def push(self, x):
                    self.items.append(x)
                    return self
                def pop(self):
                    return self.items.pop()
                def __len__(self):
                    return len(self.items)
        """),
        program("""
            s = Stack()
            s.push(1).push(2)
            assert len(s) == 2
            assert s.pop() == 2
            assert s.items == [1]
            assert isinstance(s, Stack)
        """),
    ),
    "generator": (
        "def squares(n):\n    for i in range(n):\n        yield i * i\n",
        "assert list(squares(4)) == [0, 1, 4, 9]\nassert sum(squares(3)) == 5\ng = squares(2)\nassert next(g) == 0\n",
    ),
    "returned_dict_mutated_by_the_tests": (
        "def make():\n    return {'a': 1}\n",
        "d = make()\nd['b'] = 2\nassert d == {'a': 1, 'b': 2}\nassert make() == {'a': 1}\n",
    ),
    "exception_class_caught_by_name": (
        program("""
            class MyError(ValueError):
                pass
            def parse(s):
                if not s.isdigit():
                    raise MyError(f"bad {s}")
                return int(s)
        """),
        program("""
            try:
                parse("x")
            except MyError as exc:
                assert "bad x" in str(exc)
            else:
                raise AssertionError("no MyError")
            try:
                parse("y")
            except ValueError:
                pass
            assert parse("12") == 12
        """),
    ),
    "key_callback_from_the_tests": (
        "def order(xs, key):\n    return sorted(xs, key=key)\n",
        "assert order([1, 3, 2], lambda v: -v) == [3, 2, 1]\nassert order(['bb', 'a'], len) == ['a', 'bb']\n",
    ),
    "key_lambda_of_the_program": (
        "def top(xs):\n    return sorted(xs, key=lambda v: -v)\n",
        "assert top([1, 3, 2]) == [3, 2, 1]\n",
    ),
    "argument_sorted_in_place": (
        "def sort_in_place(xs):\n    xs.sort()\n",
        "xs = [3, 1, 2]\nsort_in_place(xs)\nassert xs == [1, 2, 3]\n",
    ),
    "slice_returned_as_data": (  # the honest side of the slice attacks above
        "def f(x):\n    return slice(1, 7, 2)\n",
        HIDDEN_SLICE,
    ),
    **{  # the honest side of the nested callback assertions: negatives never reach the callback
        f"callback_assertion_{name}_held": (
            "def f(xs, visit):\n    for x in xs:\n        if x >= 0:\n            visit(x)\n",
            tests,
        )
        for name, tests in (
            ("in_for_else_with", HIDDEN_VISIT_IN_WITH),
            ("in_match_case", HIDDEN_VISIT_IN_MATCH),
            ("in_method_try", HIDDEN_VISIT_IN_METHOD_TRY),
        )
    },
}
NUMPY_CONTROL = (
    "import numpy as np\ndef scale(a, k):\n    return np.asarray(a) * k\n",
    program("""
        import numpy as np
        r = scale(np.arange(4), 2)
        assert r.tolist() == [0, 2, 4, 6]
        assert np.array_equal(r, np.array([0, 2, 4, 6]))
        assert scale([1.5], 2.0).dtype == np.float64
    """),
)


@pytest.mark.parametrize(
    ("text", "tests"),
    [pytest.param(*pair, id=name) for name, pair in CONTROLS.items()]
    + [
        pytest.param(
            *NUMPY_CONTROL,
            id="numpy_arrays",
            marks=pytest.mark.skipif(not HAS_NUMPY, reason="numpy is not installed"),
        )
    ],
)
def test_correct_programs_pass_split(sandbox, text, tests):
    split = sandbox.run(text, tests, split=True)
    assert split.passed and split.mode == "split", split
    assert split.tests_passed == split.tests_total, split
    # every assert statement is a check, however deep in the tests' statements it sits
    assert split.tests_total == sum(isinstance(node, ast.Assert) for node in ast.walk(ast.parse(tests))), (
        split
    )
    in_process = sandbox.run(text, tests)
    assert in_process.passed and in_process.mode == "in_process", in_process


# -- second round: names the benchmark binds, StopIteration, the trusted side's own protections -----
BOUND_NAMES = {  # the program rebinds a name the benchmark's text imports, to answer the tests' check
    "numpy_alias": (
        "import numpy\nclass _NP:\n    def allclose(self, *a):\n        return True\nnp = _NP()\n"
        "def f(x):\n    return numpy.array([0.0])\n",
        "assert np.allclose(f(3), [7340.912])\n",
        ["numpy", "np=numpy"],
    ),
    "module_object": (
        "class M:\n    def isclose(self, *a):\n        return True\nmath = M()\ndef f(x):\n    return 0.0\n",
        "assert math.isclose(f(2), 1.4142135623730951)\n",
        ["math", "math=math"],
    ),
    "imported_function": (
        "def isclose(*a, **k):\n    return True\ndef f(x):\n    return 0.0\n",
        "assert isclose(f(2), 1.4142135623730951)\n",
        ["math", "isclose=math.isclose"],
    ),
}


@pytest.mark.parametrize("case", BOUND_NAMES)
def test_a_name_the_benchmark_binds_by_import_is_never_the_programs(sandbox, case):
    program, tests, modules = BOUND_NAMES[case]
    if "numpy" in modules and not HAS_NUMPY:
        pytest.skip("numpy is not installed")
    split = sandbox.run(program, tests, split=True, modules=modules)
    assert split.mode == "split" and not split.passed, split
    still_works(sandbox)


STOPS = {  # a StopIteration out of a call would end the tests' map() early, and all() of it is True
    "function": "def f(x):\n    raise StopIteration\n",
    "async_flavour": "def f(x):\n    raise StopAsyncIteration\n",
    "from_a_property": "class P:\n    @property\n    def v(self):\n        raise StopIteration\n"
    "def f(x):\n    return P().v\n",
}


@pytest.mark.parametrize("case", STOPS)
def test_a_stopiteration_out_of_a_call_does_not_end_the_tests_quietly(sandbox, case):
    tests = "cases = [(3, 7340912)]\nassert all(map(lambda c: f(c[0]) == c[1], cases))\n"
    split = sandbox.run(STOPS[case], tests, split=True)
    assert not split.passed and "outside an iterator" in split.detail, split


SIGNALS = {  # code on the trusted side (a test that calls what it is given) against the server
    "kill_parent": "os.kill(os.getppid(), signal.SIGKILL)",
    "kill_parents_group": "os.killpg(os.getpgid(os.getppid()), signal.SIGKILL)",
    "kill_everyone": "os.kill(-1, signal.SIGKILL)",
}


@pytest.mark.parametrize("case", SIGNALS)
def test_the_trusted_side_cannot_signal_the_server(sandbox, case):
    tests = f"import os, signal\ntry:\n    {SIGNALS[case]}\nexcept PermissionError:\n    print('refused')\n"
    split = sandbox.run("x = 1\n", tests, split=True)
    assert split.passed and "refused" in split.stdout, split
    still_works(sandbox)


# The server and the zygote hold descriptors a run must never get: the system folders' O_PATH
# descriptors the Landlock ruleset is rebuilt from (numbered from 512), their sockets, the scratch
# mounts. Three ways a program would look for one: every number's fstat, a folder's descriptor used
# as a `dir_fd`, and a descriptor's own path through /proc.
DESCRIPTOR_PROBES = {
    "fstat_every_number": """
        import os, stat
        def add(a, b):
            return a + b
        for fd in range(4096):
            try:
                mode = os.fstat(fd).st_mode
            except OSError:
                continue
            kind = "pipe" if stat.S_ISFIFO(mode) else "chr" if stat.S_ISCHR(mode) else "other"
            print("FD", fd, kind)
        """,
    "dir_fd_open": """
        import os
        def add(a, b):
            return a + b
        for fd in range(3, 4096):
            try:
                os.open("etc/hostname", os.O_RDONLY, dir_fd=fd)
            except OSError:
                continue
            print("FD", fd, "opened-through")
        """,
    "proc_fd_links": """
        import os
        def add(a, b):
            return a + b
        for fd in range(3, 4096):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if not target.startswith("pipe:"):
                print("FD", fd, target)
        """,
}


@pytest.mark.parametrize("split", [True, False], ids=["split", "in_process"])
@pytest.mark.parametrize("probe", sorted(DESCRIPTOR_PROBES))
def test_a_run_holds_only_its_stdio_and_pipes_never_a_descriptor_of_the_server(sandbox, probe, split):
    result = sandbox.run(program(DESCRIPTOR_PROBES[probe]), CONTROL[1], split=split)
    assert result.passed, (result.status, result.detail)
    found = [line.split()[1:] for line in result.stdout.splitlines() if line.startswith("FD ")]
    if probe == "fstat_every_number":
        assert found[:1] == [["0", "chr"]] and found, found  # stdin is /dev/null
        assert all(kind == "pipe" for _, kind in found[1:]) and all(int(fd) < 64 for fd, _ in found), found
    else:
        assert found == [], found
