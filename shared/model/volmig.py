"""Volume migration (KubeVirt's `updateVolumesStrategy: Migration`): the VM's strategy,
the VMI's status.migratedVolumes and the VM's status.volumeUpdateState.

A running VM whose volume is pointed at another claim, with strategy Migration, has its
disk copied to that claim by a live migration with storage copy (controller/vm/volmig.py,
docs/volume-migration.md); with Replacement (KubeVirt's default) the change waits for a
restart.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from shared.model._codec import Model, json_name
from shared.model.volumestatus import PersistentVolumeClaimInfo

# The VMIM of a volume migration carries it (KubeVirt's annotation; value: the VMI's name).
VOLUME_UPDATE_MIGRATION = "kubevirt.io/volume-update-migration"


class UpdateVolumesStrategy(enum.StrEnum):
    """VM spec.updateVolumesStrategy."""

    MIGRATION = "Migration"
    REPLACEMENT = "Replacement"


@dataclass(frozen=True, slots=True, kw_only=True)
class StorageMigratedVolumeInfo(Model):
    """One volume being (or last) migrated: its source and destination claims."""

    volume_name: str | None = None
    source_pvc_info: PersistentVolumeClaimInfo | None = field(
        default=None, metadata=json_name("sourcePVCInfo")
    )
    destination_pvc_info: PersistentVolumeClaimInfo | None = field(
        default=None, metadata=json_name("destinationPVCInfo")
    )

    @property
    def source_claim(self) -> str | None:
        return self.source_pvc_info.claim_name if self.source_pvc_info else None

    @property
    def destination_claim(self) -> str | None:
        return self.destination_pvc_info.claim_name if self.destination_pvc_info else None


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeMigrationState(Model):
    """VM status.volumeUpdateState.volumeMigrationState: the volumes of a migration the
    VM's spec already names (kept while it is pending, for a manual recovery)."""

    migrated_volumes: tuple[StorageMigratedVolumeInfo, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeUpdateState(Model):
    """VM status.volumeUpdateState."""

    volume_migration_state: VolumeMigrationState | None = None
