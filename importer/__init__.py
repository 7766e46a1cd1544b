"""virt-importer-py: the DataVolume importer's registry client (``pullMethod: pod``)."""
