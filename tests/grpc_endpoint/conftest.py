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
