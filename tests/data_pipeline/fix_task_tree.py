"""A small package with pytest files and doctests, written where a test asks: the fix-task builder's
input in the tests (src layout, a module that imports its own package, a fixture test, a Test class,
parametrize, `import pkg.mod as m`)."""

from __future__ import annotations

from pathlib import Path

FILES = {
    "src/minicalc/__init__.py": '"""A small package with tests."""\n',
    "src/minicalc/stats.py": '''"""Descriptive statistics."""


def mean(xs):
    """The arithmetic mean.

    >>> mean([1, 2, 3])
    2.0
    """
    if not xs:
        raise ValueError("mean of nothing")
    return sum(xs) / len(xs)


def median(xs):
    ordered = sorted(xs)
    n = len(ordered)
    mid = n // 2
    if n % 2 == 1:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2


def clamp(x, low, high):
    # keep x within [low, high]
    if x < low:
        return low
    if x > high:
        return high
    return x


def untested(x):
    return x * 2


class Running:
    """A running total."""

    def __init__(self):
        self.total = 0
        self.count = 0

    def add(self, x):
        self.total += x
        self.count += 1
        return self

    def average(self):
        return self.total / self.count if self.count else 0.0
''',
    "src/minicalc/text.py": '''import re


def slugify(text, sep="-"):
    words = re.findall(r"[a-z0-9]+", text.lower())
    return sep.join(words)


def chunks(seq, size):
    """Split `seq` into lists of `size` items (the last may be shorter).

    >>> chunks([1, 2, 3, 4, 5], 2)
    [[1, 2], [3, 4], [5]]
    """
    if size < 1:
        raise ValueError("size must be positive")
    return [list(seq[i : i + size]) for i in range(0, len(seq), size)]


def pairs(d):
    """A dict's items as a sorted list of pairs.

    >>> from minicalc.text import pairs  # the module's own names need no import
    >>> pairs({"b": 2, "a": 1})
    [('a', 1), ('b', 2)]
    >>> pairs(load_from_the_network())  # doctest: +SKIP
    [('x', 1)]
    >>> pairs({"z": 0, "y": 1})
    [('y', 1),
     ('z', 0)]
    """
    return sorted(d.items())
''',
    "src/minicalc/report.py": """from minicalc.stats import mean


def summary(xs):
    return f"mean={mean(xs)}"
""",
    "tests/test_stats.py": """import pytest

from minicalc.stats import Running, clamp, mean, median


@pytest.fixture
def numbers():
    return [1, 2, 3]


def test_mean():
    assert mean([2, 4]) == 3
    with pytest.raises(ValueError):
        mean([])


def test_mean_of_a_fixture(numbers):
    assert mean(numbers) == 2


@pytest.mark.parametrize("xs, expected", [([1, 3, 2], 2), ([4, 1, 3, 2], 2.5), ([7], 7)])
def test_median(xs, expected):
    assert median(xs) == expected


def test_clamp():
    assert clamp(5, 0, 10) == 5
    assert clamp(-1, 0, 10) == 0
    assert clamp(11, 0, 10) == 10


class TestRunning:
    def test_average(self):
        r = Running().add(2).add(4)
        assert r.average() == 3
        assert Running().average() == 0.0
""",
    "tests/test_text.py": """import minicalc.text as t


def test_slugify():
    assert t.slugify("Hello, World!") == "hello-world"
    assert t.slugify("a b", sep="_") == "a_b"


def test_chunks():
    assert t.chunks("abcde", 2) == [["a", "b"], ["c", "d"], ["e"]]
""",
    "tests/test_legacy.py": """import unittest

from minicalc import text


class ChunkChecks(unittest.TestCase):
    def setUp(self):
        self.items = [1, 2, 3]

    def test_pairs(self):
        self.assertEqual(text.chunks(self.items, 2), [[1, 2], [3]])
""",
    "tests/test_report.py": """from minicalc.report import summary


def test_summary():
    assert summary([2]) == "mean=2.0"
""",
}


def write_tree(root: Path) -> Path:
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
