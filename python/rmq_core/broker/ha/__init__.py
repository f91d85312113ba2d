"""Master/slave replication (4.9's ``store/ha``): ``HAService`` (master), ``HAConnection`` (one slave),
``GroupTransferService`` (SYNC_MASTER waits), ``HAClient`` (slave), ``SlaveSynchronize`` (a slave's config copy)."""
