"""The node controller: dead handlers (stale heartbeats) and the VMIs on their nodes
(`controller.py` does I/O, `logic.py` decides)."""
