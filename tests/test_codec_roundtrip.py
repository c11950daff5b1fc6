"""encode -> parse round trips through tfrec_fast's own encoder and decoder (hypothesis)."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tfrec_fast as tfr

INT64 = st.integers(-(2**63), 2**63 - 1)
FLOAT32 = st.floats(width=32, allow_nan=False)
KINDS = {
    "int64": (st.lists(INT64, max_size=12).map(tfr.Int64s), "int64"),
    "float32": (st.lists(FLOAT32, max_size=12).map(tfr.Floats), "float32"),
    "bytes": (st.lists(st.binary(max_size=30), max_size=6).map(tfr.Bytes), "bytes"),
}
feature = st.sampled_from(sorted(KINDS)).flatmap(
    lambda kind: st.tuples(st.just(kind), KINDS[kind][0])
)
rows = st.lists(
    st.dictionaries(st.sampled_from(["a", "b", "c", "long/name", ""]), feature, max_size=5),
    min_size=1,
    max_size=20,
)


def _values(typed):
    return list(typed.values) if hasattr(typed, "values") else list(typed)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows)
def test_encode_example_then_parse_examples(records):
    """Every row encoded alone, all parsed as one batch with VarLen specs: same values; absent
    features are empty rows. Kinds are fixed per name across rows (as in a real file)."""
    kinds = {}
    for row in records:
        for name, (kind, _) in list(row.items()):
            if kinds.setdefault(name, kind) != kind:
                del row[name]
    encoded = [tfr.encode_example({k: v for k, (_, v) in row.items()}) for row in records]
    spec = {name: tfr.VarLen(kind) for name, kind in kinds.items()}
    columns = tfr.parse_examples(encoded, spec)
    for i, row in enumerate(records):
        for name, kind in kinds.items():
            want = _values(row[name][1]) if name in row else []
            got = columns[name].to_list()[i] if kind == "bytes" else columns[name][i].tolist()
            if kind == "float32":
                want = np.array(want, np.float32).tolist()
            assert got == [bytes(w) for w in want] if kind == "bytes" else got == want


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 40), st.integers(0, 5), st.randoms(use_true_random=False))
def test_encode_examples_columns_then_parse_fixed(n, width, rnd):
    """Columnar encoding of numpy columns and back through FixedLen specs, raw bytes included."""
    rng = np.random.default_rng(rnd.randint(0, 2**32))
    columns = {
        "ids": rng.integers(-(2**62), 2**62, size=(n, width)),
        "scores": rng.standard_normal((n, width)).astype(np.float32),
        "image": tfr.Bytes(rng.integers(0, 256, size=(n, 3, 4), dtype=np.uint8)),
    }
    batch = tfr.encode_examples(columns)
    parsed = tfr.parse_examples(
        batch,
        {
            "ids": tfr.FixedLen((width,), "int64"),
            "scores": tfr.FixedLen((width,), "float32"),
            "image": tfr.FixedLen((3, 4), "uint8"),
        },
    )
    np.testing.assert_array_equal(parsed["ids"], columns["ids"])
    np.testing.assert_array_equal(parsed["scores"], columns["scores"])
    np.testing.assert_array_equal(parsed["image"], columns["image"].values)
