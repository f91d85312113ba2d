"""The gRPC suite's shared fixture: a name server and a broker with its gRPC port (``support.grpc5_helpers``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.grpc5_helpers import grpc_cluster as _start_grpc_cluster


@pytest.fixture(name="grpc_cluster")
def _grpc_cluster(tmp_path: Path) -> Iterator[Any]:
    with _start_grpc_cluster(tmp_path) as c:
        yield c


@pytest.fixture(scope="module", params=["native", "grpc.aio"])
def grpc_transport(request: pytest.FixtureRequest) -> Iterator[str]:
    """The transport a module's brokers serve gRPC on: the extension's front (the default) or grpc.aio, its twin
    (``RMQ_CORE_BACKEND=python``, or an extension without the front)."""
    from rmq_core.broker.grpc import grpc_server

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(grpc_server, "NATIVE_FRONT", request.param == "native")
        yield request.param
