"""The umask-0 fixture of state.durable's own tests, for the whole-session check of private files."""

from tests.unit.state.test_durable import umask_zero  # noqa: F401  (a fixture, found by pytest here)
