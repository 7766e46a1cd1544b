"""The VirtualMachinePool controller: pools of VirtualMachines named `<pool>-<index>`
(`controller.py` does I/O, `logic.py` decides)."""
