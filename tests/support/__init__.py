"""Helpers shared by test modules: fake clocks, waiting on conditions, small fakes.

Test modules import helpers from here (or from a package's own support module), never from
another ``test_*.py`` file, so a test file can be moved or deleted without breaking others.
"""
