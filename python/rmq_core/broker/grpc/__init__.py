"""RocketMQ 5's gRPC endpoint (``apache.rocketmq.v2.MessagingService``) in the broker: docs/GRPC_DESIGN.md.

Optional: needs ``grpcio`` and ``protobuf`` (``pip install rmq_core[grpc]``). Nothing here is imported unless a broker
is started with a gRPC port; ``require_grpc()`` says in one line what is missing.
"""

from __future__ import annotations

import importlib.util

GRPC_EXTRA_HINT = "the gRPC endpoint needs the grpc extra: pip install 'rmq_core[grpc]' (grpcio, protobuf)"


def require_grpc() -> None:
    """Raise ``RuntimeError`` with a one-line hint when grpcio or protobuf is not installed."""
    missing = [m for m in ("grpc", "google.protobuf") if _missing(m)]
    if missing:
        raise RuntimeError(f"{GRPC_EXTRA_HINT}; missing: {', '.join(missing)}")


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ModuleNotFoundError, ValueError):  # a parent package (google) is absent, or the module is blocked
        return True
