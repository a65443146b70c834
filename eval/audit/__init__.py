"""Audits of code-editing benchmarks: do their tests notice what an edit should preserve?"""
