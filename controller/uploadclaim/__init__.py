"""Upload claims: a bare PersistentVolumeClaim annotated as CDI's upload target."""
