"""snapshot.kubevirt.io: snapshots, restores and clones of VirtualMachines."""
