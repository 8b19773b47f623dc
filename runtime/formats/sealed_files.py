"""Sealed files: hidden reference data kept on the organizers' own Codabench workers.

A Codabench worker mounts its host folder read-only at ``/app/data`` in *every* container it
starts, a submission's own one included (codabench_v2.md §3.4), so a file kept there in the
clear could be read by participant code. The build therefore seals each reference file with a
key that only the scoring program carries (the scoring program is mounted in the scoring step
alone, and participants cannot download it while ``make_programs_available`` stays false):
what the worker holds is unreadable without it, and a file changed or swapped on the worker is
refused instead of scored against.

Construction (standard library only, as both programs must run on the image):

    tag        = HMAC-SHA256(key, DOMAIN || name || 0x00 || plaintext)
    keystream  = SHAKE-256(DOMAIN || key || tag || i) for each 1 MiB block i (8 bytes, big-endian)
    sealed     = MAGIC || tag || (plaintext XOR keystream)

The tag is both the per-file nonce (a different file or content gives a different keystream;
sealing is deterministic, so rebuilds stay byte-identical) and the authenticator checked after
opening: a wrong key, a changed byte or a file moved to another name fails it.
"""
from __future__ import annotations

import hashlib
import hmac

MAGIC = b"CBSEAL1\n"
DOMAIN = b"codalab-bundle sealed reference v1\0"
TAG_BYTES = 32
BLOCK_BYTES = 2**20
SEALED_SUFFIX = ".sealed"


class SealError(ValueError):
    """A sealed file that cannot be opened with the key: changed, swapped or of another build."""


def _tag(key: bytes, name: str, data: bytes) -> bytes:
    return hmac.new(key, DOMAIN + name.encode("utf-8") + b"\0" + data, hashlib.sha256).digest()


def _xor_keystream(key: bytes, tag: bytes, data: bytes) -> bytes:
    out = bytearray()
    for index, start in enumerate(range(0, len(data), BLOCK_BYTES)):
        block = data[start:start + BLOCK_BYTES]
        stream = hashlib.shake_256(DOMAIN + key + tag + index.to_bytes(8, "big")).digest(len(block))
        out += (int.from_bytes(block, "little") ^ int.from_bytes(stream, "little")).to_bytes(
            len(block), "little")
    return bytes(out)


def seal(key: bytes, name: str, data: bytes) -> bytes:
    """``data`` (the file called ``name``, its path relative to the sealed folder) sealed."""
    tag = _tag(key, name, data)
    return MAGIC + tag + _xor_keystream(key, tag, data)


def unseal(key: bytes, name: str, sealed: bytes) -> bytes:
    """The file's bytes; SealError when ``sealed`` is not ``name`` sealed under ``key``."""
    if not sealed.startswith(MAGIC) or len(sealed) < len(MAGIC) + TAG_BYTES:
        raise SealError(f"{name}: not a sealed file of this tool")
    tag = sealed[len(MAGIC):len(MAGIC) + TAG_BYTES]
    data = _xor_keystream(key, tag, sealed[len(MAGIC) + TAG_BYTES:])
    if not hmac.compare_digest(tag, _tag(key, name, data)):
        raise SealError(f"{name}: does not open with this scoring program's key (changed, "
                        "moved from another file, or sealed by another build)")
    return data
