"""The wire's usage reader fed arbitrary answers cut at arbitrary places (hypothesis): it never
raises, its counts stay in range, and where the answer is cut never changes what it reads."""

from __future__ import annotations

import json
import os
import tempfile
from itertools import pairwise
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel.records import exchanges, wire

EXAMPLES = int(os.environ.get("SEED_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES * 2,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_KEYS = [
    "usage",
    "usageMetadata",
    "message",
    "response",
    "model",
    "modelVersion",
    "delta",
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "prompt_tokens",
    "completion_tokens",
    "promptTokenCount",
    "candidatesTokenCount",
    "cached_tokens",
    "input_tokens_details",
    "type",
]
_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**15), max_value=10**15),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
_DOC = st.recursive(
    _LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(_KEYS), inner, max_size=5)
    ),
    max_leaves=25,
)


def _events(docs: list[object], junk: bytes) -> bytes:
    """Server-sent events holding the documents, with some junk between them."""
    parts = [b"data: " + json.dumps(d).encode() + b"\r\n\n" for d in docs]
    return junk.join(parts)


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in pairwise(edges)]


def _in_range(usage: wire.Usage, estimated: bool = False) -> None:
    assert 0 <= usage.cached <= usage.input <= wire.COUNT_MAX
    assert 0 <= usage.output <= wire.COUNT_MAX
    assert usage.known or usage.input == 0
    assert usage.known or estimated or usage.output == 0


@FUZZ
@given(
    api=st.sampled_from(wire.APIS),
    docs=st.lists(_DOC, max_size=6),
    junk=st.binary(max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=10**6), max_size=8),
    as_json=st.booleans(),
)
def test_any_answer_cut_anywhere_reads_the_same_and_in_range(
    api: str, docs: list[object], junk: bytes, cuts: list[int], as_json: bool
) -> None:
    answer = json.dumps(docs).encode() if as_json else _events(docs, junk)
    whole = wire.usage_of(api, answer, answer, "/models/m:x")
    reader = wire.UsageReader(api, answer, "/models/m:x")
    for piece in _cut(answer, cuts):
        _in_range(reader.feed(piece))
        _in_range(reader.estimate, estimated=True)
    assert reader.finish() == whole
    _in_range(whole)


@FUZZ
@given(
    api=st.sampled_from(wire.APIS),
    data=st.binary(max_size=2000),
    cuts=st.lists(st.integers(min_value=0, max_value=10**6), max_size=8),
    encoding=st.sampled_from(["", "gzip", "deflate", "br", "GZIP "]),
)
def test_arbitrary_bytes_in_any_encoding_never_raise(
    api: str, data: bytes, cuts: list[int], encoding: str
) -> None:
    reader = wire.UsageReader(api, data, data.decode("latin-1"), encoding)
    for piece in _cut(data, cuts):
        _in_range(reader.feed(piece))
    _in_range(reader.finish())
    if not encoding:
        assert reader.usage == wire.usage_of(api, data, data, data.decode("latin-1"))


@FUZZ
@given(
    model=st.binary(max_size=600),
    seals=st.binary(max_size=300),
    lines=st.integers(min_value=0, max_value=3),
    where=st.integers(min_value=0, max_value=10**6),
)
def test_a_recording_damaged_anyhow_is_read_whole_or_refused(
    model: bytes, seals: bytes, lines: int, where: int
) -> None:
    with tempfile.TemporaryDirectory() as temp:
        folder, state = Path(temp) / "iter-0001", Path(temp) / "state"
        folder.mkdir()
        recording = exchanges.Recording(folder, state)
        for seq in range(lines):
            recording.append(
                exchanges.Exchanged(seq, "gemini", "POST", "/m?key=k", {}, b"{}", b"{}", 200, 0, 0)
            )
        for name, junk in ((exchanges.MODEL_FILE, model), (exchanges.SEAL_FILE, seals)):
            path = folder / name
            data = path.read_bytes() if path.exists() else b""
            cut = where % (len(data) + 1)
            if junk:
                path.write_bytes(data[:cut] + junk + data[cut:])
        try:
            read = exchanges.read(folder, state)
        except exchanges.RecordingRefused as refused:
            assert refused.line >= 1
        else:
            assert [r.seq for r in read] == list(range(lines))
