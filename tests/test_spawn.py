"""DataLoader workers started by spawn (the default on macOS and Windows), exercised here on
Linux: the datasets pickle, each worker opens its own files, the shared-memory ring works, every
record comes once, and set_epoch reaches persistent workers."""

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.torch
pytest.importorskip("torch")

SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import tfrec_fast as tfr
    from tfrec_fast.torch import IndexedTFRecordDataset, TFRecordDataset, collate

    def main(directory):
        paths = []
        for f in range(3):
            path = f"{directory}/part-{f}.tfrecord"
            with tfr.TFRecordWriter(path) as w:
                for i in range(50):
                    w.write_example({"id": [f * 50 + i], "x": [float(i)] * 3})
            paths.append(path)
        spec = {"id": tfr.FixedLen((), "int64"), "x": tfr.FixedLen((3,), "float32")}
        streaming = TFRecordDataset(paths, spec=spec, batch_size=16)
        loader = torch.utils.data.DataLoader(streaming, batch_size=None, num_workers=2,
                                             multiprocessing_context="spawn")
        ids = sorted(int(i) for batch in loader for i in batch["id"])
        assert ids == list(range(150)), ids
        from tfrec_fast.torch import _worker_ring
        assert _worker_ring._rings, "the batches never came through the shared-memory ring"
        indexed = IndexedTFRecordDataset(paths, spec=spec)
        loader = torch.utils.data.DataLoader(indexed, batch_size=10, shuffle=True,
                                             num_workers=2, multiprocessing_context="spawn")
        ids = sorted(int(i) for batch in loader for i in batch["id"])
        assert ids == list(range(150)), ids
        _worker_ring._rings.clear()  # the indexed dataset's batches through the ring too
        loader = torch.utils.data.DataLoader(indexed, batch_size=10, shuffle=True,
                                             num_workers=2, multiprocessing_context="spawn",
                                             collate_fn=collate)
        ids = sorted(int(i) for batch in loader for i in batch["id"])
        assert ids == list(range(150)), ids
        assert _worker_ring._rings, "collate's batches never came through the ring"
        # the epoch reaches spawned persistent workers (shared memory sent through torch)
        def orders(ds, persistent):
            loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2,
                                                 persistent_workers=persistent,
                                                 multiprocessing_context="spawn")
            out = []
            for epoch in range(2):
                ds.set_epoch(epoch)
                out.append([int(r["id"]) for r in loader])
            return out
        shuffled = dict(spec=spec, shuffle_buffer=16, seed=3)
        persistent = orders(TFRecordDataset(paths, **shuffled), True)
        assert persistent == orders(TFRecordDataset(paths, **shuffled), False)
        assert persistent[0] != persistent[1] and sorted(persistent[1]) == list(range(150))
        print("ok")

    if __name__ == "__main__":
        main(sys.argv[1])
""")


def test_dataloader_workers_under_spawn(tmp_path):
    script = tmp_path / "spawn_loader.py"
    script.write_text(SCRIPT)
    out = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-4000:]
