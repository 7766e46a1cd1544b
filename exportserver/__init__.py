"""virt-exportserver-py: the exporter pod's HTTPS server (KubeVirt's virt-exportserver)."""
