"""RocketMQ 4.9's request signature (rocketmq-acl ``AclClientRPCHook``, ``AclUtils.combineRequestContent``,
``AclSigner``): what a client with credentials adds to every request, and what a broker with ACL checks.

Format: the ext fields ``AccessKey`` (and ``SecurityToken`` when there is one) are added, then ``Signature`` =
base64(HmacSHA1(secret_key, content)), where content = the values of every other ext field, in the order of their
names sorted (Java's TreeMap over String keys), concatenated, UTF-8, followed by the body's bytes. The broker
leaves ``Signature`` and ``_UNIQUE_KEY_QUERY`` out of the content (PlainAccessValidator.parse); the client here does
the same, so its QUERY_MESSAGE by unique key verifies on Apache's broker and on rmq_core's.

Invariants: signing is deterministic (same fields and body, same signature); ``sign`` changes only the three
fields above. Thread-safety: ``SessionCredentials`` is immutable; ``sign`` touches only the request it is given.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass

from rmq_core.remoting.command import RemotingCommand

ACCESS_KEY = "AccessKey"  # SessionCredentials.ACCESS_KEY
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"  # MixAll.UNIQUE_MSG_QUERY_FLAG: left out of the content by the broker


def combine_request_content(ext_fields: dict[str, str], body: bytes | None) -> bytes:
    """AclUtils.combineRequestContent over the fields PlainAccessValidator.parse keeps: the sorted values + body."""
    content = "".join(v for k, v in sorted(ext_fields.items()) if k != SIGNATURE and k != UNIQUE_MSG_QUERY_FLAG).encode(
        "utf-8"
    )
    return content + body if body else content


def cal_signature(data: bytes, secret_key: str) -> str:
    """AclSigner.calSignature: base64 of HmacSHA1 over ``data`` keyed by the secret key's UTF-8 bytes."""
    digest = hmac.new(secret_key.encode("utf-8"), data, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def request_signature(ext_fields: dict[str, str], body: bytes | None, secret_key: str) -> str:
    """``cal_signature(combine_request_content(ext_fields, body), secret_key)`` without copying the body."""
    mac = hmac.new(secret_key.encode("utf-8"), combine_request_content(ext_fields, None), hashlib.sha1)
    if body:
        mac.update(body)
    return base64.b64encode(mac.digest()).decode("ascii")


@dataclass(frozen=True)
class SessionCredentials:
    """A client's credentials (4.9 ``SessionCredentials``); ``security_token`` is optional, as in Java."""

    access_key: str
    secret_key: str
    security_token: str | None = None

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ValueError("ACL credentials need both access_key and secret_key")

    def __repr__(self) -> str:  # never print the secret
        return f"SessionCredentials(access_key={self.access_key!r}, secret_key=***)"

    def sign(self, request: RemotingCommand) -> RemotingCommand:
        """AclClientRPCHook.doBeforeRequest: ``request`` with AccessKey (SecurityToken) and its Signature added."""
        self.sign_fields(request.ext_fields, request.body)
        return request

    def sign_fields(self, ext: dict[str, str], body: bytes | None) -> dict[str, str]:
        """``ext`` (a request's ext fields, as text) with AccessKey (SecurityToken) and the Signature over them and
        ``body`` added; returned for convenience."""
        ext[ACCESS_KEY] = self.access_key
        if self.security_token is not None:
            ext[SECURITY_TOKEN] = self.security_token
        ext.pop(SIGNATURE, None)
        ext[SIGNATURE] = request_signature(ext, body, self.secret_key)
        return ext


def credentials_from(access_key: str | None, secret_key: str | None) -> SessionCredentials | None:
    """The credentials of a client's ``access_key=``/``secret_key=`` settings: None when neither is given (the
    client does not sign); a ValueError when only one is."""
    if not access_key and not secret_key:
        return None
    if not access_key or not secret_key:
        raise ValueError("access_key and secret_key must be given together")
    return SessionCredentials(access_key, secret_key)
