"""`tfrec-fast cat` (Examples as JSON lines) and `tfrec-fast schema` (a spec as Python code)."""

from __future__ import annotations

import base64
import gzip
import json
import math
import os
import subprocess
import sys
import zlib

import numpy as np
import pytest

import tfrec_fast as tfr
from tfrec_fast import proto
from tfrec_fast.describe import py_str, show_bytes

EXAMPLE_FILES = [
    "edge_values",
    "long_lists",
    "mnist_like",
    "packed_lists",
    "tutorial_1000",
    "unpacked_lists_handbuilt",
    "voc_like",
]
SEQUENCE_FILE = "sequence/sequence_example_200.tfrecord"
# corrupt/ files derived from example/packed_lists.tfrecord (gzip_truncated_mid_stream holds
# raw, non-Example records)
DAMAGED_FILES = [
    "data_crc_bitflip",
    "length_2pow60",
    "length_bitflip",
    "payload_bitflip",
    "trailing_garbage_5",
    "truncated_in_final_crc",
    "truncated_mid_header",
    "truncated_mid_payload",
]


def run_cli(*args, env=None, timeout=120):
    environ = dict(os.environ, PYTHONIOENCODING="utf-8")
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "tfrec_fast", *map(str, args)],
        capture_output=True,
        encoding="utf-8",
        env=environ,
        timeout=timeout,
    )


def strict_json(line):
    """json.loads refusing NaN / Infinity / -Infinity (not JSON)."""

    def bad(token):
        raise ValueError("not JSON: %s" % token)

    return json.loads(line, parse_constant=bad)


def read_all(path, compression=None):
    """(records, DataLossError message or None) read with the library."""
    records = []
    try:
        with tfr.TFRecordReader(path, compression) as reader:
            for record in reader:
                records.append(bytes(record))
    except tfr.DataLossError as error:
        return records, str(error)
    return records, None


def f32_bits(v):
    return np.array([v], np.float32).view(np.uint32)[0]


def assert_values_equal(shown, values, where):
    """A JSON list from `cat --base64` against the same list from proto.example_to_dict."""
    assert isinstance(shown, list) and len(shown) == len(values), where
    for got, want in zip(shown, values):
        if isinstance(want, bytes):
            assert base64.b64decode(got, validate=True) == want, where
        elif isinstance(want, float):
            if math.isnan(want):
                assert got == "nan", where
            elif math.isinf(want):
                assert got == ("inf" if want > 0 else "-inf"), where
            else:
                # printed as the shortest decimal of the float32: reads back to the same bits
                assert isinstance(got, float) and f32_bits(got) == f32_bits(want), (
                    where,
                    got,
                    want,
                )
        else:
            assert type(got) is int and got == want, where


def assert_features_equal(shown, features, where):
    assert list(shown) == list(features), where  # same names, sorted
    for name, values in features.items():
        assert_values_equal(shown[name], values, (where, name))


def cat_lines(*args, **kw):
    out = run_cli("cat", *args, **kw)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    return [strict_json(line) for line in out.stdout.splitlines()]


# ---- cat ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", EXAMPLE_FILES)
def test_cat_matches_example_to_dict(corpus_file, name):
    """Every record of each example/ file, as JSON, equals proto.example_to_dict (exact bytes
    with --base64, floats to the float32 bit, NaN/inf as strings)."""
    path = corpus_file("example/%s.tfrecord" % name)
    records, error = read_all(path)
    assert error is None
    lines = cat_lines(path, "--limit", "0", "--base64")
    assert len(lines) == len(records)
    for i, (line, record) in enumerate(zip(lines, records)):
        assert_features_equal(line, proto.example_to_dict(record), (name, i))


def test_cat_sequence_matches_sequence_example_to_dict(corpus_file):
    """--sequence prints {"context": ..., "feature_lists": {name: [[step values], ...]}}."""
    path = corpus_file(SEQUENCE_FILE)
    records, _ = read_all(path)
    lines = cat_lines(path, "--sequence", "--limit", "0", "--base64")
    assert len(lines) == len(records) == 200
    for i, (line, record) in enumerate(zip(lines, records)):
        context, lists = proto.sequence_example_to_dict(record)
        assert list(line) == ["context", "feature_lists"]
        assert_features_equal(line["context"], context, i)
        assert list(line["feature_lists"]) == list(lists)
        for name, steps in lists.items():
            assert len(line["feature_lists"][name]) == len(steps)
            for shown, values in zip(line["feature_lists"][name], steps):
                assert_values_equal(shown, values, (i, name))


def test_cat_limit_and_skip(corpus_file):
    """Default 10 records; --limit N; --skip N; --limit 0 means all; skipping past the end
    prints nothing."""
    path = corpus_file("example/tutorial_1000.tfrecord")
    records, _ = read_all(path)
    want = [proto.example_to_dict(r) for r in records]

    def features(lines):
        return [line["feature1"] + line["feature0"] for line in lines]

    def expected(a, b):
        return [w["feature1"] + w["feature0"] for w in want[a:b]]

    assert features(cat_lines(path)) == expected(0, 10)
    assert features(cat_lines(path, "--limit", "3")) == expected(0, 3)
    assert features(cat_lines(path, "--skip", "5", "--limit", "4")) == expected(5, 9)
    assert features(cat_lines(path, "--skip", "995")) == expected(995, 1000)
    assert len(cat_lines(path, "--limit", "0")) == 1000
    assert len(cat_lines(path, "--skip", "990", "--limit", "0")) == 10
    assert cat_lines(path, "--skip", "5000") == []


def test_cat_nan_and_inf_are_strings(corpus_file):
    """NaN and infinities come out as "nan", "inf", "-inf" (the line stays valid JSON); -0.0 and
    denormals survive."""
    path = corpus_file("example/edge_values.tfrecord")
    out = run_cli("cat", path, "--limit", "2", "--skip", "1")
    assert out.returncode == 0, out.stderr
    for token in ("NaN", "Infinity"):
        assert token not in out.stdout
    line = strict_json(out.stdout.splitlines()[0])
    assert line["f32_nan_inf"] == ["nan", "inf", "-inf"]
    assert line["f32_nan_payloads"] == ["nan", "nan", "nan"]
    assert [math.copysign(1, v) for v in line["f32_signed_zero"]] == [-1, 1]
    assert line["f32_denormals"][0] == 1e-45
    assert line["f32_limits"][:3] == [1.1754944e-38, 3.4028235e38, -3.4028235e38]
    assert line["f32_limits"][6] == 0.1  # shortest float32 decimal, not 0.10000000149011612


def test_cat_int64_extremes(corpus_file):
    """int64 are JSON integers, exact beyond 2**53."""
    lines = cat_lines(corpus_file("example/edge_values.tfrecord"), "--limit", "1")
    assert lines[0]["i64_min_max"] == [-(1 << 63), (1 << 63) - 1]
    assert 9007199254740993 in lines[0]["i64_boundaries"]


def test_cat_bytes_shortened(corpus_file):
    """Printable UTF-8 is text, other bytes hex (0x...); longer than --max-bytes is cut and ends
    with "…(N bytes)"; --max-bytes 0 never cuts."""
    path = corpus_file("example/edge_values.tfrecord")
    line = cat_lines(path, "--skip", "2", "--limit", "1")[0]
    assert line["bytes_all_256_values"] == ["0x" + bytes(range(32)).hex() + "\u2026(256 bytes)"]
    assert line["bytes_invalid_utf8"] == ["0xfffec328", "0xeda080"]
    assert line["bytes_empty_value"] == [""]
    assert line["bytes_many_values"][3] == "xxx"
    assert line["bytes_many_values"][39] == "x" * 32 + "\u2026(39 bytes)"
    with_nul = proto.example_to_dict(read_all(path)[0][2])["bytes_with_nul"]
    assert line["bytes_with_nul"] == [
        ("0x" + v.hex()) if b"\0" in v else v.decode() for v in with_nul
    ]

    line = cat_lines(path, "--skip", "2", "--limit", "1", "--max-bytes", "4")[0]
    assert line["bytes_all_256_values"] == ["0x00010203\u2026(256 bytes)"]
    assert line["bytes_many_values"][4] == "xxxx"
    assert line["bytes_many_values"][5] == "xxxx\u2026(5 bytes)"

    line = cat_lines(path, "--skip", "2", "--limit", "1", "--max-bytes", "0")[0]
    assert line["bytes_all_256_values"] == ["0x" + bytes(range(256)).hex()]

    line = cat_lines(path, "--skip", "2", "--limit", "1", "--base64")[0]
    assert base64.b64decode(line["bytes_all_256_values"][0]) == bytes(range(256))


def test_show_bytes_cuts_text_at_a_character():
    """A cut inside a multi-byte character drops that character, never shows half of it."""
    assert show_bytes("héllo".encode(), 2) == "h\u2026(6 bytes)"
    assert show_bytes("héllo".encode(), 3) == "hé\u2026(6 bytes)"
    assert show_bytes(b"a\tb\n", 32) == "a\tb\n"
    assert show_bytes(b"\x7f", 32) == "0x7f"
    assert show_bytes(b"", 32, True) == ""


def test_cat_not_an_example_exit_1(corpus_file):
    """raw/crc_lengths.tfrecord: record 0 (empty) is an empty Example, record 1 is not an
    Example: one line, then an error naming record 1, exit status 1."""
    out = run_cli("cat", corpus_file("raw/crc_lengths.tfrecord"))
    assert out.returncode == 1
    assert [strict_json(line) for line in out.stdout.splitlines()] == [{}]
    assert "record 1" in out.stderr and "Example" in out.stderr
    assert "Traceback" not in out.stderr


def test_cat_not_a_sequence_example_exit_1(corpus_file):
    out = run_cli("cat", "--sequence", corpus_file("raw/crc_lengths.tfrecord"))
    assert out.returncode == 1
    assert [strict_json(line) for line in out.stdout.splitlines()] == [
        {"context": {}, "feature_lists": {}}
    ]
    assert "record 1" in out.stderr and "SequenceExample" in out.stderr


@pytest.mark.parametrize("name", ["gzip_default", "gzip_level1", "zlib_default"])
def test_cat_compressed_corpus_auto_detected(corpus_file, name):
    """compressed/ files (the raw records of crc_lengths): record 0, an empty payload, is an
    empty Example; read as uncompressed the file would be damaged."""
    path = corpus_file("compressed/%s.tfrecord" % name)
    assert cat_lines(path, "--limit", "1") == [{}]
    out = run_cli("cat", path, "--limit", "1", "--compression", "none")
    assert out.returncode == 1 and "DAMAGED" in out.stderr


@pytest.mark.parametrize("compress, kind", [(gzip.compress, "gzip"), (zlib.compress, "zlib")])
def test_cat_compressed_examples(tmp_path, corpus_file, compress, kind):
    """A gzip / zlib copy of an Example file prints the same lines as the original."""
    path = corpus_file("example/voc_like.tfrecord")
    packed = tmp_path / ("voc_like.tfrecord." + kind)
    packed.write_bytes(compress(path.read_bytes()))
    plain = run_cli("cat", path, "--limit", "0")
    auto = run_cli("cat", packed, "--limit", "0")
    given = run_cli("cat", packed, "--limit", "0", "--compression", kind)
    assert plain.returncode == auto.returncode == given.returncode == 0, auto.stderr
    assert auto.stdout == given.stdout == plain.stdout
    assert len(auto.stdout.splitlines()) == 60


@pytest.mark.parametrize("name", DAMAGED_FILES)
def test_cat_damaged_prints_good_records_then_exit_1(corpus_file, name):
    """The records before the damage are printed, then the DataLossError on stderr, exit 1."""
    path = corpus_file("corrupt/%s.tfrecord" % name)
    records, error = read_all(path)
    assert error is not None
    out = run_cli("cat", path, "--limit", "0", "--base64")
    assert out.returncode == 1
    lines = [strict_json(line) for line in out.stdout.splitlines()]
    assert len(lines) == len(records)
    for i, (line, record) in enumerate(zip(lines, records)):
        assert_features_equal(line, proto.example_to_dict(record), i)
    assert "DAMAGED " + error in out.stderr
    assert "Traceback" not in out.stderr


def test_cat_damaged_gzip_examples(tmp_path, corpus_file):
    """A gzip Example file cut mid-stream: the intact records, then DAMAGED, exit 1."""
    data = gzip.compress(corpus_file("example/tutorial_1000.tfrecord").read_bytes())
    path = tmp_path / "cut.tfrecord.gz"
    path.write_bytes(data[: len(data) // 2])
    records, error = read_all(path, "gzip")
    assert error is not None and 0 < len(records) < 1000
    out = run_cli("cat", path, "--limit", "0")
    assert out.returncode == 1
    assert len(out.stdout.splitlines()) == len(records)
    assert "DAMAGED " + error in out.stderr


def test_cat_stops_reading_at_the_limit(corpus_file):
    """Damage after the requested records is never reached: --limit 2 on a file damaged at
    record 2 succeeds, --limit 3 does not."""
    path = corpus_file("corrupt/payload_bitflip.tfrecord")
    assert len(cat_lines(path, "--limit", "2")) == 2
    out = run_cli("cat", path, "--limit", "3")
    assert out.returncode == 1 and len(out.stdout.splitlines()) == 2
    out = run_cli("cat", path, "--skip", "3")
    assert out.returncode == 1 and out.stdout == "" and "DAMAGED" in out.stderr


def test_cat_broken_pipe_is_quiet(corpus_file):
    """`tfrec-fast cat ... | head -c 100`: no traceback, no error message, status 0."""
    path = corpus_file("example/long_lists.tfrecord")  # a ~1 MB line, more than a pipe holds
    proc = subprocess.Popen(
        [sys.executable, "-m", "tfrec_fast", "cat", str(path), "--limit", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    head = proc.stdout.read(100)
    proc.stdout.close()
    stderr = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 0
    assert head.startswith(b'{"floats_100k": [')
    assert stderr == b""


def test_cat_ascii_stdout(corpus_file):
    """On a stdout that cannot take UTF-8 the JSON escapes non-ASCII; the values are the same."""
    path = corpus_file("example/edge_values.tfrecord")
    utf8 = run_cli("cat", path, "--skip", "2", "--limit", "2")
    ascii_ = run_cli("cat", path, "--skip", "2", "--limit", "2", env={"PYTHONIOENCODING": "ascii"})
    assert utf8.returncode == ascii_.returncode == 0, ascii_.stderr
    assert ascii_.stdout.isascii() and not utf8.stdout.isascii()
    assert [json.loads(x) for x in ascii_.stdout.splitlines()] == [
        json.loads(x) for x in utf8.stdout.splitlines()
    ]


def test_cat_bad_arguments_and_missing_file(tmp_path, corpus_file):
    path = corpus_file("example/tutorial_1000.tfrecord")
    assert run_cli("cat", path, "--limit", "-1").returncode == 2
    assert run_cli("cat", path, "--max-bytes", "x").returncode == 2
    out = run_cli("cat", tmp_path / "missing.tfrecord")
    assert out.returncode == 1 and "ERROR" in out.stderr and "Traceback" not in out.stderr


def test_cat_empty_file(corpus_file):
    assert cat_lines(corpus_file("raw/empty_file.tfrecord")) == []


# ---- schema -------------------------------------------------------------------------------------


def run_schema(*args):
    out = run_cli("schema", *args)
    assert out.returncode == 0, out.stderr
    namespace = {}
    exec(compile(out.stdout, "<schema output>", "exec"), namespace)
    return out.stdout, namespace


def row(column, i):
    """Row i of a parsed column as a flat Python list."""
    if isinstance(column, tfr.BytesColumn):
        value = column.to_list()[i]
        return value if isinstance(value, list) else [value]
    if isinstance(column, tfr.Ragged):
        return column[i].tolist()
    return np.asarray(column[i]).ravel().tolist()


def step_values(step):
    """One step of a parsed feature list as a flat Python list."""
    if isinstance(step, memoryview):  # FixedLenSequence((), "bytes")
        return [bytes(step)]
    if isinstance(step, list):  # VarLenSequence("bytes")
        return [bytes(v) for v in step]
    return np.asarray(step).ravel().tolist()


def same_values(got, want):
    if want and isinstance(want[0], float):
        return np.array_equal(
            np.array(got, np.float32).view(np.uint32), np.array(want, np.float32).view(np.uint32)
        )
    return got == want


@pytest.mark.parametrize("name", EXAMPLE_FILES)
def test_schema_output_parses_the_file(corpus_file, name):
    """The printed code runs, and its spec parses the file's records with parse_examples, each
    feature giving the values protobuf sees (an absent VarLen feature: no values)."""
    path = corpus_file("example/%s.tfrecord" % name)
    text, namespace = run_schema(path)
    assert text.startswith("# ")
    spec = namespace["spec"]
    records, _ = read_all(path)
    want = [proto.example_to_dict(r) for r in records]
    assert sorted(spec) == sorted(set().union(*want))
    batch = tfr.TFRecordReader(path).read_batch(max_records=1000)
    assert len(batch) == len(records)
    columns = tfr.parse_examples(batch, spec)
    for feature, column in columns.items():
        assert len(column) == len(records)
        for i, values in enumerate(want):
            assert same_values(row(column, i), values.get(feature, [])), (feature, i)


def test_schema_fixed_and_var_lengths(corpus_file):
    """Always present with one length -> FixedLen; present in some or of varying length ->
    VarLen; the comments give kind, lengths and presence."""
    text, ns = run_schema(corpus_file("example/tutorial_1000.tfrecord"))
    assert "# the first 1000 records of " in text.splitlines()[0]
    assert "import tfrec_fast as tfr" in text
    spec = ns["spec"]
    assert isinstance(spec["feature0"], tfr.FixedLen) and spec["feature0"].shape == ()
    assert spec["feature0"].dtype == np.int64
    assert spec["feature2"].kind == tfr.FixedLen((), "bytes").kind
    assert spec["feature3"].dtype == np.float32
    assert '"feature3": tfr.FixedLen((), "float32"),' in text
    assert "# float, 1 value, in 1000/1000" in text

    text, ns = run_schema(corpus_file("example/voc_like.tfrecord"))
    assert text.splitlines()[0].startswith("# 60 records of ")
    xmin = [line for line in text.splitlines() if '"image/object/bbox/xmin"' in line][0]
    assert 'tfr.VarLen("float32")' in xmin and "0..6 values" in xmin
    assert "/60 (missing in some)" in xmin
    assert isinstance(ns["spec"]["image/encoded"], tfr.FixedLen)

    text, ns = run_schema(corpus_file("example/tutorial_1000.tfrecord"), "--records", "10")
    assert text.splitlines()[0].startswith("# the first 10 records of ")
    assert "in 10/10" in text


def test_schema_sequence(corpus_file):
    """--sequence prints context_spec and sequence_spec; FixedLenSequence where every step has
    the same length; parse_sequence_examples reads the file with them."""
    path = corpus_file(SEQUENCE_FILE)
    text, ns = run_schema(path, "--sequence")
    context_spec, sequence_spec = ns["context_spec"], ns["sequence_spec"]
    assert isinstance(sequence_spec["embeddings"], tfr.FixedLenSequence)
    assert sequence_spec["embeddings"].shape == (4,)
    records, _ = read_all(path)
    want = [proto.sequence_example_to_dict(r) for r in records]
    assert sorted(context_spec) == sorted(set().union(*(c for c, _ in want)))
    assert sorted(sequence_spec) == sorted(set().union(*(s for _, s in want)))
    batch = tfr.TFRecordReader(path).read_batch(max_records=200)
    context, sequences = tfr.parse_sequence_examples(batch, context_spec, sequence_spec)
    for feature, column in context.items():
        for i, (c, _) in enumerate(want):
            assert same_values(row(column, i), c.get(feature, [])), (feature, i)
    for feature, steps in sequences.items():
        for i, (_, lists) in enumerate(want):
            got = steps[i]
            want_steps = lists.get(feature, [])
            assert len(got) == len(want_steps), (feature, i)
            for j, values in enumerate(want_steps):
                assert same_values(step_values(got[j]), values), (feature, i, j)


def write_examples(path, examples):
    with tfr.TFRecordWriter(path) as writer:
        for example in examples:
            writer.write(example.SerializeToString())


def test_schema_edge_cases(tmp_path):
    """Mixed kinds -> a commented-out line (left out of the spec); a Feature with no list set
    fits any kind; a constant length of 3 -> FixedLen((3,)); always 0 values -> VarLen."""

    def example(**features):
        ex = proto.Example()
        for name, feature in features.items():
            ex.features.feature[name].CopyFrom(feature)
        ex.features.SetInParent()
        return ex

    F = proto.Feature
    floats = lambda *v: F(float_list=proto.FloatList(value=v))  # noqa: E731
    ints = lambda *v: F(int64_list=proto.Int64List(value=v))  # noqa: E731
    raw = lambda *v: F(bytes_list=proto.BytesList(value=v))  # noqa: E731
    path = tmp_path / "edge.tfrecord"
    write_examples(
        path,
        [
            example(
                mixed=ints(1),
                triple=floats(1, 2, 3),
                unset=F(),
                empty=ints(),
                sometimes_unset=F(),
                **{'we"ird\\name\n': raw(b"a")},
            ),
            example(
                mixed=raw(b"x"),
                triple=floats(4, 5, 6),
                unset=F(),
                empty=ints(),
                sometimes_unset=ints(7, 8),
                **{'we"ird\\name\n': raw(b"b")},
            ),
        ],
    )
    text, ns = run_schema(path)
    spec = ns["spec"]
    assert "mixed" not in spec
    assert [line for line in text.splitlines() if '# "mixed"' in line and "mixed kinds" in line]
    assert spec["triple"].shape == (3,) and spec["triple"].dtype == np.float32
    assert isinstance(spec["empty"], tfr.VarLen)
    assert isinstance(spec["unset"], tfr.VarLen)
    assert isinstance(spec["sometimes_unset"], tfr.VarLen)
    assert isinstance(spec['we"ird\\name\n'], tfr.FixedLen)
    columns = tfr.parse_examples(tfr.TFRecordReader(path).read_batch(), spec)
    assert columns["triple"].tolist() == [[1, 2, 3], [4, 5, 6]]
    assert columns["sometimes_unset"].to_list() == [[], [7, 8]]
    assert columns['we"ird\\name\n'].to_list() == [b"a", b"b"]


def test_schema_sequence_edge_cases(tmp_path):
    """Bytes feature lists with 2 values per step, and steps of varying length, are
    VarLenSequence; a context feature missing in some records is VarLen."""
    path = tmp_path / "seq.tfrecord"
    records = []
    for i in range(3):
        seq = proto.SequenceExample()
        if i:
            seq.context.feature["id"].int64_list.value.append(i)
        for step in range(i + 1):
            seq.feature_lists.feature_list["pairs"].feature.add().bytes_list.value.extend(
                [b"a", b"b"]
            )
            seq.feature_lists.feature_list["ragged"].feature.add().int64_list.value.extend(
                range(step)
            )
        records.append(seq)
    write_examples(path, records)
    text, ns = run_schema(path, "--sequence")
    assert isinstance(ns["context_spec"]["id"], tfr.VarLen)
    assert isinstance(ns["sequence_spec"]["pairs"], tfr.VarLenSequence)
    assert isinstance(ns["sequence_spec"]["ragged"], tfr.VarLenSequence)
    assert "0..2 values per step, 1..3 steps" in text
    batch = tfr.TFRecordReader(path).read_batch()
    context, sequences = tfr.parse_sequence_examples(batch, ns["context_spec"], ns["sequence_spec"])
    assert context["id"].to_list() == [[], [1], [2]]
    assert [len(sequences["pairs"][i]) for i in range(3)] == [1, 2, 3]


def test_schema_errors(corpus_file):
    """Not Examples, or damage within the records read: exit 1, a message, no code."""
    out = run_cli("schema", corpus_file("raw/crc_lengths.tfrecord"))
    assert out.returncode == 1 and out.stdout == "" and "record 1" in out.stderr
    out = run_cli("schema", corpus_file("corrupt/payload_bitflip.tfrecord"))
    assert out.returncode == 1 and out.stdout == "" and "DAMAGED" in out.stderr
    # the damage lies beyond the records asked for
    text, ns = run_schema(corpus_file("corrupt/payload_bitflip.tfrecord"), "--records", "2")
    assert "ids" in ns["spec"]


def test_schema_empty_file(corpus_file):
    text, ns = run_schema(corpus_file("raw/empty_file.tfrecord"))
    assert ns["spec"] == {}
    assert text.startswith("# 0 records of ")


def test_py_str_literals():
    for s in [
        "plain",
        'quo"te',
        "back\\slash",
        "new\nline",
        "\x00\x7f",
        "café",
        "emoji_\U0001f600",
        "\u2028",
    ]:
        for ascii_only in (False, True):
            literal = py_str(s, ascii_only)
            assert eval(literal) == s
            assert not ascii_only or literal.isascii()
