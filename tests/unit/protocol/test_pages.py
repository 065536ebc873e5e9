"""protocol.pages: a kept stream's URI is built only from a 128-bit lowercase hex call id and a known stream."""

from __future__ import annotations

import pytest

from mcpwrap.protocol.pages import (
    CALL_ID_LENGTH,
    STREAMS,
    URI_PREFIX,
    output_uri,
    valid,
)

CALL = "0123456789abcdef" * 2


def test_output_uri_names_the_call_and_the_stream() -> None:
    assert [output_uri(CALL, s) for s in STREAMS] == [f"{URI_PREFIX}{CALL}/stdout", f"{URI_PREFIX}{CALL}/stderr"]
    assert len(CALL) == CALL_ID_LENGTH and all(valid(CALL, s) for s in STREAMS)


@pytest.mark.parametrize("call, stream", [
    (CALL.upper(), "stdout"), (CALL[:-1], "stdout"), (CALL + "0", "stdout"), ("../" + CALL[3:], "stdout"),
    ("g" * 32, "stdout"), (CALL, "stdin"), (CALL, ""), (CALL, "stdout/../x"),
])
def test_anything_else_from_the_client_is_not_a_kept_stream(call: str, stream: str) -> None:
    assert not valid(call, stream)
