"""Where the key ring comes from: configuration, or, for the embedded default only, a key file
generated once in the data directory."""

from __future__ import annotations

import os

from firstlume.crypto import KeyRing, KeyRingError, generate_key
from firstlume.settings import Settings


def load_keyring(settings: Settings) -> KeyRing:
    if settings.encryption_keys:
        return KeyRing(settings.encryption_keys)
    if not settings.is_sqlite:
        raise KeyRingError(
            "FIRSTLUME_ENCRYPTION_KEYS is required with PostgreSQL: a comma-separated list of base64 "
            "32-byte keys, newest first (create one with `firstlume keygen`)."
        )
    key_file = settings.data_dir / "encryption.key"
    if not key_file.exists():
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(generate_key() + "\n")
    return KeyRing([key_file.read_text().strip()])
