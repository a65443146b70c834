"""EDIT-Bench (Chi et al. 2025): real IDE edit requests judged by their authors' test suites.

Its suites run as pytest or jest in prepared folders, which this offline sandbox does not build:
each problem says why in `Problem.not_runnable`, and a sample runs as program plus tests (it fails
where the suite needs its folder), so a score here is never a faked pass.
"""

from core.benchmarks.editbench import EditBenchOptions
from eval.benchmarks.programs import ProgramKind


class EditBench(ProgramKind):
    name = "editbench"
    options = EditBenchOptions


KIND = EditBench()
