"""``torchrun`` for one machine whose rendezvous listens on loopback only.

torchrun's agent hosts two TCP stores (the c10d rendezvous and the workers' ``MASTER_PORT``
store). ``TCPStore`` binds them to every interface whatever host it is given (``*:44457`` in
``ss -ltnp``, even with ``--rdzv-endpoint=127.0.0.1:0`` or ``--master-addr=127.0.0.1``), so
anyone on the network could join or poison a single-node run's rendezvous. This wrapper binds
each store's listening socket to 127.0.0.1 itself and hands it to ``TCPStore`` through
``master_listen_fd``; everything else is torchrun's own ``main``, with the same arguments::

    python -m pretrain.train.torchrun_local --standalone --nproc_per_node=2 \
        -m pretrain.train --config run.json

The gloo/NCCL transports of the workers pick their address from the rendezvous (127.0.0.1
here). Multi-node runs need the stores reachable from the other nodes: use plain torchrun
with ``--rdzv-endpoint=<head node>:<port>`` on a private network (README, "Trust model").
"""

from __future__ import annotations

import socket
import sys
from typing import Any

import torch.distributed as dist

LOOPBACK = "127.0.0.1"


def loopback_listener(port: int) -> int:
    """A TCP socket listening on ``127.0.0.1:port`` (0: any free port); returns its fd."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((LOOPBACK, port))
        sock.listen(socket.SOMAXCONN)
    except BaseException:
        sock.close()
        raise
    return sock.detach()  # TCPStore owns the fd from here on


class LoopbackTCPStore(dist.TCPStore):
    """A ``TCPStore`` whose server (``is_master=True``) listens on 127.0.0.1 only."""

    def __init__(
        self,
        host_name: str,
        port: int,
        world_size: int | None = None,
        is_master: bool = False,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        if is_master and kwargs.get("master_listen_fd") is None:
            kwargs["master_listen_fd"] = loopback_listener(int(port))
        super().__init__(host_name, port, world_size, is_master, *args, **kwargs)


def main(argv: list[str] | None = None) -> int:
    """torchrun's ``main`` with every store the agent hosts bound to loopback."""
    # before torchrun's modules import the name; a deliberate monkeypatch of a class name
    dist.TCPStore = LoopbackTCPStore  # type: ignore[misc]
    from torch.distributed.run import main as torchrun_main

    torchrun_main(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
