"""The front proxy's settings: waited for at start, refreshed afterwards."""

from __future__ import annotations

import asyncio
import itertools
import json
import ssl
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from shared.kube import NotFound, Resource, TransportError
from shared.kube.ratelimit import BackoffPolicy
from tests.unit.virt_api.subresources.certs import foreign_ca
from virt_api.subresources.frontproxy import (
    CONFIGMAPS,
    FrontProxy,
    keep_current,
    read_config,
    wait_for_config,
)

FAST = BackoffPolicy(initial=0.001, cap=0.001)


@dataclass
class SequenceKube:
    """Answers ConfigMap reads from a script: exceptions are raised, dicts returned."""

    answers: Iterator[Any]
    reads: list[tuple[str, str | None]] = field(default_factory=list)
    read_enough: asyncio.Event = field(default_factory=asyncio.Event)
    enough: int = 0  # reads after which read_enough is set (0: never)

    async def get(
        self, resource: Resource, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        assert resource == CONFIGMAPS
        self.reads.append((name, namespace))
        if len(self.reads) == self.enough:
            self.read_enough.set()
        answer = next(self.answers)
        if isinstance(answer, Exception):
            raise answer
        data: dict[str, Any] = answer
        return data


def configmap(ca: str, *names: str) -> dict[str, Any]:
    data = {"requestheader-client-ca-file": ca}
    return {"data": data | {"requestheader-allowed-names": json.dumps(list(names))}}


@pytest.fixture(scope="module")
def pems(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("cas")
    return (
        foreign_ca(root / "a")[0].read_text(),
        foreign_ca(root / "b")[0].read_text(),
    )


async def test_start_waits_through_failures(pems: tuple[str, str]) -> None:
    """Missing ConfigMap, transport errors and a CA-less ConfigMap are retried."""
    kube = SequenceKube(
        iter(
            [
                NotFound(404, "NotFound", "cm"),
                TransportError("refused"),
                {"data": {}},
                configmap(pems[0], "front-proxy-client"),
            ]
        )
    )
    config = await wait_for_config(kube, policy=FAST)
    assert config.allowed_names == ("front-proxy-client",)
    assert kube.reads[-1] == ("extension-apiserver-authentication", "kube-system")
    assert len(kube.reads) == 4


async def test_refresh_adds_a_new_ca_and_new_names(pems: tuple[str, str], tmp_path: Path) -> None:
    """A rotated CA is added to the live TLS context; allowed names apply at once."""
    old, new = pems
    first = await read_config(SequenceKube(iter([configmap(old, "front-proxy-client")])))
    proxy = FrontProxy(first)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_verify_locations(cadata=old)
    assert len(tls.get_ca_certs()) == 1
    fresh = configmap(new, "front-proxy-client", "aggregator")
    # The third read starts only after the second (the new settings) has been applied.
    kube = SequenceKube(
        itertools.chain([TransportError("blip")], itertools.repeat(fresh)), enough=3
    )
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(keep_current(kube, proxy, tls, interval=0.001))
        async with asyncio.timeout(10):  # a bound for a hung loop, not a timing assertion
            await kube.read_enough.wait()
        task.cancel()
    assert proxy.config.allowed_names == ("front-proxy-client", "aggregator")
    assert len(tls.get_ca_certs()) == 2
