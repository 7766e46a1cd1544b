"""The VM controller: run strategies, start/stop requests, instancetype expansion and
revisions, declarative hotplug (`controller.py` does I/O, `logic.py` decides)."""
