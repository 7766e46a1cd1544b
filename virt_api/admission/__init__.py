"""Admission webhooks: virt-api's mutating and validating webhooks, served by the controller.

kube-apiserver calls them for every create and update of a VMI, VM or VMIM
(Mutating/ValidatingWebhookConfiguration in manifests/base/admission, failurePolicy
Fail): `defaults` fills in KubeVirt's defaults, `validate` refuses, in one answer, every
bad field and every field kubevirt-py does not honour (shared.model.unsupported).

    config = AdmissionConfig.from_env(os.environ)      # None: no certificate mounted
    if config is not None:
        tg.create_task(AdmissionServer(config, client, registry).run(), name="admission")
"""

from virt_api.admission.config import AdmissionConfig
from virt_api.admission.server import AdmissionServer

__all__ = ["AdmissionConfig", "AdmissionServer"]
