"""GPU model constraints as node selectors: a pod that may only run on some GPU models.

A trace pod's ``gpu_spec`` (``SimPod.gpu_models``) lists the GPU models it may use. In a cluster
that runs NVIDIA's GPU feature discovery, each GPU node carries its model in the
``nvidia.com/gpu.product`` label, and such a pod says so with a node selector. The simulation
writes that selector into the pod every scheduler sees, so each contender's NodeAffinity filter
(and the node's own admission check) keeps the pod off other models:

* one model: ``nodeSelector: {nvidia.com/gpu.product: <model>}``, what a user writes;
* several models: Kubernetes would need a node affinity term ``nvidia.com/gpu.product In
  [A, B]``, which toposched's pod model does not carry (it has ``nodeSelector`` only). The same
  set of nodes is selected with one label per set of models the workload uses,
  ``gpu-products.toposched.io/<A.B>: "true"``, put on every node whose model is in the set.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Iterable, Sequence

from toposched.errors import InputError
from toposched.names import GPU_PRODUCTS_LABEL_PREFIX
from toposched.sim.model import GPU_PRODUCT_LABEL, SimNode, SimPod

__all__ = ["gpu_models_selector", "select_gpu_models"]

_LABEL_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")


def _products_label(models: frozenset[str]) -> str:
    """The label key that marks nodes whose GPU model is one of ``models`` (two or more)."""
    name = ".".join(sorted(models))
    if not _LABEL_NAME.fullmatch(name):  # too long for a label name, or a character labels cannot hold
        name = "sha256-" + hashlib.sha256("|".join(sorted(models)).encode()).hexdigest()[:16]
    return GPU_PRODUCTS_LABEL_PREFIX + name


def gpu_models_selector(models: Iterable[str]) -> dict[str, str]:
    """The node selector that admits exactly the nodes whose GPU model is one of ``models``.

    Empty for no models (any node); ``{nvidia.com/gpu.product: model}`` for one; the label of
    the set (see the module notes) for several.
    """
    wanted = frozenset(models)
    if not wanted:
        return {}
    if len(wanted) == 1:
        return {GPU_PRODUCT_LABEL: next(iter(wanted))}
    return {_products_label(wanted): "true"}


def select_gpu_models(nodes: Sequence[SimNode], pods: Sequence[SimPod]) -> tuple[list[SimNode], list[SimPod]]:
    """The nodes and pods as the schedulers see them: each pod with GPU models carries their selector,
    and each node with a GPU model carries the label of every set of several models (among the
    pods') that includes its model.

    Nodes and pods without anything to add are returned as they are. InputError (naming the pod)
    when a pod's own node selector already asks for a different value of the same label.
    """
    sets = {frozenset(p.gpu_models) for p in pods if len(set(p.gpu_models)) > 1}
    out_pods = []
    for sim_pod in pods:
        selector = gpu_models_selector(sim_pod.gpu_models)
        if not selector:
            out_pods.append(sim_pod)
            continue
        pod = sim_pod.pod
        clash = sorted(k for k, v in selector.items() if pod.node_selector.get(k, v) != v)
        if clash:
            raise InputError(f"the pod's nodeSelector asks for another {clash[0]} than its GPU models "
                             f"{list(sim_pod.gpu_models)}", field="nodeSelector", source=f"pod {pod.key}")
        pod = dataclasses.replace(pod, node_selector={**pod.node_selector, **selector})
        out_pods.append(dataclasses.replace(sim_pod, pod=pod))
    out_nodes = []
    for node in nodes:
        extra = {_products_label(s): "true" for s in sets if node.gpu_model in s}
        out_nodes.append(dataclasses.replace(node, labels={**node.labels, **extra}) if extra else node)
    return out_nodes, out_pods
