"""Encryption at rest: AES-256-GCM with a key ring, newest key first, so keys can rotate.

Each ciphertext names the key that sealed it (an 8-byte fingerprint) and is bound to its
context (for example the run id and the artifact's purpose) as associated data, so a blob
copied to another row does not decrypt.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

_VERSION = b"\x01"
_FINGERPRINT_LEN = 8
_NONCE_LEN = 12


class KeyRingError(ValueError):
    pass


def generate_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def _fingerprint(key: bytes) -> bytes:
    return hashlib.sha256(b"firstlume-key:" + key).digest()[:_FINGERPRINT_LEN]


class KeyRing:
    def __init__(self, encoded_keys: list[str] | tuple[str, ...]) -> None:
        if not encoded_keys:
            raise KeyRingError("The encryption key ring is empty: set FIRSTLUME_ENCRYPTION_KEYS.")
        self._keys: list[tuple[bytes, AESGCM]] = []
        for position, encoded in enumerate(encoded_keys, start=1):
            try:
                key = base64.b64decode(encoded, validate=True)
            except ValueError:
                raise KeyRingError(f"Encryption key {position} is not valid base64.") from None
            if len(key) != 32:
                raise KeyRingError(f"Encryption key {position} must be 32 bytes (got {len(key)}).")
            self._keys.append((_fingerprint(key), AESGCM(key)))
        self._by_fingerprint = dict(self._keys)

    def encrypt(self, plaintext: bytes, context: str) -> bytes:
        fingerprint, aead = self._keys[0]
        nonce = secrets.token_bytes(_NONCE_LEN)
        return _VERSION + fingerprint + nonce + aead.encrypt(nonce, plaintext, context.encode())

    def decrypt(self, blob: bytes, context: str) -> bytes:
        if blob[:1] != _VERSION:
            raise KeyRingError("Unknown ciphertext format.")
        fingerprint = blob[1 : 1 + _FINGERPRINT_LEN]
        aead = self._by_fingerprint.get(fingerprint)
        if aead is None:
            raise KeyRingError("The key that sealed this value is not in the key ring.")
        nonce_start = 1 + _FINGERPRINT_LEN
        nonce = blob[nonce_start : nonce_start + _NONCE_LEN]
        return aead.decrypt(nonce, blob[nonce_start + _NONCE_LEN :], context.encode())

    def encrypt_text(self, text: str, context: str) -> bytes:
        return self.encrypt(text.encode(), context)

    def decrypt_text(self, blob: bytes, context: str) -> str:
        return self.decrypt(blob, context).decode()


def new_token(prefix: str) -> str:
    return f"{prefix}_{secrets.token_urlsafe(32)}"


def hash_token(token: str) -> str:
    # Tokens carry 256 bits of randomness, so a plain SHA-256 (no slow KDF) is safe and lets
    # the lookup be an indexed equality.
    return hashlib.sha256(token.encode()).hexdigest()
