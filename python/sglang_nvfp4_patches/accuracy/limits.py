"""Bounds on what the accuracy tool accepts, checked up front and named in messages (pure)."""

from __future__ import annotations

import ipaddress
import re
import urllib.parse

# The longest a time option may be: a week. Larger values (inf) overflow the event loop's timers.
MAX_SECONDS = 7 * 24 * 3600.0
# The largest run file, partial file, sgl-eval repeat or metrics.json (real ones: a few to tens
# of MB), and the largest MMLU csv (MMLU's largest is about 2 MB).
MAX_FILE_BYTES = 512 * 2**20
MAX_CSV_BYTES = 64 * 2**20
# The most characters of one answer a run file keeps (an MMLU answer is a letter and a few
# words); a longer one is cut, marked ``output_cut``, after its prediction is read.
MAX_OUTPUT_CHARS = 4096
# This many failed questions in a row means the server is down or rejects every request.
ABORT_AFTER_CONSECUTIVE_FAILURES = 50


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a server's base URL, or None: checked before any request."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # raises for a port out of range or not a number
    except ValueError as exc:
        return f"is not a valid URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return "must start with http:// or https://"
    if not _valid_host(parts.hostname or "") or any(c.isspace() for c in url):
        return "has no valid host name"
    if port == 0:
        return "has port 0; give the port the server listens on (1-65535)"
    if parts.query or parts.fragment:
        return "must not have a query (?...) or fragment (#...): the API path is appended to it"
    return None


_HOST_NAME = re.compile(r"[A-Za-z0-9_-]{1,63}(\.[A-Za-z0-9_-]{1,63})*\.?")


def _valid_host(host: str) -> bool:
    """An IP address, or a host name of letters, digits, ``-`` and ``_`` labels (IDNA form)."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    try:
        ascii_name = host.encode("idna").decode("ascii")
    except UnicodeError:
        return False
    return len(ascii_name) <= 253 and _HOST_NAME.fullmatch(ascii_name) is not None
