"""The `subresources.kubevirt.io/v1` aggregated API: KubeVirt's virt-api, served by the controller.

The real kube-apiserver proxies `/apis/subresources.kubevirt.io/...` here (APIService
v1.subresources.kubevirt.io), so kubectl authentication, RBAC and audit apply. Each call is
authenticated as the front proxy (`authn`), authorized again with a SubjectAccessReview
(`authz`), located on its node (`locate`) and forwarded to that node's handler over mutual
TLS (`forward`, `console`). Answers and failures are Kubernetes Status objects (`errors`).

    config = SubresourceConfig.from_env(os.environ)      # None: no certificates mounted
    if config is not None:
        tg.create_task(SubresourceServer(config, client, registry).run(), name="subresources")
"""

from shared.actions import ACTIONS, Action, ActionSpec
from shared.labels import HANDLER_ENDPOINT_ANNOTATION
from virt_api.subresources.config import SubresourceConfig
from virt_api.subresources.server import SubresourceServer

__all__ = [
    "ACTIONS",
    "HANDLER_ENDPOINT_ANNOTATION",
    "Action",
    "ActionSpec",
    "SubresourceConfig",
    "SubresourceServer",
]
