"""RocketMQ 5's timer messages: the send-side hook, the timer log, the wheel, the checkpoint, the delivering store."""
