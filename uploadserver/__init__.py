"""virt-uploadserver-py: the upload server pod's HTTP server (CDI's cdi-upload-server)."""
