"""One signature, three readers: the Python signer, the PHP guard (sodium) and the emulator's guard agree on the
shared test vector (tests/guard/vector.json) byte for byte: what is accepted, what is refused, which sites match."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from emulator.guard import open_body, same_site
from guard.signing import private_key, public_key_text, signed_body, verify

HERE = Path(__file__).parent
VECTOR = json.loads((HERE / "vector.json").read_text())


def test_python_signs_the_vector_to_the_same_bytes() -> None:
    key = private_key(VECTOR["seed"])
    assert public_key_text(key) == VECTOR["public"]
    assert signed_body(key, VECTOR["envelope"].encode()).decode() == VECTOR["body"]  # Ed25519 is deterministic
    assert verify(VECTOR["body"].encode(), [VECTOR["public"]]).raw == VECTOR["envelope"].encode()
    for why, body in VECTOR["refused"].items():
        assert verify(body.encode(), [VECTOR["public"]]) is None, why


def test_the_emulators_guard_reads_the_vector_as_the_php_does() -> None:
    assert open_body(VECTOR["body"].encode(), [VECTOR["public"]])["nonce"] == "vector-nonce-0123456789"
    for why, body in VECTOR["refused"].items():
        assert open_body(body.encode(), [VECTOR["public"]]) is None, why
    for kind, pairs in VECTOR["sites"].items():
        for signed, home in pairs:
            assert same_site(signed, home) is (kind == "same"), (signed, home)


@pytest.mark.skipif(shutil.which("php") is None, reason="php-cli is not installed (Debian: apt-get install php-cli)")
def test_the_php_guard_reads_the_vector() -> None:
    lines = subprocess.run(["php", str(HERE / "wordpress" / "vector.php"), str(HERE / "vector.json")],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    said = dict(line.rsplit(": ", 1) for line in lines)
    assert said.pop("body") == "accepted pause vector-nonce-0123456789"
    for why in VECTOR["refused"]:
        assert said.pop(why) == "refused", why
    for kind, pairs in VECTOR["sites"].items():
        for signed, home in pairs:
            assert said.pop(f"{kind} {signed} {home}") == kind, (signed, home)
    assert said == {}
