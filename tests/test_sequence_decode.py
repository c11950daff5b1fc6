"""SequenceExample decoding: context and feature lists against protobuf, on the corpus file."""

import numpy as np
import pytest

import tfrec_fast
from tfrec_fast.example import (
    FixedLen,
    FixedLenSequence,
    VarLen,
    VarLenSequence,
    parse_sequence_examples,
)
from tfrec_fast.proto import sequence_example_to_dict

CONTEXT = {
    "id": FixedLen((), "bytes", default=b""),
    "length": FixedLen((), "int64", default=-1),
    "label": VarLen("float32"),
}
LISTS = {
    "embeddings": FixedLenSequence((4,), "float32"),
    "tokens": VarLenSequence("int64"),
    "words": VarLenSequence("bytes"),
}


@pytest.fixture(scope="module")
def batch(corpus_file):
    with tfrec_fast.TFRecordReader(corpus_file("sequence/sequence_example_200.tfrecord")) as r:
        return r.read_batch(max_bytes=1 << 30)


def test_every_record_matches_protobuf(batch):
    """Context features, fixed-size steps, variable-size steps and bytes steps, record by record;
    missing lists have no steps and missing context takes the default."""
    context, lists = parse_sequence_examples(batch, CONTEXT, LISTS)
    assert len(batch) == 200
    for i in range(len(batch)):
        want_context, want_lists = sequence_example_to_dict(batch[i])
        assert context["id"][i].tobytes() == (want_context.get("id") or [b""])[0]
        assert context["length"][i] == (want_context.get("length") or [-1])[0]
        assert context["label"][i].tolist() == pytest.approx(want_context.get("label", []))
        embeddings = lists["embeddings"][i]
        assert embeddings.shape == (len(want_lists.get("embeddings", [])), 4)
        np.testing.assert_array_equal(
            embeddings, np.array(want_lists.get("embeddings", []), np.float32).reshape(-1, 4)
        )
        assert lists["tokens"][i].to_list() == want_lists.get("tokens", [])
        assert lists["words"][i].to_list() == want_lists.get("words", [])


def test_wrong_step_size_names_the_feature_and_step(batch):
    with pytest.raises(tfrec_fast.errors.ExampleParseError) as info:
        parse_sequence_examples(batch, None, {"embeddings": FixedLenSequence((3,), "float32")})
    assert info.value.feature == "embeddings"
    assert "step 0" in str(info.value)


def test_context_and_list_names_are_separate_namespaces(batch):
    """A context key is not found among the feature lists (and the other way round)."""
    context, lists = parse_sequence_examples(
        batch, {"tokens": VarLen("int64")}, {"id": VarLenSequence("bytes")}
    )
    assert context["tokens"].values.size == 0
    assert lists["id"].values.row_splits.tolist() == [0]
