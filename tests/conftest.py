"""Shared fixtures: the ``backend`` fixture (every store test runs once per engine, "rust" and "python"), a
deterministic clock and UNIQ_KEY generator, small mapped-file sizes, and helpers to read the files directly.

A backend that cannot be imported makes its parametrisations error (never a silent skip).
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
_PY_SRC = os.path.join(os.path.dirname(_HERE), "python")
if importlib.util.find_spec("rmq_core") is None:  # not installed: use the source tree (python backend)
    sys.path.insert(0, _PY_SRC)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from support.helpers import BACKENDS, SMALL_INDEX, Backend  # noqa: E402


@pytest.fixture(params=[pytest.param(b, marks=pytest.mark.both_backends, id=b) for b in BACKENDS])
def backend(request: pytest.FixtureRequest, tmp_path) -> Backend:
    b = Backend(request.param, str(tmp_path))
    yield b
    b.close_all()


@pytest.fixture
def root(tmp_path) -> str:
    return str(tmp_path / "store")


@pytest.fixture(autouse=True)
def _small_broker_files(monkeypatch):
    """Brokers started by tests map 1 MiB CommitLog files, 1000-unit ConsumeQueue files and small index files unless a
    test sets sizes: RocketMQ's defaults (1 GiB, 6 MB) are allocated up front, and a suite of brokers would fill a
    shared disk (the 420 MB index file is sparse, but small ones keep tests' directories small)."""
    try:
        from rmq_core.broker.broker_config import BrokerConfig
    except ImportError:  # pragma: no cover - broker not built
        return
    original = BrokerConfig.to_store_config
    defaults = BrokerConfig()

    def small(self):  # type: ignore[no-untyped-def]
        cfg = original(self)
        if self.mapped_file_size_commit_log == defaults.mapped_file_size_commit_log:
            cfg.mapped_file_size_commit_log = 1 << 20
        if self.mapped_file_size_consume_queue == defaults.mapped_file_size_consume_queue:
            cfg.mapped_file_size_consume_queue = 20 * 1000
        if (self.max_hash_slot_num, self.max_index_num) == (defaults.max_hash_slot_num, defaults.max_index_num):
            cfg.max_hash_slot_num, cfg.max_index_num = SMALL_INDEX
        return cfg

    monkeypatch.setattr(BrokerConfig, "to_store_config", small)


@pytest.fixture
def broker(tmp_path):
    """A real broker on 127.0.0.1 (free port), no name server, store under ``tmp_path/store``."""
    from rmq_core.broker import Broker, BrokerConfig

    with Broker(BrokerConfig(listen_port=0, store_path_root_dir=str(tmp_path / "store"))) as b:
        yield b


@pytest.fixture
def client():
    """A blocking remoting client for talking to brokers and name servers over TCP."""
    from rmq_core.remoting.remoting_client import BlockingRemotingClient

    with BlockingRemotingClient() as c:
        yield c
