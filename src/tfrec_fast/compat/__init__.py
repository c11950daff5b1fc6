"""Drop-in replacements for other TFRecord libraries: switching is an import change.

- ``tfrec_fast.compat.tfrecord``: the ``tfrecord`` package (vahidk/tfrecord), module for module.
"""
