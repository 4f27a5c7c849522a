"""One TLS context for every client: made once, and as strict as httpx's own."""

from __future__ import annotations

import ssl

import pytest

from xbot.tls import client_context


@pytest.mark.parametrize("trust_env", [False, True], ids=["own-bundle", "environment"])
def test_the_context_is_made_once_and_verifies_certificates(trust_env: bool) -> None:
    ctx = client_context(trust_env=trust_env)
    assert client_context(trust_env=trust_env) is ctx
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert ctx.check_hostname
    assert ctx.cert_store_stats()["x509_ca"] > 0
