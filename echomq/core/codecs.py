"""Payload codecs: compression and encryption of the bytes the server stores.

``App(codec=...)`` takes one codec, a list of them or ``chain(...)``; they run in order
on the way in (serialize, then ``Zlib()``, then ``Fernet(...)``) and in reverse on the
way out. A coded value is an ENVELOPE::

    b"\\x00EMQ1" + header JSON + b"\\n" + coded bytes
    header: {"c": ["zlib", "fernet:<key id>"], "t": "<task name>"}

Decoding reads the header, never the current configuration, so a fleet mid-rollout reads
both (a worker without ``Zlib()`` still reads a zlib payload). The task name stays in
clear (logs, the dashboard and ``echomq job`` name the task of an encrypted job); the
arguments and kept results do not. A key is found by the id the header names: the
codec's own keys, then ``$ECHOMQ_KEYS`` (comma-separated Fernet keys: how the CLI and the
dashboard decode). Without the key, ``Sealed`` (a ``ValueError``): they show "encrypted".

``Fernet(keys=[new, old])``: encrypt with the first key, decrypt with any (rotation:
deploy the new key second everywhere, then first, then drop the old one once nothing
written with it is kept: dead jobs, kept results). No Fernet ``ttl``: jobs may wait days.
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

MAGIC = b"\x00EMQ1"


class Sealed(ValueError):
    """A coded value this process cannot open (no key with the id its header names)."""

    def __init__(self, task: str, why: str) -> None:
        super().__init__(f"encrypted payload of {task or 'a job'}: {why}")
        self.task = task


class Codec(Protocol):
    """One stage: ``seal`` returns the step name recorded in the header and the coded
    bytes; ``opens`` says whether a step name is its; ``open`` undoes ``seal``."""

    def seal(self, data: bytes) -> tuple[str, bytes]: ...

    def opens(self, step: str) -> bool: ...

    def open(self, step: str, data: bytes) -> bytes: ...


class Zlib:
    """Compress with zlib (``level`` 1-9)."""

    def __init__(self, level: int = 6) -> None:
        if not 0 <= level <= 9:
            raise ValueError("zlib level must be 0..9")
        self.level = level

    def seal(self, data: bytes) -> tuple[str, bytes]:
        return "zlib", zlib.compress(data, self.level)

    def opens(self, step: str) -> bool:
        return step == "zlib"

    def open(self, step: str, data: bytes) -> bytes:
        return zlib.decompress(data)


def key_id(key: bytes | str) -> str:
    """The short id naming a key in the header (not the key: a hash prefix)."""
    raw = key.encode() if isinstance(key, str) else key
    return hashlib.sha256(raw).hexdigest()[:12]


class Fernet:
    """AES encryption with an HMAC (``cryptography``'s Fernet; ``pip install
    echomq[crypto]``). ``keys``: Fernet keys (``Fernet.generate_key()``), the first
    encrypts, any decrypts."""

    def __init__(self, keys: Sequence[bytes | str]) -> None:
        if isinstance(keys, (bytes, str)) or not keys:
            raise ValueError("Fernet(keys=[new, old, ...]): a non-empty list of keys")
        try:
            from cryptography.fernet import Fernet as _Fernet
        except ImportError as exc:  # pragma: no cover - the crypto extra is missing
            raise ImportError("echomq.codecs.Fernet needs the cryptography package: "
                              "pip install 'echomq[crypto]'") from exc
        self._keys = {key_id(k): _Fernet(k) for k in keys}
        self._first = key_id(keys[0])

    @staticmethod
    def generate_key() -> bytes:
        """A new random key."""
        from cryptography.fernet import Fernet as _Fernet

        return _Fernet.generate_key()

    def seal(self, data: bytes) -> tuple[str, bytes]:
        return f"fernet:{self._first}", self._keys[self._first].encrypt(data)

    def opens(self, step: str) -> bool:
        return step.startswith("fernet:") and step[7:] in self._keys

    def open(self, step: str, data: bytes) -> bytes:
        from cryptography.fernet import InvalidToken

        try:
            return self._keys[step[7:]].decrypt(data)
        except InvalidToken as exc:
            raise ValueError(f"{step}: the token does not verify (tampered)") from exc


class Chain:
    """Codecs applied in order (``chain(Zlib(), Fernet(keys))``)."""

    def __init__(self, codecs: Iterable[Codec]) -> None:
        self.codecs: tuple[Codec, ...] = tuple(codecs)

    def seal(self, task: str, data: bytes) -> bytes:
        steps = []
        for codec in self.codecs:
            step, data = codec.seal(data)
            steps.append(step)
        header = json.dumps({"c": steps, "t": task}, separators=(",", ":")).encode()
        return MAGIC + header + b"\n" + data


def chain(*codecs: Codec | Sequence[Codec]) -> Chain:
    """One ``Chain`` of these codecs (lists flattened), in the order they run."""
    flat: list[Codec] = []
    for c in codecs:
        if isinstance(c, Chain):
            flat.extend(c.codecs)
        elif isinstance(c, (list, tuple)):
            flat.extend(chain(*c).codecs)
        else:
            flat.append(c)  # type: ignore[arg-type]
    return Chain(flat)


def of(codec: Any) -> Chain | None:
    """``App(codec=...)``'s value, checked: ``None``, one codec, a list or a ``Chain``."""
    if codec is None:
        return None
    made = chain(codec)
    for c in made.codecs:
        if not all(callable(getattr(c, m, None)) for m in ("seal", "opens", "open")):
            raise TypeError(f"not a codec: {c!r} (seal/opens/open)")
    return made if made.codecs else None


_ENV: tuple[str, Fernet | None] = ("", None)


def _env_keys() -> Fernet | None:
    global _ENV
    raw = os.environ.get("ECHOMQ_KEYS", "")
    if raw != _ENV[0]:
        keys = [k.strip() for k in raw.split(",") if k.strip()]
        _ENV = (raw, Fernet(keys) if keys else None)
    return _ENV[1]


def sealed(data: bytes | str) -> bool:
    """Whether ``data`` is an envelope (coded by some codec)."""
    return isinstance(data, (bytes, bytearray)) and data.startswith(MAGIC)


def header(data: bytes) -> tuple[list[str], str, bytes]:
    """An envelope's steps, task name and coded bytes (``ValueError`` if malformed)."""
    head, sep, body = data[len(MAGIC):].partition(b"\n")
    if not sep:
        raise ValueError("a malformed EchoMQ envelope (no header)")
    meta = json.loads(head)
    return [str(s) for s in meta.get("c", [])], str(meta.get("t", "")), body


def unseal(data: bytes, codec: Chain | None = None) -> bytes:
    """The bytes inside an envelope, opened by the steps its header names (keys from
    ``codec``, then ``$ECHOMQ_KEYS``); ``Sealed`` when a key is missing."""
    steps, task, body = header(data)
    known: list[Codec] = [Zlib()]
    if codec is not None:
        known[:0] = codec.codecs
    env = _env_keys()
    if env is not None:
        known.append(env)
    for step in reversed(steps):
        opener = next((c for c in known if c.opens(step)), None)
        if opener is None:
            raise Sealed(task, f"no key for {step} (give it in ECHOMQ_KEYS)")
        body = opener.open(step, body)
    return body


def shown(data: bytes) -> tuple[str, bytes | None]:
    """For a reader (the CLI, the dashboard): an envelope's task name and its opened bytes
    (keys from ``$ECHOMQ_KEYS``), or ``None`` when this process has no key for it."""
    _, task, _ = header(data)
    try:
        return task, unseal(data)
    except Sealed:
        return task, None
