"""The wire contract between daemons: framing, typed errors, client and server.

See docs/wire-protocol.md for the contract itself.
"""
