"""Grading tests: real kernels on synthetic solution notebooks."""
