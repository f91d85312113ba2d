"""Remoting bodies: the JSON documents RocketMQ carries in request and response bodies (fastjson-compatible)."""
