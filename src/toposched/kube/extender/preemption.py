"""Would a pod fit on a node once given victims are gone? Asked of a scratch copy of the node's kubelet replica.

kube-scheduler proposes victims from its own view (requests against allocatable, its in-tree
filters). Whether removing them frees CPUs, memory and devices on the NUMA nodes the pod needs
is the kubelet's question, so it is put to a replica: a fresh :class:`KubeletNode` of the same
machine, configuration and devices, into which the node's known pods are admitted again in the
order the cluster keeps them (as :class:`Cluster` rebuilds a replica), the victims are released
as the kubelet releases a deleted pod, and the preemptor is admitted. The live cluster is not
touched, so a preemption that never happens leaves no trace.
"""

from __future__ import annotations

from collections.abc import Iterable

from toposched.kubelet import KubeletNode, fast_merge_hints
from toposched.scheduler import Cluster
from toposched.workload import Pod

__all__ = ["fits_after_eviction"]


def fits_after_eviction(cluster: Cluster, pod: Pod, node: str, victims: Iterable[str]) -> tuple[bool, str]:
    """Whether ``node``'s kubelet would admit ``pod`` once the pods with UIDs ``victims`` are gone, and why not.

    A node without topology data has nothing to add to kube-scheduler's own check (True). Victims
    the cluster does not know on that node hold nothing in the replica and change nothing.
    """
    record = cluster.nodes.get(node)
    if record is None:
        return False, f"node {node} is not in toposched's view of the cluster"
    model = record.model
    if model is None:
        return True, ""
    scratch = KubeletNode(
        model.machine,
        model.config,
        device_plugins={r: list(table.items()) for r, table in model.devices.state.devices.items()},
        extended_resources=model.extended_resources,
        name=model.name,
        merge=fast_merge_hints,
        exhaustive=model.exhaustive,
    )
    preemptor = pod.uid or pod.key
    for uid, entry in sorted(record.pods.items(), key=lambda item: item[1].since):
        if uid != preemptor:
            scratch.admit(entry.pod)
    for uid in victims:
        scratch.release(uid)
    admission = scratch.admit(pod, trial=True)
    if not admission.admitted:
        return False, f"kubelet would reject: {admission.reason}: {admission.message}"
    return True, ""
