"""Adapters to a real cluster: the only package that does network I/O (see docs/kube/)."""
