"""The VirtualMachineExport controller (export.kubevirt.io/v1beta1): token, certificate,
exporter pod and Service per export; docs/export.md."""
