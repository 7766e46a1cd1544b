"""backup.kubevirt.io: VirtualMachineBackup (and the trackers it updates)."""
