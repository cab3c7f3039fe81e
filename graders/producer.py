"""Who wrote an evidence bundle: recorded from the system, and read back only as a claim to show.

``current()`` asks the system about the writing process (uid, its account, the host, the time); nothing a learner
types goes into it. A bundle is the learner's own file, so the producer it carries may be forged: ``note`` sets it
beside the file's owner by the system's word (what nbgrader's collect checks) and says where they differ. It is
shown, never graded; this module must not decide whose submission a file is.
"""

from __future__ import annotations

import os
import pwd
import re
import socket
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

FIELDS = ("uid", "user", "host", "at")
MAX_TEXT = 256
_UTC = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$")


@dataclass(frozen=True)
class Producer:
    """Who wrote a bundle: uid and account name of the writing process, its host, and the UTC time."""

    uid: int
    user: str  # "" when the uid has no account (a container's arbitrary uid)
    host: str
    at: str  # RFC 3339, UTC: 2026-11-26T18:00:00Z

    def to_dict(self) -> dict[str, Any]:
        return {"uid": self.uid, "user": self.user, "host": self.host, "at": self.at}

    def __str__(self) -> str:
        return f"{self.user or 'no account'} (uid {self.uid})"


def current() -> Producer:
    """This process, as the system knows it."""
    uid = os.getuid()
    return Producer(uid, account(uid) or "", socket.gethostname(),
                    datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))


def account(uid: int) -> str | None:
    """The account name of ``uid`` (the password database's word), or None when it has none."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def problems(raw: object) -> list[str]:
    """Every shape problem of a bundle's ``producer`` (None: absent, as in older bundles). Its text is shown to
    an instructor, so it must be printable: no terminal escapes."""
    if raw is None:
        return []
    if not isinstance(raw, dict):
        return ["producer: must be an object with uid, user, host and at"]
    out = [f"producer.{k}: unknown field (allowed: {', '.join(FIELDS)})" for k in sorted(set(raw) - set(FIELDS))]
    uid = raw.get("uid")
    if not isinstance(uid, int) or isinstance(uid, bool) or not 0 <= uid < 2**32:
        out.append("producer.uid: must be a uid (a whole number from 0)")
    for key in ("user", "host"):
        text = raw.get(key)
        if not isinstance(text, str) or len(text) > MAX_TEXT or not text.isprintable():
            out.append(f"producer.{key}: must be printable text of at most {MAX_TEXT} characters")
    at = raw.get("at")
    if not isinstance(at, str) or not _UTC.match(at):
        out.append("producer.at: must be a UTC time such as 2026-11-26T18:00:00Z")
    return out


def from_dict(raw: Any) -> Producer | None:
    """A producer that passed ``problems``, or None for none."""
    return None if raw is None else Producer(raw["uid"], raw["user"], raw["host"], raw["at"])


def note(claimed: Producer | None, owner_uid: int) -> str:
    """The bundle's ``claimed`` producer against ``owner_uid``, the owner of its file by the system's word:
    "" when they agree, else one sentence to show beside the grade."""
    name = account(owner_uid)
    owner = f"{name or 'no account'} (uid {owner_uid})"
    if claimed is None:
        return f"the evidence bundle does not say who produced it; the file belongs to {owner}"
    if claimed.uid != owner_uid:
        return f"the evidence bundle says it was produced by {claimed}, but the file belongs to {owner}"
    if claimed.user != (name or ""):
        return f"the evidence bundle says it was produced by {claimed}, but uid {owner_uid} is {name or 'no account'}"
    return ""
