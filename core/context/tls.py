"""The TLS setting of the clients that talk to the model server.

Every httpx client builds its own TLS context when it is made, and a default one loads the
whole CA bundle: 50-100 ms of CPU apiece, timed alone on this project's machine. fsagent makes
three (the model discovery's, and the chat model's sync and async clients): 0.15 s of CPU of
every start (measured over whole launches), for LM Studio on plain http://localhost, where no
TLS is ever spoken.

A plain-http server gets one context that trusts no certificate and still checks them: it
costs nothing to make, and if the server ever redirected to https the connection would fail
rather than go unchecked. An https server keeps each client's own default (its CA bundle,
SSL_CERT_FILE and the rest), untouched.
"""

from __future__ import annotations

import functools
import ssl
from urllib.parse import urlsplit


def _is_plain_http(base_url: str) -> bool:
    return urlsplit(base_url).scheme.lower() == "http"


@functools.cache
def _trusting_no_one() -> ssl.SSLContext:
    # PROTOCOL_TLS_CLIENT verifies certificates and host names by default; with no CA loaded,
    # every certificate fails.
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def verify_for(base_url: str) -> ssl.SSLContext | bool:
    """What an httpx client for `base_url` takes as `verify=`: True is its own default."""
    return _trusting_no_one() if _is_plain_http(base_url) else True
