"""Encryption at rest: AES-256-GCM, bound to its context, with rotating keys."""

from __future__ import annotations

import json

import pytest
from cryptography.exceptions import InvalidTag

from firstlume.crypto import KeyRing, KeyRingError, generate_key, hash_token
from firstlume.services.sealed_plan import open_plan_json, plan_context, seal_plan_json


def test_round_trip_and_ciphertext_hides_plaintext() -> None:
    ring = KeyRing([generate_key()])
    sealed = ring.encrypt(b"plaintext-marker", "plan:run1:plan_file")
    assert b"plaintext-marker" not in sealed
    assert ring.decrypt(sealed, "plan:run1:plan_file") == b"plaintext-marker"


def test_ciphertext_is_bound_to_its_context() -> None:
    ring = KeyRing([generate_key()])
    sealed = ring.encrypt(b"secret", "plan:run1:plan_file")
    with pytest.raises(InvalidTag):
        ring.decrypt(sealed, "plan:run2:plan_file")


def test_old_keys_still_decrypt_after_rotation_and_new_values_use_the_newest() -> None:
    old, new = generate_key(), generate_key()
    sealed_before = KeyRing([old]).encrypt(b"v1", "ctx")
    rotated = KeyRing([new, old])
    assert rotated.decrypt(sealed_before, "ctx") == b"v1"
    with pytest.raises(KeyRingError):
        KeyRing([old]).decrypt(rotated.encrypt(b"v2", "ctx"), "ctx")


@pytest.mark.parametrize("keys", [[], ["not base64!"], ["c2hvcnQ="]])
def test_bad_key_rings_are_refused_with_a_clear_message(keys: list[str]) -> None:
    with pytest.raises(KeyRingError):
        KeyRing(keys)


def test_tokens_are_stored_as_hashes() -> None:
    assert hash_token("fl_abc") != "fl_abc" and len(hash_token("fl_abc")) == 64


def test_a_plan_json_is_stored_compressed_and_encrypted_and_plans_stored_before_still_open() -> None:
    ring = KeyRing([generate_key()])
    plan = {
        "format_version": "1.2",
        "resource_changes": [
            {"address": f"terraform_data.r[{i}]", "change": {"after": {"input": "marker"}}}
            for i in range(2000)
        ],
    }
    text = json.dumps(plan, separators=(",", ":")).encode()
    sealed = seal_plan_json(ring, "run1", plan)
    assert b"marker" not in sealed and b"terraform_data" not in sealed
    # Compressed before it was encrypted (encrypted bytes do not compress): far smaller.
    assert len(sealed) * 10 < len(text), (len(sealed), len(text))
    assert json.loads(open_plan_json(ring, "run1", sealed)) == plan
    with pytest.raises(InvalidTag):  # bound to its run
        open_plan_json(ring, "run2", sealed)
    # A plan sealed before plans were compressed: its JSON as it was.
    earlier = ring.encrypt(text, plan_context("run1", "plan_json"))
    assert open_plan_json(ring, "run1", earlier) == text
