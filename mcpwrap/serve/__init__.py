"""The trio drivers: the only code that performs the protocol core's actions (stdio, HTTP, the pre-trio front)."""
