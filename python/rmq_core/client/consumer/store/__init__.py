"""Consumer offset stores: RemoteBrokerOffsetStore (clustering), LocalFileOffsetStore (broadcasting)."""
