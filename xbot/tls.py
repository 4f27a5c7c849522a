"""The TLS context every HTTP client of the bot shares, built once per process.

httpx builds a fresh `ssl.SSLContext` for each client it makes, and loading the
CA bundle into one is most of what starting a client costs; the bot makes
several (PTB's two, the X sources', the guarded media client, the uploads').
A context is safe to share between clients and threads, and this one is what
httpx would have built: certifi's bundle, or ``SSL_CERT_FILE`` /
``SSL_CERT_DIR`` for a client that reads the environment (``trust_env``), read
when the first such client is made.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def client_context(*, trust_env: bool) -> ssl.SSLContext:
    """httpx's own default context for a client with this ``trust_env``, made once."""
    return httpx.create_ssl_context(trust_env=trust_env)
