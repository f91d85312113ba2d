"""Small values and rules shared by the name server, the broker and the clients (RocketMQ's ``common`` module)."""
