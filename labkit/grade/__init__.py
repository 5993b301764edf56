"""The auto-grader: `labkit grade` scores learner notebooks against the solutions.

Owns: running kernels (the only part of labkit that does), grafting the solutions' checked
outputs and comparing them with nbval, the hidden checks, scoring, the reports (JSON, JUnit,
feedback, the class view) and batch grading.

This package's `__init__` stays empty of imports: the kernel launcher (`launcher`) is started
as `python -m labkit.grade.launcher` and must restrict itself before anything heavy (or any
thread) exists.
Imports nothing.
"""
