"""Transactional messages on the broker (4.9 ``org.apache.rocketmq.broker.transaction``): the half/op queue bridge,
the check-back service and its listener. END_TRANSACTION itself is ``broker/processor/end_transaction_processor.py``."""
