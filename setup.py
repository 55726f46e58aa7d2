"""Build hook for the native Valkey module (filled in by the native-twins work)."""

from setuptools import setup

setup()
