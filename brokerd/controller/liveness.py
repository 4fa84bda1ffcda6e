"""Noticing that a broker process died, without waiting for its ZooKeeper session.

A crashed process's kernel closes its sockets at once: a connection open to it ends
(EOF or reset) and new connections to its port are refused. So each watched broker gets
one idle TCP connection on which nothing is ever sent. When it ends, the broker is
connected to again at once. Refused on every address of its host means no process
listens on the registered port any more, which a registered broker only does once it is
dead: it binds its listener before it registers and deregisters before closing it. The
broker is then reported, once, and no longer watched. An accepted connection becomes the
next one watched (the broker closed an idle connection, or is on its way down and
resets it a moment later).

What is never reported: a paused process (SIGSTOP, a long GC pause, a frozen VM), whose
kernel still accepts connections and keeps the old ones open, and a machine that lost
power or its network, where nothing is refused (connecting times out). Both are left to
the ZooKeeper session timeout, as before: reporting a live broker as dead would fail
over partitions that still have a working leader.

One BrokerLiveness is owned by the controller's event loop; `on_dead` is called on it.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass

logger = logging.getLogger("brokerd.controller.liveness")

CONNECT_TIMEOUT_S = 5.0
# A watched connection that ends sooner than this after opening is reopened only after a
# pause, doubling from MIN_RECONNECT_S up to MAX_RECONNECT_S: a broker that keeps closing
# connections at once (over max.connections, say) is not connected to in a busy loop.
STEADY_CONNECTION_S = 1.0
MIN_RECONNECT_S = 0.02
MAX_RECONNECT_S = 1.0


@dataclass(frozen=True)
class WatchedBroker:
    broker_id: int
    host: str
    port: int
    # The broker epoch (czxid) of the registration watched, handed back with the report:
    # what is dead is that incarnation, not a later one with the same id.
    epoch: int


class BrokerLiveness:
    def __init__(self, on_dead: Callable[[WatchedBroker], None]) -> None:
        self.on_dead = on_dead
        self._watchers: dict[WatchedBroker, asyncio.Task[None]] = {}

    def watch(self, brokers: Iterable[WatchedBroker]) -> None:
        """Watch exactly these brokers from now on; one already reported stays reported."""
        wanted = set(brokers)
        for broker in set(self._watchers) - wanted:
            self._watchers.pop(broker).cancel()
        for broker in wanted - set(self._watchers):
            self._watchers[broker] = asyncio.create_task(self._watch(broker))

    async def close(self) -> None:
        watchers, self._watchers = self._watchers, {}
        for task in watchers.values():
            task.cancel()
        if watchers:
            await asyncio.wait(watchers.values())

    async def _watch(self, broker: WatchedBroker) -> None:
        loop = asyncio.get_running_loop()
        pause_s = MIN_RECONNECT_S
        while True:
            opened_at = loop.time()
            try:
                sock = await connect(broker.host, broker.port)
            except ConnectionRefusedError:
                logger.info(
                    "broker %d refuses connections at %s:%d: its process is gone",
                    broker.broker_id,
                    broker.host,
                    broker.port,
                )
                self.on_dead(broker)
                return
            except (OSError, TimeoutError) as exc:
                logger.debug("cannot reach broker %d: %r", broker.broker_id, exc)
            else:
                with sock:
                    await until_closed(sock)
            if loop.time() - opened_at >= STEADY_CONNECTION_S:
                pause_s = MIN_RECONNECT_S
                continue
            await asyncio.sleep(pause_s)
            pause_s = min(pause_s * 2, MAX_RECONNECT_S)


async def connect(host: str, port: int) -> socket.socket:
    """A socket connected to the first address of `host` that accepts; raises
    ConnectionRefusedError only if every address refused, anything else if one of them
    could not be told (a timeout, an unreachable network)."""
    loop = asyncio.get_running_loop()
    addresses = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    undecided: BaseException | None = None if addresses else OSError(f"{host} has no address")
    for family, kind, proto, _, address in addresses:
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        try:
            await asyncio.wait_for(loop.sock_connect(sock, address), CONNECT_TIMEOUT_S)
        except ConnectionRefusedError:
            sock.close()
            continue
        except (OSError, TimeoutError) as exc:
            sock.close()
            undecided = exc
            continue
        except BaseException:
            sock.close()
            raise
        return sock
    if undecided is not None:
        raise undecided
    raise ConnectionRefusedError(f"every address of {host}:{port} refused")


async def until_closed(sock: socket.socket) -> None:
    """Return once the peer closes or resets the connection (anything it sends is ignored)."""
    loop = asyncio.get_running_loop()
    try:
        while await loop.sock_recv(sock, 4096):
            pass
    except OSError:
        return
