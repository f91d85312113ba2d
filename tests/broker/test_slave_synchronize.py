"""SlaveSynchronize's offset rounds (4.9 ``SlaveSynchronize.syncConsumerOffset`` / ``syncDelayOffset``) on the real
managers and their files, the master's answers given as text: consumer offsets the master has are merged over the
slave's own, delay offsets replaced; an answer that does not decode raises and leaves the slave's table and file
as they were."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from rmq_core.broker import BrokerConfig
from rmq_core.broker.consumer_offset_manager import ConsumerOffsetManager
from rmq_core.broker.ha.slave_synchronize import SlaveSynchronize
from rmq_core.broker.schedule.schedule_message_service import ScheduleMessageService
from rmq_core.remoting.codes import RequestCode

MASTER = "127.0.0.1:10911"


class _MasterTexts:
    """The master's config texts by request code (what ``BrokerOuterAPI.get_master_config_text`` returns)."""

    def __init__(self, texts: dict[int, str]) -> None:
        self.texts = texts

    async def get_master_config_text(self, addr: str, code: int) -> str:
        assert addr == MASTER
        return self.texts[code]


def _sync(
    tmp_path: Path, texts: dict[int, str]
) -> tuple[SlaveSynchronize, ConsumerOffsetManager, ScheduleMessageService]:
    cfg = BrokerConfig(store_path_root_dir=str(tmp_path))
    offsets = ConsumerOffsetManager(cfg.store_config_dir)
    offsets.commit_offset("slave", "own_cg", "T", 0, 5)
    offsets.commit_offset("slave", "both_cg", "T", 0, 1)
    delays = ScheduleMessageService(cfg)
    delays.offset_table = {1: 10, 2: 20}
    sync = SlaveSynchronize(_MasterTexts(texts), None, offsets, delays, None, lambda: MASTER)  # type: ignore[arg-type]
    return sync, offsets, delays


def test_offsets_from_the_master_merge_and_delay_offsets_replace(tmp_path: Path) -> None:
    master_offsets = json.dumps({"offsetTable": {"T@both_cg": {"0": 9}, "T@master_cg": {"1": 3}}})
    master_delays = json.dumps({"offsetTable": {"3": 30}})
    sync, offsets, delays = _sync(
        tmp_path, {RequestCode.GET_ALL_CONSUMER_OFFSET: master_offsets, RequestCode.GET_ALL_DELAY_OFFSET: master_delays}
    )
    asyncio.run(sync.sync_consumer_offset(MASTER))
    asyncio.run(sync.sync_delay_offset(MASTER))
    assert offsets.offset_table == {"T@own_cg": {0: 5}, "T@both_cg": {0: 9}, "T@master_cg": {1: 3}}
    assert delays.offset_table == {3: 30}
    reread = ConsumerOffsetManager(str(Path(offsets.config_file_path).parent))  # what the slave persisted
    reread.decode(Path(offsets.config_file_path).read_text())
    assert reread.offset_table == offsets.offset_table


@pytest.mark.parametrize("text", ["not json", "[1]", json.dumps({"offsetTable": {"T@x": 7}})])
def test_an_answer_that_does_not_decode_leaves_the_slaves_tables(tmp_path: Path, text: str) -> None:
    bad_delays = json.dumps({"offsetTable": {"x": "y"}}) if text.startswith("{") else text
    sync, offsets, delays = _sync(
        tmp_path, {RequestCode.GET_ALL_CONSUMER_OFFSET: text, RequestCode.GET_ALL_DELAY_OFFSET: bad_delays}
    )
    before_offsets, before_delays = json.loads(json.dumps(offsets.offset_table)), dict(delays.offset_table)
    with pytest.raises(Exception):  # noqa: B017  (each table's own decode error)
        asyncio.run(sync.sync_consumer_offset(MASTER))
    with pytest.raises(Exception):  # noqa: B017
        asyncio.run(sync.sync_delay_offset(MASTER))
    assert json.loads(json.dumps(offsets.offset_table)) == before_offsets
    assert delays.offset_table == before_delays
    assert not Path(offsets.config_file_path).exists() and not Path(delays.config_file_path).exists()
