"""mcpwrap: a TOML file of shell commands served as an MCP server on stdio."""

__version__ = "0.1.0"
