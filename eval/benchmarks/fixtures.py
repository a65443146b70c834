"""The project's own CanItEdit-format problems (`core/benchmarks/fixtures.jsonl`), scored as CanItEdit."""

from core.benchmarks.canitedit import FixturesOptions
from eval.benchmarks.programs import ProgramKind


class Fixtures(ProgramKind):
    name = "fixtures"
    options = FixturesOptions


KIND = Fixtures()
