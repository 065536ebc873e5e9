"""`python -m mcpwrap` runs the same CLI as the console script."""

from mcpwrap.cli import entry

entry()
