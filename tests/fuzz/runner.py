"""Send fuzzed objects through a real API server (admission included) and collect what each
answer means; create a bounded few of the accepted ones for real and wait for their status.

Every object is first sent with `dryRun=All`: the API server's schema, defaulting and every
admission webhook run in full and nothing is stored, so thousands cost little CPU and no
daemon work. Then up to `stored_per_kind` accepted objects of each kind in `stored` are
created for real (VMs forced to `runStrategy: Halted`, replica sets and pools to 0
replicas, so nothing boots) for the daemons to act on, and deleted afterwards.
"""

from __future__ import annotations

import asyncio
import copy
import json
import ssl
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from tests.fuzz.judge import Answer, Outcome, has_status, judge
from tests.fuzz.objects import Case

TIMEOUT = 30.0
UPDATES_PER_OBJECT = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """The API server (base URL and admin TLS) and the namespace objects go to."""

    server: str
    tls: ssl.SSLContext
    namespace: str
    concurrency: int = 8


@dataclass(slots=True)
class Tally:
    """Answers by outcome, and the cases that are findings."""

    by_outcome: dict[Outcome, int] = field(default_factory=dict)
    by_kind: dict[str, dict[Outcome, int]] = field(default_factory=dict)
    findings: list[tuple[Case, Answer]] = field(default_factory=list)
    accepted: list[Case] = field(default_factory=list)
    samples: dict[str, str] = field(default_factory=dict)  # a refusal per kind, to show

    def add(self, case: Case, answer: Answer) -> None:
        self.by_outcome[answer.outcome] = self.by_outcome.get(answer.outcome, 0) + 1
        kind = self.by_kind.setdefault(case.kind.kind, {})
        kind[answer.outcome] = kind.get(answer.outcome, 0) + 1
        if answer.outcome is Outcome.ACCEPTED:
            self.accepted.append(case)
        elif answer.outcome is Outcome.REFUSED:
            self.samples.setdefault(case.kind.kind, answer.message.splitlines()[0][:200])
        else:
            self.findings.append((case, answer))


async def post(
    session: aiohttp.ClientSession, target: Target, case: Case, *, dry_run: bool
) -> Answer:
    """POST one object; its judged answer (a transport failure is a 599)."""
    url = target.server + case.kind.path(target.namespace)
    params = {"dryRun": "All"} if dry_run else {}
    try:
        async with (
            asyncio.timeout(TIMEOUT),
            session.post(url, json=case.body, params=params, ssl=target.tls) as resp,
        ):
            return judge(resp.status, await resp.text())
    except (aiohttp.ClientError, TimeoutError, OSError) as e:
        return judge(599, f"no answer: {type(e).__name__}: {e}")


async def dry_run_all(target: Target, cases: Iterable[Case]) -> Tally:
    """Every case with dryRun=All, `target.concurrency` at a time."""
    tally = Tally()
    gate = asyncio.Semaphore(target.concurrency)

    async def one(session: aiohttp.ClientSession, case: Case) -> None:
        async with gate:
            tally.add(case, await post(session, target, case, dry_run=True))

    async with aiohttp.ClientSession() as session, asyncio.TaskGroup() as tg:
        for case in cases:
            tg.create_task(one(session, case))
    return tally


def tamed(case: Case) -> Case:
    """The case made harmless to store: nothing boots, nothing scales up."""
    body = copy.deepcopy(case.body)
    spec = body.get("spec")
    if isinstance(spec, dict):
        if case.kind.kind == "VirtualMachine":
            spec.pop("running", None)
            spec["runStrategy"] = "Halted"
        if "replicas" in spec:
            spec["replicas"] = 0
    return Case(seed=case.seed, index=case.index, kind=case.kind, body=body)


async def patch_spec(
    session: aiohttp.ClientSession, target: Target, case: Case, spec: Any
) -> Answer:
    """A dry-run merge patch of the stored object's spec; its judged answer."""
    url = f"{target.server}{case.kind.path(target.namespace)}/{case.name}"
    headers = {"Content-Type": "application/merge-patch+json"}
    try:
        async with (
            asyncio.timeout(TIMEOUT),
            session.patch(
                url,
                data=json.dumps({"spec": spec}),
                params={"dryRun": "All"},
                headers=headers,
                ssl=target.tls,
            ) as resp,
        ):
            return judge(resp.status, await resp.text())
    except (aiohttp.ClientError, TimeoutError, OSError) as e:
        return judge(599, f"no answer: {type(e).__name__}: {e}")


async def get(session: aiohttp.ClientSession, target: Target, case: Case) -> dict[str, Any]:
    url = f"{target.server}{case.kind.path(target.namespace)}/{case.name}"
    async with asyncio.timeout(TIMEOUT), session.get(url, ssl=target.tls) as resp:
        return dict(await resp.json()) if resp.status == 200 else {}


async def delete(session: aiohttp.ClientSession, target: Target, case: Case) -> None:
    url = f"{target.server}{case.kind.path(target.namespace)}/{case.name}"
    async with asyncio.timeout(TIMEOUT), session.delete(url, ssl=target.tls) as resp:
        await resp.read()


def pick_stored(accepted: Iterable[Case], *, kinds: Mapping[str, int]) -> list[Case]:
    """Up to kinds[kind] accepted namespaced cases of each kind listed, tamed."""
    left = dict(kinds)
    out = []
    for case in accepted:
        if case.kind.namespaced and left.get(case.kind.kind, 0) > 0:
            left[case.kind.kind] -= 1
            out.append(tamed(case))
    return out


async def store_and_watch(
    target: Target,
    cases: list[Case],
    *,
    bound: float,
    updates: Mapping[str, Sequence[Case]] | None = None,
) -> tuple[list[tuple[Case, Answer]], list[Case]]:
    """Create each case for real, wait up to `bound` seconds for every accepted one to
    show a status, send each up to `UPDATES_PER_OBJECT` specs of other cases of its kind
    as dry-run merge patches (admission's UPDATE path, with an old object), then delete
    them all. (Creates and updates that were 5xx or refused naming no field, cases left
    without status.)"""
    bad: list[tuple[Case, Answer]] = []
    created: list[Case] = []
    async with aiohttp.ClientSession() as session:
        for case in cases:
            answer = await post(session, target, case, dry_run=False)
            if answer.outcome is Outcome.ACCEPTED:
                created.append(case)
            else:
                bad.append((case, answer))
        try:
            waiting = await wait_status(session, target, created, bound=bound)
            for case in created:
                for other in (updates or {}).get(case.kind.kind, ())[:UPDATES_PER_OBJECT]:
                    answer = await patch_spec(session, target, case, other.body.get("spec"))
                    if answer.outcome not in (Outcome.ACCEPTED, Outcome.REFUSED):
                        bad.append((other, answer))
        finally:
            for case in created:
                await delete(session, target, case)
    return bad, waiting


async def wait_status(
    session: aiohttp.ClientSession, target: Target, cases: list[Case], *, bound: float
) -> list[Case]:
    """Poll until every case has a status or `bound` passed; the ones still without."""
    waiting = list(cases)
    deadline = time.monotonic() + bound
    while waiting and time.monotonic() < deadline:
        objs = [await get(session, target, case) for case in waiting]
        waiting = [c for c, obj in zip(waiting, objs, strict=True) if not has_status(obj)]
        await asyncio.sleep(1.0)
    return waiting


def describe(case: Case, answer: Answer | None = None) -> str:
    """One finding, with enough to replay it."""
    head = str(case)
    if answer is not None:
        head += f": {answer.status} {answer.message[:300]!r}"
    return f"{head}\n    {json.dumps(case.body)[:600]}"
