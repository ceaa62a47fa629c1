"""Camera and server URLs: redaction of secrets for logs, events and metrics.

Every URL that reaches a log line, a health report, an exception message or
a metric attribute goes through :func:`redact_url` first, so that RTSP and
Redis passwords never leave the process.
"""

from __future__ import annotations

import re
import urllib.parse

__all__ = ["REDACTED", "redact_text", "redact_url"]

REDACTED = "***"

# Query parameters whose values are secrets (compared case-insensitively).
_SECRET_PARAMS = frozenset(
    {
        "password",
        "passwd",
        "pass",
        "pwd",
        "secret",
        "token",
        "access_token",
        "auth",
        "key",
        "api_key",
        "apikey",
    }
)

# scheme://[user[:password]@]host... inside free text (an FFmpeg error message,
# a traceback line). The userinfo part stops at the first '@' before any '/'.
_URL_IN_TEXT = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s]*@)")


def redact_url(url: str) -> str:
    """Return ``url`` with its password (and secret query values) replaced by ``***``.

    The user name stays (it helps to tell cameras apart); the password in the
    userinfo part and the values of query parameters such as ``password`` or
    ``token`` become ``***``. Strings that are not URLs (a file path) come back
    unchanged. Never raises.

    Example:
        >>> redact_url("rtsp://admin:s3cret@10.0.0.7:554/stream1")
        'rtsp://admin:***@10.0.0.7:554/stream1'
        >>> redact_url("redis://:pw@localhost:6379/0")
        'redis://:***@localhost:6379/0'
    """
    scheme, sep, rest = url.partition("://")
    if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme):
        return url
    # As FFmpeg splits it: the authority ends at the first '/', '?' or '#';
    # the userinfo ends at the authority's last '@' (an unencoded '@' or ':'
    # in a password still works).
    end = next((i for i, ch in enumerate(rest) if ch in "/?#"), len(rest))
    authority, tail = rest[:end], rest[end:]
    if "@" in authority:
        userinfo, _, hostport = authority.rpartition("@")
        if ":" in userinfo:
            authority = f"{userinfo.split(':', 1)[0]}:{REDACTED}@{hostport}"
    path, qsep, query = tail.partition("?")
    if qsep:
        query, fsep, fragment = query.partition("#")
        tail = f"{path}?{_redact_query(query)}{fsep}{fragment}"
    return f"{scheme}://{authority}{tail}"


def redact_text(text: str, *secrets: str) -> str:
    """Redact every URL password in free text, and any of ``secrets`` verbatim.

    Used for error messages from FFmpeg or the network, which may quote the
    URL they failed on, and for messages that may quote a known password.
    """
    out = _redact_userinfo_regex(text)
    for secret in secrets:
        if secret:
            out = out.replace(secret, REDACTED)
            quoted = urllib.parse.quote(secret, safe="")
            if quoted != secret:
                out = out.replace(quoted, REDACTED)
    return out


def url_password(url: str) -> str | None:
    """The password in ``url``'s userinfo (percent-decoded), or ``None``."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return None
    return urllib.parse.unquote(parts.password) if parts.password else None


def _redact_userinfo_regex(text: str) -> str:
    def repl(m: re.Match[str]) -> str:
        userinfo = m.group("userinfo")[:-1]
        if ":" not in userinfo:
            return m.group(0)
        user = userinfo.split(":", 1)[0]
        return f"{m.group('scheme')}{user}:{REDACTED}@"

    return _URL_IN_TEXT.sub(repl, text)


def _redact_query(query: str) -> str:
    if not query:
        return query
    out = []
    for item in query.split("&"):
        name, sep, _value = item.partition("=")
        if sep and urllib.parse.unquote_plus(name).lower() in _SECRET_PARAMS:
            out.append(f"{name}={REDACTED}")
        else:
            out.append(item)
    return "&".join(out)
