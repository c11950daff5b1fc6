"""The SequenceExample encoder (C++): protobuf as the oracle, and round trips through
parse_sequence_examples."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tfrec_fast as tfr
from tfrec_fast.proto import SequenceExample, sequence_example_to_dict

int_steps = st.lists(st.lists(st.integers(-(1 << 63), (1 << 63) - 1), max_size=4), max_size=4)
float_steps = st.lists(st.lists(st.floats(width=32, allow_nan=False), max_size=4), max_size=4)
bytes_steps = st.lists(st.lists(st.binary(max_size=6), max_size=3), max_size=4)
WRAP = {"i": tfr.Int64s, "f": tfr.Floats, "b": tfr.Bytes}


@st.composite
def sequence_examples(draw):
    context = draw(st.dictionaries(st.text(max_size=4), st.integers(0, 1000), max_size=3))
    lists = {}
    for kind, steps in (("i", int_steps), ("f", float_steps), ("b", bytes_steps)):
        if draw(st.booleans()):
            lists["l" + kind] = (kind, draw(steps))
    return context, lists


def as_protobuf(context, lists) -> dict:
    msg = SequenceExample()
    msg.context.SetInParent()
    msg.feature_lists.SetInParent()
    for k, v in context.items():
        msg.context.feature[k].int64_list.value.append(v)
    for name, (kind, steps) in lists.items():
        fl = msg.feature_lists.feature_list[name]
        for step in steps:
            f = fl.feature.add()
            {"i": f.int64_list, "f": f.float_list, "b": f.bytes_list}[kind].value.extend(step)
    return sequence_example_to_dict(msg.SerializeToString())


@settings(max_examples=150, deadline=None)
@given(sequence_examples())
def test_encode_sequence_example_equals_protobuf(case):
    context, lists = case
    record = tfr.encode_sequence_example(
        context,
        {name: WRAP[kind]([WRAP[kind](s) for s in steps]) for name, (kind, steps) in lists.items()},
    )
    assert sequence_example_to_dict(record) == as_protobuf(context, lists)
    # The message has both fields, as protobuf writes them when set.
    parsed = SequenceExample.FromString(record)
    assert parsed.HasField("context") and parsed.HasField("feature_lists")


def test_batch_round_trip_through_the_decoder():
    context = {"id": np.arange(3), "name": [b"a", b"bb", b""]}
    lists = {"tok": [[[1, 2], [3]], [], [[4]]], "emb": [[[0.5, 1.5]], [[2.0, 3.0]], []]}
    batch = tfr.encode_sequence_examples(context, lists)
    ctx, seq = tfr.parse_sequence_examples(
        batch,
        {"id": tfr.FixedLen((), "int64"), "name": tfr.FixedLen((), "bytes")},
        {"tok": tfr.VarLenSequence("int64"), "emb": tfr.FixedLenSequence((2,), "float32")},
    )
    assert ctx["id"].tolist() == [0, 1, 2] and ctx["name"].to_list() == [b"a", b"bb", b""]
    again = tfr.encode_sequence_examples(ctx, seq)  # the decoder's output encodes back
    assert again.to_list() == batch.to_list()


def test_bad_arguments():
    with pytest.raises(ValueError):
        tfr.encode_sequence_examples({"id": [1, 2]}, {"tok": [[[1]]]})  # 1 record vs 2
    with pytest.raises(TypeError):
        tfr.encode_sequence_example({}, {"x": [[object()]]})
