"""toposched: topology-aware scheduling for Kubernetes."""

__version__ = "0.1.0"
