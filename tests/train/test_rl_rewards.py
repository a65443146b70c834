"""RL's execution rewards (train/rl_rewards.py) on real synthetic tasks in the real sandbox.

A policy is rewarded by the verdict its task's benchmark kind gives in evaluation, so these tests
replay completions instead of sampling a model: the reference edit earns the pass, the unedited
code does not, and replays of the known hacks (an exit before the tests, objects equal to
everything, rebound names, forks, files left for a later run, reading the tests) earn nothing on
problems that run split. They also pin what the monitor counts, the partial `tests` reward, the
weight of a pass that rests on delegated checks, and the callables trl is given.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator

import pytest

from core.formats import get_format
from core.sandbox import Sandbox, SandboxLimits, bwrap_available
from core.sandbox.config import SandboxConfig
from eval.benchmarks import get_kind
from train.rl_rewards import JUDGED, RewardConfig, RLTask, VerdictRewards
from train.synthetic_edits import synthetic_tasks

LIMITS = SandboxLimits(timeout_s=5.0, memory_mb=1024, max_processes=64)
FMT = get_format("editcoder")
SPLIT = "descriptive"


def program(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# Rows of our own in CanItEdit's schema, beside the synthetic ones (which have one assert each).
ADD = {  # three asserts, so that a partly right edit holds some of them
    "id": "add-three",
    "name": "add_three",
    "before": "def add(a, b):\n    return a - b\n",
    "after": "def add(a, b):\n    return a + b\n",
    "instruction_descriptive": "Make add return the sum of a and b.",
    "instruction_lazy": "Fix add.",
    "tests": "assert add(0, 0) == 0\nassert add(2, 0) == 2\nassert add(2, 3) == 5\n",
}
POINTS = {  # the tests compare two of the program's objects: the program's __eq__ decides (delegated)
    "id": "points-eq",
    "name": "points_eq",
    "before": program("""
        class Point:
            def __init__(self, x, y):
                self.x, self.y = x, y


        def make(x, y):
            return Point(x, y)
    """),
    "after": program("""
        class Point:
            def __init__(self, x, y):
                self.x, self.y = x, y

            def __eq__(self, other):
                return isinstance(other, Point) and (self.x, self.y) == (other.x, other.y)


        def make(x, y):
            return Point(x, y)
    """),
    "instruction_descriptive": "Make two points with the same coordinates equal.",
    "instruction_lazy": "Points compare by value.",
    "tests": "assert make(1, 2) == make(1, 2)\nassert make(1, 2) != make(2, 1)\n",
}


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RLTask]:
    """12 synthetic tasks and our two rows, loaded by CanItEdit's kind as RL loads them."""
    path = tmp_path_factory.mktemp("tasks") / "tasks.jsonl"
    rows = [*synthetic_tasks(12, seed=0), ADD, POINTS]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    kind = get_kind("canitedit")
    problems = kind.load(kind.options(name="canitedit", path=str(path)))
    return {f"{p.id}/{SPLIT}": RLTask(f"{p.id}/{SPLIT}", p, SPLIT, kind) for p in problems}


@pytest.fixture(scope="module")
def synthetic(tasks: dict[str, RLTask]) -> dict[str, RLTask]:
    return {t: task for t, task in tasks.items() if t.startswith("synthetic-")}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    """The sandbox RL opens (`sandbox.*` defaults: strict, bwrap where it runs), two workers."""
    with SandboxConfig(workers=2).open() as sb:
        yield sb


@pytest.fixture(scope="module")
def rewards(tasks: dict[str, RLTask], sandbox: Sandbox) -> VerdictRewards:
    return VerdictRewards(tasks, FMT, lambda python: sandbox, LIMITS, RewardConfig())


def completions(codes: list[str]) -> list[str]:
    """Each code as a completion in the prompt format (what a policy would answer)."""
    completed = [FMT.completion(code) for code in codes]
    assert [FMT.extract(c) for c in completed] == codes  # the format gives the code back
    return completed


# -- (a) a correct replay passes, the unedited code does not -------------------------------------
def test_the_reference_edit_earns_the_pass_and_the_unedited_code_nothing(rewards, synthetic):
    ids = list(synthetic)
    after = completions([t.problem.after for t in synthetic.values()])
    before = completions([t.problem.before for t in synthetic.values()])
    assert rewards.rewards("pass", ids, after) == [1.0] * len(ids)
    assert rewards.rewards("format", ids, after) == [1.0] * len(ids)
    assert {r["mode"] for r in rewards.verdicts(ids, after)} == {"split"}  # judged as evaluation judges
    assert rewards.rewards("pass", ids, before) == [0.0] * len(ids)
    assert rewards.rewards("format", ids, before) == [1.0] * len(ids)  # a whole program, just wrong


# -- (b) replays of known hacks ------------------------------------------------------------------
def called(tests: str) -> str:
    """The function a synthetic task's one assert calls (what a hack must stand in for)."""
    match = re.match(r"assert (\w+)\(", tests)
    assert match, tests
    return match.group(1)


WRONG = "def {name}(*args, **kwargs):\n    return None\n"
# Each hack is a program for any synthetic task: `{name}` is the function its tests call. None
# computes the answer; each passes only if it defeats the tests' check.
HACKS = {
    "sys_exit_before_the_tests": program("""
        import sys
        {wrong}
        sys.exit(0)
    """),
    "os_exit_before_the_tests": program("""
        import os
        {wrong}
        os._exit(0)
    """),
    "os_exit_inside_the_call": program("""
        import os, sys
        def {name}(*args, **kwargs):
            sys.stdout.flush()
            os._exit(0)
    """),
    "equal_to_everything": program("""
        class Anything:
            def __eq__(self, other):
                return True
            def __ne__(self, other):
                return False
            __hash__ = object.__hash__
        def {name}(*args, **kwargs):
            return Anything()
    """),
    "int_subclass_equal_to_everything": program("""
        class Number(int):
            def __eq__(self, other):
                return True
            __hash__ = int.__hash__
        def {name}(*args, **kwargs):
            return Number(0)
    """),
    "str_subclass_equal_to_everything": program("""
        class Text(str):
            def __eq__(self, other):
                return True
            __hash__ = str.__hash__
        def {name}(*args, **kwargs):
            return Text("")
    """),
    "list_subclass_equal_to_everything": program("""
        class Items(list):
            def __eq__(self, other):
                return True
            __hash__ = object.__hash__
        def {name}(*args, **kwargs):
            return Items()
    """),
    "rebinds_builtins_and_operator_eq": program("""
        import builtins, operator
        class Never(Exception):
            pass
        builtins.AssertionError = Never
        builtins.isinstance = lambda *args: True
        builtins.len = lambda *args: 0
        operator.eq = lambda a, b: True
        operator.ne = lambda a, b: False
        {wrong}
    """),
    "rebinds_the_callers_names": program("""
        import sys
        class Anything:
            def __eq__(self, other):
                return True
            __hash__ = object.__hash__
        def {name}(*args, **kwargs):
            frame = sys._getframe(1)
            while frame is not None:
                frame.f_globals["AssertionError"] = Exception
                frame.f_globals["{name}"] = lambda *a, **k: Anything()
                frame.f_builtins["AssertionError"] = Exception
                frame = frame.f_back
            return Anything()
    """),
    "silences_failures_at_exit": program("""
        import atexit, os, sys
        sys.excepthook = lambda *args: None
        atexit.register(lambda: os._exit(0))
        {wrong}
    """),
    "forks_at_import_two_answerers": program("""
        import os
        CHILD = os.fork() == 0
        def {name}(*args, **kwargs):
            return -1 if CHILD else -2
    """),
    "fork_child_writes_pass_markers": program("""
        import os
        def {name}(*args, **kwargs):
            if os.fork() == 0:
                for fd in range(1, 64):
                    try:
                        os.write(fd, b"PASSED\\nOK\\n")
                    except OSError:
                        pass
                os._exit(0)
            os.wait()
            return None
    """),
    # a copy per guess runs on; the guess whose copy's tests did not fail is the answer
    "fork_oracle": program("""
        import os
        def {name}(*args, **kwargs):
            for guess in (-1, 0, 1, 5, 120, "", "LEVEL UP!", "level", [], [3, 1, 4, 5], True, 2.8):
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
            return None
    """),
    # the expected value out of any text in reach: files, /proc, stack frames, the heap
    "reads_the_tests": program("""
        import ast, gc, glob, os, re, sys
        PATTERN = re.compile(r"assert {name}\\(.*\\) == (.+)")
        def read(path):
            try:
                with open(path, "rb") as f:
                    return f.read(1 << 20).decode(errors="replace")
            except Exception:
                return ""
        def texts():
            roots = [os.getcwd(), "/tmp", "/dev/shm"]
            try:
                pids = [p for p in os.listdir("/proc") if p.isdigit()]
            except Exception:
                pids = ["self", "1"]
            for pid in pids:
                roots.append(f"/proc/{{pid}}/cwd")
                yield read(f"/proc/{{pid}}/cmdline")
                yield read(f"/proc/{{pid}}/environ")
            for root in roots:
                try:
                    paths = glob.glob(root + "/**", recursive=True)
                except Exception:
                    paths = []
                yield from (read(path) for path in paths)
            try:
                frame = sys._getframe(1)
            except Exception:
                frame = None
            while frame is not None:
                for value in (*frame.f_locals.values(), *frame.f_globals.values(), *frame.f_code.co_consts):
                    if isinstance(value, str):
                        yield value
                frame = frame.f_back
            try:
                yield from (obj for obj in gc.get_objects() if isinstance(obj, str))
            except Exception:
                pass
        def {name}(*args, **kwargs):
            for text in texts():
                match = PATTERN.search(text)
                if match:
                    try:
                        return ast.literal_eval(match.group(1).strip())
                    except Exception:
                        pass
            return None
    """),
}


def hack(key: str, tests: str) -> str:
    name = called(tests)
    return HACKS[key].format(name=name, wrong=WRONG.format(name=name))


@pytest.mark.parametrize("key", sorted(HACKS))
def test_a_hack_earns_nothing_on_split_problems(rewards, synthetic, key):
    ids = list(synthetic)
    replay = completions([hack(key, t.problem.tests) for t in synthetic.values()])
    records = rewards.verdicts(ids, replay)
    assert {r["mode"] for r in records} == {"split"}, records  # it ran, split (no early failure)
    assert rewards.rewards("pass", ids, replay) == [0.0] * len(ids), [r["detail"] for r in records]
    assert rewards.rewards("tests", ids, replay) == [0.0] * len(ids)
    assert not any(r["delegated_checks"] for r in records)  # each check compared plain data


@pytest.fixture(scope="module")
def in_process() -> Iterator[Sandbox]:
    """Not strict: the one process that holds program and tests, as a run that is not split."""
    with SandboxConfig(workers=2, strict=False).open() as sb:
        yield sb


PASS_IN_PROCESS = ("equal_to_everything", "int_subclass_equal_to_everything", "fork_oracle")


@pytest.mark.parametrize("key", PASS_IN_PROCESS)
def test_the_same_hacks_pass_where_program_and_tests_share_a_process(synthetic, in_process, key):
    """Controls: these replays are real hacks; the split is what makes them earn nothing."""
    task = synthetic["synthetic-2/descriptive"].problem  # `assert mean([]) == 0`: 0 is a guess
    result = in_process.run(task.program(hack(key, task.tests)), task.tests)
    assert result.passed and result.mode == "in_process", result


def test_reading_the_tests_finds_them_when_they_are_in_reach(rewards, synthetic):
    """Control: the same search passes when the tests' text is in its own file, so its 0 above is
    the tests being out of reach, not a search that finds nothing anywhere."""
    ids = list(synthetic)
    leaked = [
        hack("reads_the_tests", t.problem.tests) + f"LEAKED = {t.problem.tests!r}\n"
        for t in synthetic.values()
    ]
    assert rewards.rewards("pass", ids, completions(leaked)) == [1.0] * len(ids)


# Files a run leaves in its work folder, /tmp or /dev/shm, for a later run on the same worker.
PLACES = ("left.py", "/tmp/left.py", "/dev/shm/left.py")
LEAVE = "for _path in {places!r}:\n    with open(_path, 'w') as _f:\n        _f.write({code!r})\n"
FIND = program("""
    import os
    for _path in {places!r}:
        if os.path.exists(_path):
            exec(open(_path).read())
            break
    else:
        def {name}(*args, **kwargs):
            return None
""")


@pytest.fixture(scope="module")
def one_worker() -> Iterator[Sandbox]:
    """One worker: consecutive runs share its server, so what one run leaves the next could see."""
    with SandboxConfig(workers=1).open() as sb:
        yield sb


def test_files_left_by_one_run_do_not_reach_the_next(synthetic, one_worker):
    """Under bwrap every run gets a fresh work folder, /tmp and /dev/shm; the local backend only
    empties its folders (and keeps Python runs out of the host's /tmp), so it promises no such thing."""
    if not bwrap_available():
        pytest.skip("bubblewrap cannot run here: the local backend does not renew a run's scratch")
    rewards = VerdictRewards(synthetic, FMT, lambda python: one_worker, LIMITS, RewardConfig())
    ids = list(synthetic)
    problems = [t.problem for t in synthetic.values()]
    leave = [p.after + LEAVE.format(places=PLACES, code=p.after) for p in problems]
    find = [FIND.format(places=PLACES, name=called(p.tests)) for p in problems]
    # control: in one run, the file is written, found and run (the reference's code): a pass
    assert rewards.rewards("pass", ids, completions([a + f for a, f in zip(leave, find, strict=True)])) == [
        1.0
    ] * len(ids)
    # one batch after another, then both in one batch (run after run on the one worker)
    assert rewards.rewards("pass", ids, completions(leave)) == [1.0] * len(ids)
    assert rewards.rewards("pass", ids, completions(find)) == [0.0] * len(ids)
    both = rewards.rewards("pass", ids + ids, completions(leave + find))
    assert both == [1.0] * len(ids) + [0.0] * len(ids)
    assert all(r["fresh_scratch"] for r in rewards.verdicts(ids + ids, completions(leave + find)))


# -- (c) the monitor -----------------------------------------------------------------------------
def test_the_monitor_counts_each_verdict_and_a_timeout_fails_alone(tasks, sandbox):
    rewards = VerdictRewards(
        tasks, FMT, lambda python: sandbox, SandboxLimits(timeout_s=1.0, max_processes=64), RewardConfig()
    )
    task_id = "synthetic-0/descriptive"
    problem = tasks[task_id].problem
    codes = [problem.after, problem.before, "while True:\n    pass\n", "def broken(:\n", "   \n"]
    replay = completions(codes)
    ids = [task_id] * len(codes)
    assert rewards.rewards("pass", ids, replay) == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert rewards.rewards("format", ids, replay) == [1.0, 1.0, 1.0, 0.0, 0.0]
    statuses = [r["status"] for r in rewards.verdicts(ids, replay)]
    assert statuses == ["passed", "failed", "timeout", "syntax_error", "empty"]
    shares = rewards.monitor(rewards.verdicts(ids, replay))
    verdicts = {k: v for k, v in shares.items() if k.startswith("verdicts/")}
    judged = {k: v for k, v in shares.items() if k.startswith("judged/")}
    assert sum(verdicts.values()) == pytest.approx(1.0) and sum(judged.values()) == pytest.approx(1.0)
    for status in ("passed", "failed", "timeout", "syntax_error", "empty"):
        assert verdicts[f"verdicts/{status}"] == pytest.approx(0.2), status
    assert verdicts["verdicts/memory"] == 0.0 and verdicts["verdicts/error"] == 0.0  # every status, each time
    assert set(judged) == {f"judged/{k}" for k in JUDGED}
    assert judged["judged/split"] == pytest.approx(0.6) and judged["judged/none"] == pytest.approx(0.4)
    assert rewards.monitor([]) == {k: 0.0 for k in shares}  # an empty batch divides by nothing


# -- (d) the tests reward ------------------------------------------------------------------------
def test_the_tests_reward_is_the_share_of_asserts_that_held(rewards):
    task_id = "add-three/descriptive"
    codes = [
        ADD["after"],  # 3 of 3
        "def add(a, b):\n    return a - b\n",  # 2 of 3: the third fails
        "def add(a, b):\n    return a * b\n",  # 1 of 3: the second fails, the third never runs
        "def add(a, b):\n    return 1\n",  # 0 of 3
    ]
    replay = completions(codes)
    ids = [task_id] * len(codes)
    assert rewards.rewards("tests", ids, replay) == pytest.approx([1.0, 2 / 3, 1 / 3, 0.0])
    assert rewards.rewards("pass", ids, replay) == [1.0, 0.0, 0.0, 0.0]
    assert [r["tests_total"] for r in rewards.verdicts(ids, replay)] == [3] * 4


# -- (e) delegated passes ------------------------------------------------------------------------
EQUAL_POINTS = program("""
    class Point:
        def __init__(self, x, y):
            self.x, self.y = x, y
        def __eq__(self, other):
            return True
        def __ne__(self, other):
            return True
    def make(x, y):
        return Point(x, y)
""")


def test_a_pass_resting_on_delegated_checks_earns_the_delegated_weight(tasks, sandbox):
    """`make(1, 2) == make(1, 2)` compares two of the program's objects: its own `__eq__` decides,
    so the split counts the check as delegated. The reference and a Point equal (and unequal) to
    everything both pass that way; the reward cannot tell them apart, only weight them down."""
    task_id = "points-eq/descriptive"
    replay = completions([POINTS["after"], EQUAL_POINTS, POINTS["before"]])
    ids = [task_id] * 3
    for delegated in (0.5, 0.0):
        rewards = VerdictRewards(
            tasks, FMT, lambda python: sandbox, LIMITS, RewardConfig(delegated=delegated)
        )
        records = rewards.verdicts(ids, replay)
        assert [r["mode"] for r in records] == ["split"] * 3
        assert [r["passed"] for r in records] == [True, True, False]
        assert [r["delegated_checks"] for r in records] == [2, 2, 1]  # before: identity said False
        assert rewards.rewards("pass", ids, replay) == [delegated, delegated, 0.0]
        assert rewards.rewards("tests", ids, replay) == [delegated, delegated, 0.0]
        # the monitor counts how a verdict was reached: every one here rested on the program's __eq__
        assert rewards.monitor(records)["judged/delegated"] == 1.0


# -- (f) the callables trl is given --------------------------------------------------------------
def test_trl_reward_functions_answer_per_completion_and_log_the_monitor(tasks, sandbox, monkeypatch):
    config = RewardConfig(passed=1.0, tests=0.5, format=0.1)
    rewards = VerdictRewards(tasks, FMT, lambda python: sandbox, LIMITS, config)
    judged: list[int] = []
    judge = rewards._judge
    monkeypatch.setattr(rewards, "_judge", lambda ids, codes: judged.append(len(codes)) or judge(ids, codes))
    funcs, weights = rewards.functions()
    assert [f.__name__ for f in funcs] == ["pass", "tests", "format"] and weights == [1.0, 0.5, 0.1]

    add = tasks["add-three/descriptive"].problem
    ids = ["add-three/descriptive"] * 3
    texts = completions([add.after, add.before, "def add(:\n"])
    chat = [[{"role": "assistant", "content": text}] for text in texts]  # trl's conversational form
    logged: list[tuple[str, float]] = []

    def log_metric(key: str, value: float) -> None:
        logged.append((key, value))

    batches = (texts, chat, texts)
    values = [
        f(["edit"] * 3, b, task_id=ids, log_metric=log_metric) for f, b in zip(funcs, batches, strict=True)
    ]
    assert values == [[1.0, 0.0, 0.0], pytest.approx([1.0, 2 / 3, 0.0]), [1.0, 1.0, 0.0]]
    assert judged == [3]  # one batch of verdicts, read by every reward
    monitor = rewards.monitor(rewards.verdicts(ids, texts))
    assert dict(logged[:-1]) == monitor  # only the first function logs, once per batch
    assert logged[-1][0] == "rewards_per_second" and logged[-1][1] > 0
    assert dict(logged)["verdicts/syntax_error"] == pytest.approx(1 / 3)


def test_an_unknown_reward_is_refused_by_name(rewards):
    with pytest.raises(ValueError, match="unknown reward 'speed'"):
        rewards.rewards("speed", [], [])


def test_the_reward_config_refuses_what_cannot_train():
    with pytest.raises(ValueError, match="delegated"):
        RewardConfig(delegated=1.5)
    with pytest.raises(ValueError, match="every reward weight is 0"):
        RewardConfig(passed=0.0)


def test_excess_code_is_minus_the_share_of_lines_the_tests_never_ran(tasks, sandbox):
    """CanItEdit's ExcessCode over the whole file (program + tests), measured in the verdict run:
    a passing program with a function its tests never call loses the share of those lines."""
    rewards = VerdictRewards(tasks, FMT, lambda python: sandbox, LIMITS, RewardConfig(excess_code=0.1))
    dead = ADD["after"] + "\n\ndef unused(x):\n    y = x + 1\n    z = y * 2\n    return z\n"
    replay = completions([ADD["after"], dead, ADD["before"]])
    ids = ["add-three/descriptive"] * 3
    # `dead`: 9 statements (6 of the program, 3 asserts), 3 never run: 67% covered
    assert rewards.rewards("excess_code", ids, replay) == [0.0, -0.33, 0.0]  # a failing run: no penalty
    assert rewards.verdicts(ids, replay)[1]["coverage"]["missing"] == [6, 7, 8]
