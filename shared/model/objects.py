"""What every top-level kubevirt.io/v1 object shares: apiVersion, kind, metadata."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from shared.apigroup import API_VERSION
from shared.model._codec import Model
from shared.model.meta import ObjectMeta, OwnerReference


@dataclass(frozen=True, slots=True, kw_only=True)
class KubeObject(Model):
    """A top-level object; subclasses add spec and status."""

    KIND: ClassVar[str] = ""
    PLURAL: ClassVar[str] = ""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = field(default_factory=ObjectMeta)

    @classmethod
    def new(cls, **fields: Any) -> Self:
        """A fresh object with apiVersion and kind set (for objects the daemons create)."""
        return cls(api_version=API_VERSION, kind=cls.KIND, **fields)

    @property
    def key(self) -> str:
        """ "namespace/name", the work-queue and cache key."""
        return self.metadata.key

    @property
    def name(self) -> str:
        """metadata.name ("" when unset)."""
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        """metadata.namespace ("" when unset)."""
        return self.metadata.namespace or ""

    @property
    def uid(self) -> str:
        """metadata.uid ("" when unset)."""
        return self.metadata.uid or ""

    def controller_reference(self, *, api_version: str = API_VERSION) -> OwnerReference:
        """The ownerReference naming this object the controller of what it makes
        (blockOwnerDeletion set, as KubeVirt's and Kubernetes' controllers do)."""
        return OwnerReference(
            api_version=api_version,
            kind=self.KIND,
            name=self.name,
            uid=self.uid,
            controller=True,
            block_owner_deletion=True,
        )
