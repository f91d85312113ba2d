"""RocketMQ 4.9's plain ACL on the broker: plain_acl.yml, white addresses, the per-request check."""
