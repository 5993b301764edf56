"""labkit: explicit scope and stateless elicitation for MCP 2026-07-28."""

__version__ = "0.1.0"
