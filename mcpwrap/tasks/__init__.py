"""Durable tasks: the on-disk store and the detached supervisor (`python -m mcpwrap.tasks`)."""
