"""The containment modes (cgroup, tag) and the per-test process mark, shared with the runner's own
tests (tests/unit/run/test_contain.py), so the black-box containment tests run in both modes too."""

from tests.unit.run.test_contain import mark, mode  # noqa: F401  (fixtures, found by pytest here)
