"""The migration controller: target pods, handoff to the handlers, aborts and finalizers
(`controller.py` does I/O, `logic.py` decides)."""
