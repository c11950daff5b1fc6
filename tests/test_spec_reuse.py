"""A spec used again (a loop over batches) skips normalising it and looking up its plan
(tfrec_fast.example._typed_plan and _plan's cache by spec object). These tests check that the
shortcut never outlives a change: whatever was edited between two calls, the second call parses
as a spec built afresh would."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from tfrec_fast import RecordBatch, example
from tfrec_fast.encode import encode_example
from tfrec_fast.example import FixedLen, Ragged, VarLen, parse_examples

RECORDS = RecordBatch.from_records(
    [encode_example({"a": [1, 2], "f": [0.5]}), encode_example({"a": [3, 4], "f": [1.5]})]
)


def fresh(spec):
    """What a spec built anew parses to (no cache shared with the reused one)."""
    return parse_examples(RECORDS, {k: v for k, v in spec.items()})


def same(got, want):
    assert got.keys() == want.keys()
    for key in want:
        g, w = got[key], want[key]
        if isinstance(w, Ragged):
            assert g.to_list() == w.to_list()
        else:
            np.testing.assert_array_equal(g, w)
            assert g.dtype == w.dtype


def test_an_edited_spec_object_is_seen():
    spec = {"a": FixedLen((2,), "int64"), "m": FixedLen((), "int64", default=5)}
    assert parse_examples(RECORDS, spec)["m"].tolist() == [5, 5]
    spec["m"].default = 7  # the same object, edited
    assert parse_examples(RECORDS, spec)["m"].tolist() == [7, 7]
    spec["a"].shape = (1, 2)
    assert parse_examples(RECORDS, spec)["a"].shape == (2, 1, 2)
    spec["a"].shape = (2,)  # edited back, after the shortcut has kept the edited plan
    assert parse_examples(RECORDS, spec)["a"].shape == (2, 2)
    assert parse_examples(RECORDS, spec)["m"].tolist() == [7, 7]


def test_an_edited_spec_is_planned_once_again(monkeypatch):
    """After an edit, the same dict's next calls share the new plan (no plan per call)."""
    spec = {"a": FixedLen((2,), "int64")}
    parse_examples(RECORDS, spec)
    spec["a"].shape = (1, 2)
    parse_examples(RECORDS, spec)
    plans = []
    make = example._Plan
    monkeypatch.setattr(example, "_Plan", lambda *a: plans.append(a) or make(*a))
    for _ in range(3):
        assert parse_examples(RECORDS, spec)["a"].shape == (2, 1, 2)
    assert plans == []


def test_a_replaced_added_or_removed_entry_is_seen():
    spec = {"a": FixedLen((2,), "int64")}
    same(parse_examples(RECORDS, spec), fresh(spec))
    spec["a"] = VarLen("int64")
    assert isinstance(parse_examples(RECORDS, spec)["a"], Ragged)
    spec["f"] = FixedLen((), "float32")
    same(parse_examples(RECORDS, spec), fresh(spec))
    del spec["a"]
    assert list(parse_examples(RECORDS, spec)) == ["f"]


def test_a_default_changed_in_place_is_seen():
    default = np.array(5)
    spec = {"m": FixedLen((), "int64", default=default)}
    assert parse_examples(RECORDS, spec)["m"].tolist() == [5, 5]
    default[...] = 6  # an array can change without any attribute being set
    assert parse_examples(RECORDS, spec)["m"].tolist() == [6, 6]


def test_names_only_specs_are_typed_by_each_batch():
    spec = {"x": None}
    ints = parse_examples([encode_example({"x": [1]})], spec)["x"]
    floats = parse_examples([encode_example({"x": [0.5]})], spec)["x"]
    assert ints.values.dtype == np.int64 and floats.values.dtype == np.float32


def test_the_same_objects_in_another_dict_share_the_plan_until_edited():
    a = FixedLen((2,), "int64")
    first = example._plan({"a": a})
    assert example._plan({"a": a}) is first
    a.shape = (1, 2)
    assert example._plan({"a": a}) is not first
    assert parse_examples(RECORDS, {"a": a})["a"].shape == (2, 1, 2)


def test_a_reused_spec_dict_is_normalised_once(monkeypatch):
    """The point of the shortcut: the second call with the same dict does no spec work."""
    spec = {"a": FixedLen((2,), "int64"), "f": "float"}
    parse_examples(RECORDS, spec)
    calls = []
    normalize = example.normalize_spec
    monkeypatch.setattr(example, "normalize_spec", lambda s: calls.append(s) or normalize(s))
    want = fresh(spec)  # a new dict: normalised
    assert len(calls) == 1
    same(parse_examples(RECORDS, spec), want)
    assert len(calls) == 1


def test_an_entry_replaced_while_the_first_call_runs_is_seen_next(monkeypatch):
    """What is remembered is what was parsed: an edit by another thread during the first call
    must not be recorded as already seen."""
    spec = {"m": FixedLen((), "int64", default=5)}
    plan = example._plan

    def plan_then_edit(typed, *args):
        made = plan(typed, *args)
        spec["m"] = FixedLen((), "int64", default=7)  # (another thread, in the middle)
        return made

    monkeypatch.setattr(example, "_plan", plan_then_edit)
    assert parse_examples(RECORDS, spec)["m"].tolist() == [5, 5]
    monkeypatch.setattr(example, "_plan", plan)
    assert parse_examples(RECORDS, spec)["m"].tolist() == [7, 7]


# TensorFlow's FixedLenFeature, duck-typed by its class name: a namedtuple with a list inside.
FixedLenFeature = collections.namedtuple("FixedLenFeature", "shape dtype default_value")


def test_tensorflow_features_are_read_anew_each_call():
    spec = {"a": FixedLenFeature([2], "int64", (0, 0))}
    assert parse_examples(RECORDS, spec)["a"].tolist() == [[1, 2], [3, 4]]
    # an equal-looking entry with an array default: compared by identity, not by ==
    spec["a"] = FixedLenFeature([2], "int64", np.array([7, 7]))
    assert parse_examples(RECORDS, spec)["a"].tolist() == [[1, 2], [3, 4]]
    spec = {"m": FixedLenFeature([], "int64", 5)}
    assert parse_examples(RECORDS, spec)["m"].shape == (2,)
    spec["m"].shape.extend([1, 2])  # the same object, changed without a trace
    assert parse_examples(RECORDS, spec)["m"].shape == (2, 1, 2)


class ComparedFixedLen(FixedLen):
    """A subclass that defines == (so it is unhashable), as a dataclass-style one would."""

    def __eq__(self, other):
        return isinstance(other, FixedLen) and self.shape == other.shape

    __hash__ = None  # type: ignore[assignment]


def test_unhashable_spec_objects_parse():
    spec = {"a": ComparedFixedLen((2,), "int64")}
    for _ in range(2):
        assert parse_examples(RECORDS, spec)["a"].tolist() == [[1, 2], [3, 4]]
        assert example._plan(dict(spec)) is example._plan(dict(spec))


@pytest.mark.parametrize("spec", [["a"], ("a", "f")])
def test_lists_of_names_still_parse(spec):
    assert parse_examples(RECORDS, spec)["a"].to_list() == [[1, 2], [3, 4]]


def test_a_negative_zero_default_is_not_the_positive_zeros_plan():
    """0.0 == -0.0, but the defaults they give differ in sign: two plans."""
    spec = {"g": FixedLen((), "float32", default=0.0)}
    assert not np.signbit(parse_examples(RECORDS, spec)["g"]).any()
    assert np.signbit(
        parse_examples(RECORDS, {"g": FixedLen((), "float32", default=-0.0)})["g"]
    ).all()
    spec["g"].default = -0.0
    assert np.signbit(parse_examples(RECORDS, spec)["g"]).all()


def test_an_edit_while_a_plan_is_made_is_seen_next(monkeypatch):
    """Another thread edits a spec object and plans it between this call's plan and its
    remembering of the keys: the next call still sees the edit."""
    spec = {"a": FixedLen((2,), "int64")}
    parse_examples(RECORDS, spec)
    spec["a"].shape = (2,)  # an edit: the next call plans the dict anew
    plan = example._plan

    def racing(typed, *rest):
        made = plan(typed, *rest)
        monkeypatch.setattr(example, "_plan", plan)
        spec["a"].shape = (1, 2)  # the other thread's edit, planned at once
        parse_examples(RECORDS, {"a": spec["a"]})
        return made

    monkeypatch.setattr(example, "_plan", racing)
    parse_examples(RECORDS, spec)
    assert parse_examples(RECORDS, spec)["a"].shape == (2, 1, 2)
