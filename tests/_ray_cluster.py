"""A Ray cluster of two nodes on this machine (ray.cluster_utils.Cluster, 127.0.0.1 only), and a
probe that reports, from inside the tasks that produce a dataset's blocks, where they ran and
which modules their process had loaded."""

from __future__ import annotations

import contextlib
import os
import sys

import pyarrow as pa

# The second node has this custom resource: tasks asking for it can run only there.
WORKER_RESOURCE = "second_node"


@contextlib.contextmanager
def two_node_cluster(object_store_memory: int = 150 << 20):
    """A head node and a worker node of one CPU each; the driver connected to it. Yields
    (cluster, head node id, worker node id)."""
    import ray
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    # Ray takes "127.0.0.1" in an address for "this machine" and connects to the IP it finds for
    # it instead: this flag (read by each Ray process as it starts; the driver's, already
    # started, set here) makes that IP the loopback, which the nodes listen on.
    saved = (
        os.environ.get(ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR),
        ray_constants.ENABLE_RAY_CLUSTER,
    )
    os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    common = dict(num_cpus=1, node_ip_address="127.0.0.1", object_store_memory=object_store_memory)
    cluster = Cluster(initialize_head=True, head_node_args=dict(common, include_dashboard=False))
    try:
        worker = cluster.add_node(resources={WORKER_RESOURCE: 1}, **common)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        # The workers cannot import this test helper: the probe travels by value.
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        yield cluster, cluster.head_node.node_id, worker.node_id
    finally:
        ray.shutdown()
        cluster.shutdown()
        if saved[0] is None:
            os.environ.pop(ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR, None)
        else:
            os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = saved[0]
        ray_constants.ENABLE_RAY_CLUSTER = saved[1]


def probe(batch: pa.Table) -> pa.Table:
    """map_batches function (fused into the read tasks): the batch's rows with the node, the
    process, and whether TensorFlow and tfrec_fast's core are loaded in it."""
    import ray

    n = batch.num_rows
    node = ray.get_runtime_context().get_node_id()
    return (
        batch.append_column("_node", pa.array([node] * n))
        .append_column("_pid", pa.array([os.getpid()] * n))
        .append_column("_tensorflow", pa.array(["tensorflow" in sys.modules] * n))
        .append_column("_tfrec_core", pa.array(["tfrec_fast._core" in sys.modules] * n))
    )
