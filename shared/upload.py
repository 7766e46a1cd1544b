"""The upload server's contract: what the DataVolume controller starts, what the upload
server serves, what `virtctl-py image-upload` calls (CDI's cdi-upload-<dv> pod).

The server listens on the pod's loopback only: a client reaches it through the API server's
pods/portforward (so the API server authenticates and authorizes every upload), never over
the pod network.

    POST|PUT /v1beta1/upload   the disk (raw or qcow2) as the body; 200 once converted into
                               the claim, 400 with the reason if it is no disk image
    GET /healthz               200 while the server runs (the readiness probe)
"""

from __future__ import annotations

from shared.naming import fit

UPLOAD_PORT = 8080
UPLOAD_PATH = "/v1beta1/upload"
HEALTH_PATH = "/healthz"
UPLOAD_POD_PREFIX = "cdi-upload-"
UPLOAD_CONTAINER = "cdi-upload-server"
UPLOAD_COMMAND = "virt-uploadserver-py"
# CDI's annotations on a claim uploaded into: the target mark (a bare claim with it gets an
# upload server: `image-upload pvc`), and the upload pod's phase and readiness kept on it.
UPLOAD_TARGET_ANNOTATION = "cdi.kubevirt.io/storage.upload.target"
POD_PHASE_ANNOTATION = "cdi.kubevirt.io/storage.pod.phase"
POD_READY_ANNOTATION = "cdi.kubevirt.io/storage.pod.ready"
RUNNING_MESSAGE_ANNOTATION = "cdi.kubevirt.io/storage.condition.running.message"  # why it failed
# Where the body lands in the pod (the scratch emptyDir) before qemu-img converts it.
UPLOAD_FILE = "/scratch/disk"


def upload_pod_name(datavolume: str) -> str:
    """CDI's name for the upload server pod of a DataVolume."""
    return fit(f"{UPLOAD_POD_PREFIX}{datavolume}")
