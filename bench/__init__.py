"""Benchmarks: run each as ``python -m bench.<name>`` (see ``bench/README.md``)."""
