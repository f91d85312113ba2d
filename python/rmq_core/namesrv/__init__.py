"""The name server: route tables (RouteInfoManager), its request processor and ``NameServer`` (docs/BROKER_DESIGN.md)."""

from rmq_core.namesrv.name_server import NameServer
from rmq_core.namesrv.route_info_manager import RouteInfoManager

__all__ = ["NameServer", "RouteInfoManager"]
