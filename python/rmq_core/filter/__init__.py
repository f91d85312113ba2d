"""Message filtering as RocketMQ's consumers express it: tag expressions and SQL92 selectors."""

from rmq_core.filter.message_selector import ExpressionType, MessageSelector
from rmq_core.filter.sql92 import FilterParseError, Sql92Filter, compile_sql92
from rmq_core.filter.subscription_data import SubscriptionData, build_subscription_data

__all__ = [
    "ExpressionType",
    "FilterParseError",
    "MessageSelector",
    "Sql92Filter",
    "SubscriptionData",
    "build_subscription_data",
    "compile_sql92",
]
