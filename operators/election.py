"""Leader election on a ``coordination.k8s.io/v1`` Lease: only its holder runs the components, a lost Lease stops
them (as controller-runtime does: the pod restarts as a follower), and a graceful stop hands the Lease back so a
follower takes over at its next retry instead of after the lease duration. Followers keep the process's cluster cache
in sync meanwhile (:mod:`operators.runtime`), so the components of a new leader start from it, warm."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio.leaderelection.electionconfig import Config
from kubernetes_asyncio.leaderelection.leaderelection import LeaderElection
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

from operators.kube import API_ERRORS, ApiClientFactory, describe, send_json

logger = logging.getLogger("netaware.run")


@dataclass(frozen=True)
class LeaderElectionOptions:
    """A coordination.k8s.io/v1 Lease; only its holder runs the components."""

    namespace: str = "default"
    name: str = "netaware"
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}")
    lease_duration: int = 15  # whole seconds: the Lease's leaseDurationSeconds
    renew_deadline: float = 10.0
    retry_period: float = 2.0


# What ends one attempt and not the elector: the API's errors, and the library's reading of an error body that is
# not the JSON it expects (its ``assert`` and ``json.loads``)
FAILED_ATTEMPT: tuple[type[BaseException], ...] = (*API_ERRORS, ValueError, KeyError, AssertionError)


class _Elector(LeaderElection):
    """kubernetes-asyncio's elector, riding out every failure of one attempt as it rides out an API error.

    The library catches only ``ApiException`` (and reads its body as JSON): a broken connection, a timeout or an
    error page without a JSON body would end the elector at once. Here any such failure is a failed attempt, so a
    leader keeps retrying until its renew deadline, as client-go's does; each attempt is bounded in time, so a
    renewal that hangs cannot outlast the deadline either."""

    async def try_acquire_or_renew(self) -> bool:
        config = self.election_config
        try:
            async with asyncio.timeout(max(config.retry_period, config.renew_deadline / 2)):
                return bool(await super().try_acquire_or_renew())
        except FAILED_ATTEMPT as error:
            logger.warning("lease %s/%s: attempt failed (%s)", config.lock.namespace, config.lock.name, describe(error))
            return False


async def as_leader(
    api_client_factory: ApiClientFactory,
    election: LeaderElectionOptions,
    stop: asyncio.Event,
    components: Callable[[Callable[[], bool]], Awaitable[None]],
    leads: Callable[[int], None] = lambda _: None,
) -> None:
    """Wait for the Lease and run ``components(still_leader)`` while holding it; losing it sets ``stop``; on
    ``stop`` wait for the components to finish their in-flight work, then release the Lease. ``leads(1)`` when the
    Lease is taken, ``leads(0)`` when it is lost or handed back (the leader gauge)."""
    api = await api_client_factory()
    lock = LeaseLock(election.name, election.namespace, election.identity, api)
    leading = asyncio.Event()  # the components were started (they stop when ``stop`` is set)
    finished = asyncio.Event()  # ... and have stopped, in-flight writes done
    lost = asyncio.Event()

    elector: LeaderElection | None = None

    def still_leader() -> bool:
        """We held the Lease at our last renewal, and that was less than a lease duration ago."""
        if elector is None or lost.is_set() or elector.observed_record is None:
            return False
        age = time.time() - elector.observed_time_milliseconds / 1000
        return elector.observed_record.holder_identity == election.identity and age < election.lease_duration

    async def lead() -> None:
        logger.info("%s acquired the lease %s/%s", election.identity, election.namespace, election.name)
        leading.set()
        leads(1)
        try:
            await components(still_leader)
        finally:
            finished.set()

    async def on_lost() -> None:
        leads(0)
        if not stop.is_set():
            logger.error("%s lost the lease %s/%s: stopping", election.identity, election.namespace, election.name)
            lost.set()
            stop.set()

    config = Config(
        lock,
        lease_duration=election.lease_duration,
        renew_deadline=election.renew_deadline,
        retry_period=election.retry_period,
        onstarted_leading=lead,
        onstopped_leading=on_lost,
    )
    elector = _Elector(config)
    candidate = asyncio.create_task(elector.run())
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait((candidate, stopping), return_when=asyncio.FIRST_COMPLETED)
        if candidate.done() and not candidate.cancelled() and candidate.exception() is not None:
            stop.set()
            raise RuntimeError(f"leader election failed: {candidate.exception()}")
        await stop.wait()
        if leading.is_set() and not lost.is_set():
            await finished.wait()
    finally:
        stopping.cancel()
        candidate.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await candidate
        if leading.is_set() and not lost.is_set():
            await _release(api, election)
        leads(0)
        await api.close()


async def _release(api: Any, election: LeaderElectionOptions) -> None:
    """Hand the lease back (expired, no holder) so a follower takes over at its next retry."""
    past = "1970-01-01T00:00:00.000000Z"
    body = {"spec": {"holderIdentity": "", "renewTime": past, "acquireTime": past, "leaseDurationSeconds": 1}}
    path = f"/apis/coordination.k8s.io/v1/namespaces/{election.namespace}/leases/{election.name}"
    try:
        await send_json(api, "PATCH", path, body, "application/merge-patch+json")
        logger.info("released the lease %s/%s", election.namespace, election.name)
    except API_ERRORS as error:  # the follower takes over when the lease expires anyway
        logger.warning("could not release the lease: %s", describe(error))
