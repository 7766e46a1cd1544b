"""The node labeller: documents in, labels out, and the patch that gets the Node there."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from handler.nodelabeller import (
    LabellerConfig,
    NodeCPU,
    NodeLabeller,
    label_patch,
    node_labels,
    parse,
)
from shared import cpulabels
from tests.unit.handler.fakes import FakeApi
from tests.unit.handler.waiting import until

# Cut from what QEMU 7.2 under TCG reports here (domcapabilities, virttype qemu).
DOMCAPS = """<domainCapabilities><cpu>
  <mode name='host-passthrough' supported='no'/>
  <mode name='host-model' supported='yes'>
    <model fallback='forbid'>EPYC</model>
    <vendor>AMD</vendor>
    <feature policy='require' name='acpi'/>
    <feature policy='require' name='svme-addr-chk'/>
    <feature policy='disable' name='vme'/>
  </mode>
  <mode name='custom' supported='yes'>
    <model usable='yes' vendor='unknown'>qemu64</model>
    <model usable='no' vendor='AMD'>phenom</model>
    <model usable='yes' vendor='Intel'>Westmere</model>
    <model usable='no' vendor='Intel'>Skylake-Server</model>
    <model usable='yes' vendor='Intel'>Penryn</model>
  </mode>
</cpu></domainCapabilities>"""

EXPANDED = """<cpu mode='custom' match='exact'>
  <model fallback='forbid'>EPYC</model>
  <vendor>AMD</vendor>
  <feature policy='require' name='3dnow'/>
  <feature policy='disable' name='3dnowprefetch'/>
  <feature policy='require' name='sse2'/>
</cpu>"""


def test_parse_reads_usable_models_host_model_and_features() -> None:
    """Usable custom models only; the host model, its vendor and required features; the
    expanded CPU's required (not disabled) features."""
    cpu = parse(DOMCAPS, EXPANDED)
    assert cpu == NodeCPU(
        models=("qemu64", "Westmere", "Penryn"),
        host_model="EPYC",
        vendor="AMD",
        host_model_required=("acpi", "svme-addr-chk"),
        features=("3dnow", "sse2"),
    )


def test_labels_are_kubevirts_and_drop_obsolete_models() -> None:
    """KubeVirt's keys, all "true"; qemu64 (obsolete by KubeVirt's default) unlabelled;
    the host model gets its migration label."""
    labels = node_labels(parse(DOMCAPS, EXPANDED), obsolete=cpulabels.DEFAULT_OBSOLETE_MODELS)
    assert labels == {
        "cpu-model.node.kubevirt.io/Westmere": "true",
        "cpu-model.node.kubevirt.io/Penryn": "true",
        "cpu-model-migration.node.kubevirt.io/Westmere": "true",
        "cpu-model-migration.node.kubevirt.io/Penryn": "true",
        "cpu-model-migration.node.kubevirt.io/EPYC": "true",
        "cpu-feature.node.kubevirt.io/3dnow": "true",
        "cpu-feature.node.kubevirt.io/sse2": "true",
        "cpu-vendor.node.kubevirt.io/AMD": "true",
        "host-model-cpu.node.kubevirt.io/EPYC": "true",
        "host-model-required-features.node.kubevirt.io/acpi": "true",
        "host-model-required-features.node.kubevirt.io/svme-addr-chk": "true",
    }


def test_an_obsolete_host_model_is_flagged_and_bad_names_left_out() -> None:
    """An obsolete host model: KubeVirt's obsolete-host-model label instead of a migration
    label; a name no label key can hold is skipped."""
    cpu = NodeCPU(models=("ok", "bad name"), host_model="qemu64", features=("-x",))
    labels = node_labels(cpu, obsolete=frozenset({"qemu64"}))
    assert labels == {
        "cpu-model.node.kubevirt.io/ok": "true",
        "cpu-model-migration.node.kubevirt.io/ok": "true",
        "host-model-cpu.node.kubevirt.io/qemu64": "true",
        cpulabels.OBSOLETE_HOST_MODEL_LABEL: "true",
    }


def test_no_host_model_and_no_features_document() -> None:
    """host-model unsupported and no expanded CPU: models only."""
    domcaps = DOMCAPS.replace(
        "name='host-model' supported='yes'", "name='host-model' supported='no'"
    )
    cpu = parse(domcaps, None)
    assert (cpu.host_model, cpu.vendor, cpu.features) == (None, None, ())
    assert cpu.models == ("qemu64", "Westmere", "Penryn")


@pytest.mark.parametrize(
    ("current", "desired", "expected"),
    [
        pytest.param(
            {"kubernetes.io/hostname": "n1", "cpu-model.node.kubevirt.io/A": "true"},
            {"cpu-model.node.kubevirt.io/A": "true"},
            None,
            id="nothing-to-do",
        ),
        pytest.param(
            {
                "kubernetes.io/hostname": "n1",
                "kubevirt.io/schedulable": "true",
                "cpu-model.node.kubevirt.io/Old": "true",
                "cpu-feature.node.kubevirt.io/gone": "true",
                "cpu-model.node.kubevirt.io/A": "false",
            },
            {"cpu-model.node.kubevirt.io/A": "true", "cpu-feature.node.kubevirt.io/new": "true"},
            {
                "cpu-feature.node.kubevirt.io/gone": None,
                "cpu-feature.node.kubevirt.io/new": "true",
                "cpu-model.node.kubevirt.io/A": "true",
                "cpu-model.node.kubevirt.io/Old": None,
            },
            id="add-fix-remove-only-ours",
        ),
    ],
)
def test_label_patch(
    current: dict[str, str], desired: dict[str, str], expected: dict[str, str | None] | None
) -> None:
    """Only the difference, and only keys of our prefixes removed (others untouched)."""
    patch = label_patch(current, desired)
    assert (patch and patch["metadata"]["labels"]) == expected


async def test_labeller_relabels_when_the_documents_change(tmp_path: Path) -> None:
    """A round patches the Node to the documents; the next does nothing; new documents
    (a new seed) replace the stale keys."""
    (tmp_path / cpulabels.DOMCAPS_FILE).write_text(DOMCAPS)
    api = FakeApi()
    api.nodes["node01"] = {"metadata": {"labels": {"kubernetes.io/hostname": "node01"}}}
    labeller = NodeLabeller(api, node="node01", config=LabellerConfig(directory=tmp_path))
    await labeller.sync()
    await labeller.sync()
    labels = await api.node_labels("node01")
    assert labeller.patches == 1
    assert labels["cpu-model.node.kubevirt.io/Westmere"] == "true"
    assert labels["kubernetes.io/hostname"] == "node01"
    (tmp_path / cpulabels.DOMCAPS_FILE).write_text(DOMCAPS.replace("Westmere", "Nehalem"))
    await labeller.sync()
    labels = await api.node_labels("node01")
    assert "cpu-model.node.kubevirt.io/Westmere" not in labels
    assert labels["cpu-model.node.kubevirt.io/Nehalem"] == "true"
    assert labeller.patches == 2


async def test_labeller_without_documents_patches_nothing(tmp_path: Path) -> None:
    """No documents yet (the init container failed): the Node is left as it is."""
    api = FakeApi()
    labeller = NodeLabeller(api, node="node01", config=LabellerConfig(directory=tmp_path))
    await labeller.sync()
    assert api.node_patches == []


async def test_the_crs_obsolete_models_are_read_each_round_and_a_poke_relabels(
    tmp_path: Path,
) -> None:
    """obsoleteCPUModels in force is read at each round: Westmere made obsolete loses its
    labels, qemu64 no longer obsolete gains them; a poke ends the wait at once."""
    (tmp_path / cpulabels.DOMCAPS_FILE).write_text(DOMCAPS)
    api = FakeApi()
    obsolete = {"models": cpulabels.DEFAULT_OBSOLETE_MODELS}
    config = LabellerConfig(directory=tmp_path, interval=3600)
    labeller = NodeLabeller(api, node="node01", config=config, obsolete=lambda: obsolete["models"])
    await labeller.sync()
    assert cpulabels.model_label("Westmere") in await api.node_labels("node01")
    obsolete["models"] = frozenset({"Westmere"})
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(labeller.run())
        await until(lambda: labeller.patches == 2, "the first round of run() relabelling")
        obsolete["models"] = frozenset()
        labeller.poke()
        await until(lambda: labeller.patches == 3, "the poke relabelling")
        task.cancel()
    labels = await api.node_labels("node01")
    assert cpulabels.model_label("Westmere") in labels
    assert cpulabels.model_label("qemu64") in labels
