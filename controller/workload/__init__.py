"""The workload updater: running VMIs onto the current launcher image (controller.py, logic.py)."""
