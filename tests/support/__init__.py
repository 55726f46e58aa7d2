"""Helpers the tests call (no tests, no fixtures here: fixtures live in the conftest.py of
the folder that uses them, or in tests/conftest.py when every folder does)."""
