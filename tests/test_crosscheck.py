"""Cross-checks against TensorFlow and the `tfrecord` package, when installed."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys

import _oracle
import pytest
from _util import read_all
from conftest import make_payloads

import tfrec_fast

PAYLOADS = make_payloads(77, (0, 1, 5, 100, 4096, 70000, 3))
TF_NAMES = {None: "", "gzip": "GZIP", "zlib": "ZLIB"}


def _write(path, compression, payloads=PAYLOADS):
    with tfrec_fast.TFRecordWriter(str(path), compression=compression) as w:
        for p in payloads:
            w.write(p)
    return path


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


HAVE_TFRECORD = importlib.util.find_spec("tfrecord") is not None
needs_tfrecord = pytest.mark.skipif(
    not HAVE_TFRECORD, reason="optional peer `tfrecord` not installed (CI's peers step runs this)"
)


@pytest.fixture(scope="module")
def tfrecord_pkg():
    """The `tfrecord` package, used only in subprocesses: with protobuf's upb backend it cannot
    be imported into a process that already imported TensorFlow (both register tensorflow.*
    protos: 'duplicate symbol tensorflow.BytesList'), and the tf fixture may have done that."""
    return "tfrecord"


def run_py(code, *args, timeout=300):
    """Run `code` in a fresh interpreter; return its stdout parsed as JSON."""
    out = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("compression", [None, "gzip", "zlib"])
def test_tf_reads_our_files(tf, tmp_path, compression):
    """tf.data.TFRecordDataset reads tfrec_fast output (all compressions) record for record."""
    p = _write(tmp_path / "ours.tfrecord", compression)
    ds = tf.data.TFRecordDataset([str(p)], compression_type=TF_NAMES[compression])
    assert [t.numpy() for t in ds] == PAYLOADS


@pytest.mark.parametrize("compression", [None, "gzip", "zlib"])
def test_we_read_tf_files(tf, tmp_path, compression):
    """tfrec_fast reads files written by tf.io.TFRecordWriter (all compressions)."""
    p = tmp_path / "tf.tfrecord"
    opts = tf.io.TFRecordOptions(compression_type=TF_NAMES[compression])
    with tf.io.TFRecordWriter(str(p), options=opts) as w:
        for x in PAYLOADS:
            w.write(x)
    records, err = read_all(str(p), compression=compression)
    assert err is None and records == PAYLOADS


def test_uncompressed_bytes_identical_to_tf(tf, tmp_path):
    """Uncompressed tfrec_fast output is byte-identical to tf.io.TFRecordWriter's."""
    ours = _write(tmp_path / "ours", None).read_bytes()
    theirs = tmp_path / "theirs"
    with tf.io.TFRecordWriter(str(theirs)) as w:
        for x in PAYLOADS:
            w.write(x)
    assert ours == theirs.read_bytes() == _oracle.build_file(PAYLOADS)


def test_crc_matches_tf(tf):
    """tfrec_fast.masked_crc32c agrees with the CRC TF writes into its framing."""
    import pathlib
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = pathlib.Path(d) / "x"
        with tf.io.TFRecordWriter(str(p)) as w:
            w.write(b"123456789")
        raw = p.read_bytes()
    assert int.from_bytes(raw[-4:], "little") == tfrec_fast.masked_crc32c(b"123456789")


@needs_tfrecord
@pytest.mark.parametrize("compression", [None, "gzip"])
def test_tfrecord_pkg_reads_our_files(tfrecord_pkg, tmp_path, compression):
    """The `tfrecord` package's raw iterator reads tfrec_fast output record for record."""
    p = _write(tmp_path / "ours.tfrecord", compression)
    code = (
        "import sys, json, hashlib\n"
        "import tfrecord.reader as rd\n"
        "c = None if sys.argv[2] == 'None' else sys.argv[2]\n"
        "# its iterator reuses one buffer: digest each record before advancing\n"
        "print(json.dumps([hashlib.sha256(bytes(x)).hexdigest()\n"
        "                  for x in rd.tfrecord_iterator(sys.argv[1], compression_type=c)]))\n"
    )
    got = run_py(code, p, compression)
    assert got == [hashlib.sha256(x).hexdigest() for x in PAYLOADS]


@needs_tfrecord
def test_tfrecord_pkg_loader_parses_our_examples(tfrecord_pkg, tmp_path):
    """tfrecord.reader.tfrecord_loader parses Example records framed by tfrec_fast."""
    p = tmp_path / "ex.tfrecord"
    code_make = (
        "import sys, json\n"
        "from tfrecord import example_pb2\n"
        "ex = example_pb2.Example()\n"
        "ex.features.feature['label'].int64_list.value.append(int(sys.argv[1]))\n"
        "ex.features.feature['name'].bytes_list.value.append(b'abc')\n"
        "print(json.dumps(ex.SerializeToString().hex()))\n"
    )
    recs = [bytes.fromhex(run_py(code_make, i)) for i in (7, 8)]
    with tfrec_fast.TFRecordWriter(str(p)) as w:
        for r in recs:
            w.write(r)
    code_read = (
        "import sys, json\n"
        "from tfrecord.reader import tfrecord_loader\n"
        "rows = list(tfrecord_loader(sys.argv[1], None, {'label': 'int', 'name': 'byte'}))\n"
        "print(json.dumps([[int(r['label'][0]), bytes(r['name']).decode()] for r in rows]))\n"
    )
    assert run_py(code_read, p) == [[7, "abc"], [8, "abc"]]


@needs_tfrecord
def test_we_read_tfrecord_pkg_files(tfrecord_pkg, tmp_path):
    """tfrec_fast reads files written by the `tfrecord` package's writer (Example payloads)."""
    p = tmp_path / "theirs.tfrecord"
    code = (
        "import sys, json\n"
        "from tfrecord.writer import TFRecordWriter\n"
        "w = TFRecordWriter(sys.argv[1])\n"
        "for i in range(20):\n"
        "    w.write({'data': (bytes([i]) * i, 'byte'), 'label': (i, 'int')})\n"
        "w.close()\n"
        "print(json.dumps('ok'))\n"
    )
    assert run_py(code, p) == "ok"
    records, err = read_all(str(p))
    assert err is None and len(records) == 20
    assert records == _oracle.parse(p.read_bytes())
    # payloads are Examples holding our values: check the bytes value appears verbatim
    for i, rec in enumerate(records):
        assert (bytes([i]) * i) in rec


@needs_tfrecord
@pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is None,
    reason="optional peer tensorflow not installed (CI's peers step runs this)",
)
def test_all_three_in_one_process(tmp_path):
    """tfrec_fast loads next to tensorflow and next to `tfrecord` without clashes; in one process
    with all three, any failure must be the peers' own clash (present without tfrec_fast too)."""
    p = _write(tmp_path / "x.tfrecord", None)
    n = len(PAYLOADS)
    code = (
        "import sys, json, importlib.util\n"
        "import tfrec_fast\n"
        "if importlib.util.find_spec('tfrec_fast.proto'):\n"
        "    import tfrec_fast.proto\n"
        "res = {'ours': sum(1 for _ in tfrec_fast.read_records(sys.argv[1]))}\n"
        "for peer in sys.argv[2:]:\n"
        "    try:\n"
        "        if peer == 'tensorflow':\n"
        "            import tensorflow as tf\n"
        "            res[peer] = sum(1 for _ in tf.data.TFRecordDataset([sys.argv[1]]))\n"
        "        else:\n"
        "            import tfrecord.reader\n"
        "            res[peer] = sum(1 for _ in tfrecord.reader.tfrecord_iterator(sys.argv[1]))\n"
        "    except Exception as e:\n"
        "        res[peer] = 'ERROR %s: %s' % (type(e).__name__, e)\n"
        "res['ours_again'] = sum(1 for _ in tfrec_fast.read_records(sys.argv[1]))\n"
        "print(json.dumps(res))\n"
    )
    assert run_py(code, p, "tensorflow") == {"ours": n, "tensorflow": n, "ours_again": n}
    assert run_py(code, p, "tfrecord") == {"ours": n, "tfrecord": n, "ours_again": n}
    both = run_py(code, p, "tensorflow", "tfrecord")
    assert both["ours"] == both["ours_again"] == n and both["tensorflow"] == n
    if both["tfrecord"] != n:
        baseline = subprocess.run(
            [sys.executable, "-c", "import tensorflow, tfrecord"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert baseline.returncode != 0, ("tfrecord fails only next to tfrec_fast", both)
