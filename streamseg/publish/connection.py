"""What every connection to a server a sink writes to has: url, credentials, TLS, delivery.

``redis:`` (and ``sinks:`` entries of type ``redis``) and ``sinks:`` entries
of type ``mqtt`` share these fields and their checks; each says what its
url looks like with a :class:`UrlForm`. The delivery fields (outage
buffer, batch size, reconnect backoff, socket timeout) reach the sink as
one object (``streamseg.publish.delivery.DeliveryOptions.of(section)``).
"""

from __future__ import annotations

import dataclasses
import urllib.parse
from typing import ClassVar

from pydantic import Field, SecretStr, field_validator

from streamseg.configbase.base import StrictModel

__all__ = ["ServerConnection", "TLSConfig", "UrlForm"]


class TLSConfig(StrictModel):
    """TLS to the server (``rediss://`` and ``mqtts://`` URLs turn it on too). Paths are
    PEM files."""

    enabled: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify: bool = Field(default=True, description="check the server certificate and host name")


@dataclasses.dataclass(frozen=True)
class UrlForm:
    """What the url of one kind of server looks like, and the errors that say so.

    Attributes:
        name: ``redis``, ``mqtt`` (in messages: ``redis url must ...``).
        schemes: the schemes taken, the TLS one among them.
        tls_scheme: the scheme that turns TLS on.
        example: a url shown in the messages.
        hostless: schemes without a host (``unix``).
        database: the path is a database number (Redis).
        credentials: credentials may be written in the url; else they are
            refused (they belong in ``username``/``password``).
    """

    name: str
    schemes: tuple[str, ...]
    tls_scheme: str
    example: str
    hostless: tuple[str, ...] = ()
    database: bool = False
    credentials: bool = True

    def check(self, value: str) -> str:
        """``value`` when it is a url of this form; ``ValueError`` naming the problem."""
        try:
            parts = urllib.parse.urlsplit(value)
            parts.port  # noqa: B018 - raises on a bad port
        except ValueError as exc:
            raise ValueError(f"malformed {self.name} url ({exc})") from None
        if parts.scheme not in self.schemes:
            raise ValueError(
                f"{self.name} url must start with {self._schemes_text()} (e.g. {self.example})"
            )
        if parts.scheme not in self.hostless and not parts.hostname:
            raise ValueError(f"{self.name} url has no host (e.g. {self.example})")
        db = parts.path.lstrip("/")
        if self.database and parts.scheme not in self.hostless and db and not db.isdigit():
            raise ValueError(f"{self.name} url database must be a number, got {db!r}")
        if not self.credentials and (parts.username or parts.password):
            raise ValueError(
                f"put {self.name.upper()} credentials in username/password (${{ENV}}), "
                "not in the url"
            )
        return value

    def _schemes_text(self) -> str:
        names = [f"{s}://" + (" (TLS)" if s == self.tls_scheme else "") for s in self.schemes]
        return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


class ServerConnection(StrictModel):
    """The fields every server connection has (a subclass sets ``url_form`` and ``url``'s
    default).

    ``username``/``password`` are usually ``${..._USERNAME}``/``${..._PASSWORD}``
    (an empty value is unset). Delivery: ``buffer_max_messages`` kept while
    the server is away (the oldest dropped beyond), ``max_batch`` messages
    per write, reconnect backoff from ``reconnect_initial`` doubling to
    ``reconnect_max`` seconds, ``socket_timeout`` seconds per answer.
    """

    url_form: ClassVar[UrlForm]

    url: str
    username: str | None = None
    password: SecretStr | None = None
    tls: TLSConfig = TLSConfig()
    buffer_max_messages: int = Field(
        default=10_000, ge=1, description="messages kept while the server is away"
    )
    max_batch: int = Field(default=256, ge=1, description="messages per write")
    reconnect_initial: float = Field(default=0.2, gt=0, le=60)
    reconnect_max: float = Field(default=10.0, gt=0, le=600)
    socket_timeout: float = Field(default=5.0, gt=0, le=600, description="seconds per answer")

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        return cls.url_form.check(value)

    @field_validator("username", "password", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @property
    def use_tls(self) -> bool:
        return self.tls.enabled or self.url.startswith(f"{self.url_form.tls_scheme}://")

    def secrets(self) -> list[str]:
        """The strings a sink scrubs from the errors it logs (the password)."""
        return [self.password.get_secret_value()] if self.password is not None else []
