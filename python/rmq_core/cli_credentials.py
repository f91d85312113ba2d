"""The command line's ACL credentials: ``--access-key`` / ``--secret-key`` on every command that talks to a cluster
(RocketMQ 4.9's ACL: each request is then signed as Java's AclClientRPCHook signs it), defaulting to the
environment variables ``RMQ_ACCESS_KEY`` / ``RMQ_SECRET_KEY`` so a secret need not sit in the shell history.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

ACCESS_KEY_ENV = "RMQ_ACCESS_KEY"
SECRET_KEY_ENV = "RMQ_SECRET_KEY"


def add_credential_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--access-key",
        default=os.environ.get(ACCESS_KEY_ENV),
        help=f"ACL access key: sign every request (RocketMQ 4.9 plain ACL; default ${ACCESS_KEY_ENV})",
    )
    parser.add_argument(
        "--secret-key",
        default=os.environ.get(SECRET_KEY_ENV),
        help=f"ACL secret key, with --access-key (default ${SECRET_KEY_ENV})",
    )


def credentials(args: argparse.Namespace) -> dict[str, Any]:
    """The ``access_key=``/``secret_key=`` keyword arguments of the clients, from the parsed arguments."""
    return {"access_key": getattr(args, "access_key", None), "secret_key": getattr(args, "secret_key", None)}
