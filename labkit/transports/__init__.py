"""The real transports around the sans-IO core: newline-delimited stdio and Streamable HTTP.

Each transport only frames bytes, authenticates, maps headers and status codes, and calls
`Server.respond`; the protocol logic stays in the core (transports are thin).
Imports nothing.
"""
