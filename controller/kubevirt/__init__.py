"""The KubeVirt CR: its status (controller.py, logic.py) and the live configuration the
controllers read from it (live.py)."""
