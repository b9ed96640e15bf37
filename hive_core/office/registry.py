"""registry.json: the agents' states as others read them, published when they change."""

from __future__ import annotations

import asyncio
import contextlib

from hive_core.committer import Committer
from hive_core.desks.state import AgentStates
from hive_core.hive import read_registry, write_registry
from hive_core.paths import HivePaths
from hive_core.schema import OfficeConfig, Registry

# Hooks fire in bursts; registry.json is rewritten at most this often.
REGISTRY_INTERVAL_S = 0.25


class RegistryPublisher:
    def __init__(
        self, paths: HivePaths, config: OfficeConfig, states: AgentStates, committer: Committer
    ) -> None:
        self.paths = paths
        self.config = config
        self.states = states
        self.committer = committer
        # Set when an agent's state changed (AgentStates' listener); run() publishes.
        self.dirty = asyncio.Event()

    def snapshot(self) -> Registry:
        """On the loop: the agents' states are the loop's."""
        return Registry(
            office=self.config.office.name,
            manager=self.config.office.manager,
            agents=[state.entry() for state in self.states.values()],
        )

    def write(self) -> None:
        self.publish(self.snapshot())

    def publish(self, registry: Registry) -> None:
        """On any thread (one at a time): an atomic write that ends in an fsync."""
        if registry != read_registry(self.paths):
            write_registry(self.paths, registry)
            self.committer.touch(self.paths.registry)

    async def run(self, stop: asyncio.Event) -> None:
        """Publish agent state at most every REGISTRY_INTERVAL_S (hooks fire in bursts)."""
        while not stop.is_set():
            await self.dirty.wait()
            self.dirty.clear()
            await asyncio.to_thread(self.publish, self.snapshot())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), REGISTRY_INTERVAL_S)
