"""The contract between the DataVolume controller and the importer's registry client
(`virt-importer-py`, importer/): a ``registry`` source pulled by the importer pod itself
(CDI's ``pullMethod: pod``) rather than by the node's container runtime.

The controller passes the credentials of ``spec.source.registry.secretRef`` (a Secret with
CDI's keys ``accessKeyId``, the user name, and ``secretKey``, the password) as the two
environment variables below, and mounts ``certConfigMap`` (every key a PEM CA bundle) at
``CERT_DIR``; the client trusts those CAs (besides the system's) for the registry.
"""

from __future__ import annotations

PULL_COMMAND = "virt-importer-py"
ACCESS_KEY_ID = "accessKeyId"  # the Secret's keys (CDI's names)
SECRET_KEY = "secretKey"
ACCESS_KEY_ENV = "IMPORTER_ACCESS_KEY_ID"
SECRET_KEY_ENV = "IMPORTER_SECRET_KEY"
CERT_DIR = "/certs"
# Every failure's message starts so (the DataVolume's Ready condition shows it).
FAILURE_PREFIX = "the source image cannot be pulled"
