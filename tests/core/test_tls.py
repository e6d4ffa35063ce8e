"""The model server's TLS setting: no CA bundle loaded for plain http, and nothing trusted."""

from __future__ import annotations

import ssl

from core.context.tls import verify_for


def test_a_plain_http_server_gets_a_context_that_checks_and_trusts_nothing() -> None:
    context = verify_for("http://localhost:1234/v1")
    assert isinstance(context, ssl.SSLContext)
    # A redirect to https would be verified against no CA at all, so it fails, never passes.
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    assert context.get_ca_certs() == []
    assert verify_for("HTTP://127.0.0.1:11434/v1") is context  # one for every client


def test_an_https_server_keeps_the_clients_own_verification() -> None:
    assert verify_for("https://models.example.org/v1") is True
