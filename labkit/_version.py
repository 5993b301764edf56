"""The package version, in a module of its own so that `labkit/__init__.py` can export the
public API while the core (`server.py`) reads the version without importing the package root.

Imports nothing.
"""

__version__ = "0.1.0"
