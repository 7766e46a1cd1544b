"""Tests in this directory run against the local cluster.

The fixtures (kube_cluster, kube_api, kube_namespace) live in fixtures.py and are
registered once for the whole suite in tests/conftest.py, so every package shares one
cluster per session.
"""
