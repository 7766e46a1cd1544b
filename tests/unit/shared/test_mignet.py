"""The migration network's contract: the KubeVirt CR's `migrations.network` validated at
admission naming the field, and the handler pods' multus annotation it renders."""

from __future__ import annotations

import json

import pytest

from shared.clusterconfig import ClusterConfig, resolve, validate_kubevirt
from shared.mignet import handler_networks
from shared.model.kubevirt import KubeVirt


def kubevirt(network: str) -> KubeVirt:
    return KubeVirt.from_dict(
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "KubeVirt",
            "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
            "spec": {"configuration": {"migrations": {"network": network}}},
        }
    )


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("other-ns/net", id="namespaced"),
        pytest.param("Mig_Net", id="not-a-name"),
        pytest.param("a" * 254, id="too-long"),
    ],
)
def test_bad_networks_are_refused_naming_the_field(value: str) -> None:
    """A value that is not a NAD name in the CR's namespace is refused, named."""
    (error,) = validate_kubevirt(kubevirt(value))
    assert error.path == "spec.configuration.migrations.network"


def test_a_network_is_in_force_and_empty_means_none() -> None:
    """A good name is the configuration's migration network; "" is the pod network."""
    assert resolve(ClusterConfig(), kubevirt("migration-net")).migration_network == "migration-net"
    assert resolve(ClusterConfig(), kubevirt("")).migration_network is None
    assert ClusterConfig().migration_network is None


def test_the_handler_annotation_names_migration0() -> None:
    """One multus entry: the NAD, its namespace and KubeVirt's interface name."""
    value = json.loads(handler_networks("mig", namespace="kubevirt"))
    assert value == [{"name": "mig", "namespace": "kubevirt", "interface": "migration0"}]
