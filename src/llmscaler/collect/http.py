"""HTTP plumbing shared by the two metric sources (Prometheus queries, pod scraping).

Why: both sources build the same client TLS context, own an httpx client unless the caller lends
one, read a rotating bearer-token file every cycle, and sort failures into the same
`ErrorReason`s. One copy keeps their behaviour and their messages from drifting apart.

What it provides:
- `client_ssl_context`: `ca_file` alone is trusted when given, else the system store;
  `insecure_skip_verify` turns off hostname and certificate checks; a client certificate is loaded
  when `client_cert_file` is given (the key from `client_key_file`, else from the certificate
  file). Unreadable files raise (`OSError`, `ssl.SSLError`): a configuration error, raised at
  construction.
- `OwnedClient`: the caller's client, or one made here and closed by `aclose`; a lent client is
  never closed, it belongs to its owner.
- `read_token`: the bearer token, from `token_file` (re-read on every call so rotated tokens work;
  surrounding whitespace stripped) else `bearer_token`. Never raises: an unreadable, non-UTF-8 or
  empty file gives no token and a message saying nothing was sent, so that a cycle never sends an
  unauthenticated request in its place. An empty `bearer_token` counts as none.
- `status_failure`: 400-499 → HTTP_4XX, 500-599 → HTTP_5XX, any other non-2xx → BAD_RESPONSE,
  2xx → None.
- `transport_failure`: a timeout (httpx's or asyncio's) → TIMEOUT, any other transport error
  (`TRANSPORT_ERRORS`: refused, DNS, TLS, a dropped connection, a bad URL) → UNREACHABLE.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from llmscaler.collect.types import ErrorReason

TRANSPORT_ERRORS: tuple[type[Exception], ...] = (
    TimeoutError,
    httpx.HTTPError,
    httpx.InvalidURL,
    OSError,
)
"""What a request can raise short of an answer; `transport_failure` classifies them."""


def client_ssl_context(
    *,
    ca_file: Path | None,
    insecure_skip_verify: bool = False,
    client_cert_file: Path | None = None,
    client_key_file: Path | None = None,
) -> ssl.SSLContext:
    """The client TLS context (see the module docstring)."""
    context = ssl.create_default_context(cafile=str(ca_file) if ca_file is not None else None)
    if insecure_skip_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if client_cert_file is not None:
        key = str(client_key_file) if client_key_file is not None else None
        context.load_cert_chain(certfile=str(client_cert_file), keyfile=key)
    return context


class OwnedClient:
    """An httpx client: the caller's, or one built from `verify` and closed by `aclose`."""

    def __init__(
        self,
        *,
        client: httpx.AsyncClient | None,
        verify: Callable[[], ssl.SSLContext],
        timeout: float,
    ) -> None:
        self._owned = client is None
        # `verify` is only called when a client is built: a lent client keeps its own TLS.
        self.client = (
            client if client is not None else httpx.AsyncClient(verify=verify(), timeout=timeout)
        )

    async def aclose(self) -> None:
        """Close the client if it was built here."""
        if self._owned:
            await self.client.aclose()


@dataclass(frozen=True, slots=True)
class Token:
    """A bearer token (None: send none), or why nothing may be sent (`error`)."""

    value: str | None = None
    error: str | None = None


def read_token(*, token_file: Path | None, bearer_token: str | None) -> Token:
    """The bearer token for this cycle (see the module docstring)."""
    if token_file is None:
        return Token(value=bearer_token or None)
    try:
        token = token_file.read_text(encoding='utf-8').strip()
    except (OSError, UnicodeDecodeError) as exc:
        return Token(error=f'bearer token file unreadable, nothing sent: {exc}')
    if not token:
        return Token(error=f'bearer token file {token_file} is empty, nothing sent')
    return Token(value=token)


def status_failure(*, status: int) -> tuple[ErrorReason, str] | None:
    """The reason and message for a status that is not 2xx; None for 2xx."""
    if 400 <= status <= 599:
        reason = ErrorReason.HTTP_4XX if status < 500 else ErrorReason.HTTP_5XX
        return reason, f'HTTP {status}'
    if not 200 <= status <= 299:
        return ErrorReason.BAD_RESPONSE, f'unexpected HTTP {status}'
    return None


def transport_failure(
    *, exc: Exception, timeout: float, awaited: str, where: str = ''
) -> tuple[ErrorReason, str]:
    """Classify one of `TRANSPORT_ERRORS`; `awaited` names what did not come in time.

    `where` (a URL, say) prefixes the message of an unreachable target.
    """
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return ErrorReason.TIMEOUT, f'no {awaited} within {timeout}s: {exc!r}'
    return ErrorReason.UNREACHABLE, f'{where}: {exc!r}' if where else repr(exc)
