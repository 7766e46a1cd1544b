"""The VMI replica set controller: VirtualMachineInstanceReplicaSets kept at their replica
count (`controller.py` does I/O, `logic.py` decides)."""
