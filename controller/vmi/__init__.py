"""The VMI controller: a launcher pod per VMI, phases until a node takes it, hotplug
attachment pods (`controller.py` does I/O, `logic.py` decides)."""
