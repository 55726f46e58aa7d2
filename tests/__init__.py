"""The test suite. A package (as is each folder under it), so every test module has a unique
dotted name (``tests.verbs.test_jobs``) and pytest puts the repository root on ``sys.path``:
``tests.support`` imports the same way from any folder."""
