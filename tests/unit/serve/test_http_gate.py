"""`mcpwrap serve --http`: both eras over Streamable HTTP, against a real server process.

Modern POSTs: mirrored headers checked against the body, errors with the spec's HTTP
statuses, JSON or SSE answers, a closed response cancelling its call, MRTR. Legacy:
sessions (random id, 404 once ended), SSE progress, elicitation on the POST's stream.
Security: Origin/Host (DNS rebinding), bearer tokens, the refusal to expose tools, per-client
rate limits (429), TLS with a certificate made for the test.
"""

from __future__ import annotations

import pytest


# --- per-client rate limits (--rate R[/B]) ------------------------------------------------
def test_a_token_bucket_refills_at_its_rate_up_to_its_burst() -> None:
    from mcpwrap.serve.http_gate import RateLimit

    now = [100.0]
    limit = RateLimit(2.0, 3, clock=lambda: now[0])
    assert [limit.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]          # the burst
    assert limit.take("a") == pytest.approx(0.5)                            # the 4th waits half a second
    assert limit.take("b") == 0.0                                           # each key has its own bucket
    now[0] += 0.5
    assert limit.take("a") == 0.0 and limit.take("a") > 0
    now[0] += 3600.0                                                        # a long pause refills only to the burst
    assert [limit.take("a") for _ in range(4)][-1] > 0
    limit.forget("a")
    assert limit.take("a") == 0.0


@pytest.mark.parametrize("text, expected", [("5", (5.0, 10)), ("0.5/2", (0.5, 2)), ("40", (40.0, 40))])
def test_rate_flag_syntax(text: str, expected: tuple[float, int]) -> None:
    from mcpwrap.serve.http_gate import parse_rate

    assert parse_rate(text) == expected
