"""Evaluation: sandboxed execution, generation backends, benchmarks and metrics."""
