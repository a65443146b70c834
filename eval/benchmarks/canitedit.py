"""CanItEdit (Cassano et al. 2024): instructional edits of Python programs, descriptive and lazy
instructions as splits; pass@k and ExcessCode."""

from core.benchmarks.canitedit import CanItEditOptions
from eval.benchmarks.programs import ProgramKind


class CanItEdit(ProgramKind):
    name = "canitedit"
    options = CanItEditOptions


KIND = CanItEdit()
