#!/usr/bin/env bash
# Regenerates src/toposched/kube/agent/podresources/api_pb2.py from api.proto beside it.
#
# Needs grpcio-tools 1.75.1 (a generation tool, not a runtime dependency) in $PYTHON's
# environment (default: .venv):  .venv/bin/python -m pip install 'grpcio-tools==1.75.1'
# Its protoc stamps the file "Protobuf Python Version: 6.31.1", and the file refuses to load on
# an older protobuf runtime: pyproject.toml requires protobuf>=6.31.1 to match. A newer
# grpcio-tools stamps a newer version; raise that bound with it.
set -euo pipefail
cd "$(dirname "$0")/../src"
PYTHON="${PYTHON:-../.venv/bin/python}"
"$PYTHON" -m grpc_tools.protoc -I. --python_out=. toposched/kube/agent/podresources/api.proto
