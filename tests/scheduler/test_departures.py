"""Departures are credited at once: a zone offers what the node's kubelet has free, whatever the order.

The node publishes reports with the pods fingerprint at random moments; pods are placed by the
scheduler (and admitted by the node's kubelet when bound) and leave at random moments. Whatever
the interleaving, every zone offers exactly what the node's kubelet has free: placements the
last report does not show are subtracted from it, departures it still counts are added back.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from toposched.kubelet import KubeletConfig, KubeletNode
from toposched.node_report import node_report
from toposched.scheduler import Cluster, NodeSpec, Scheduler
from toposched.scheduler.placement import PLACEMENT_ANNOTATION
from toposched.scheduler.profile_setup import load_profile
from toposched.topology import CPUSet, Machine
from toposched.topology.nrt import parse_nrt
from toposched.workload import Container, Pod

GiB = 1 << 30
NODE = "n"
CONFIG = KubeletConfig(topology_manager_policy="single-numa-node", cpu_manager_policy="static",
                       reserved_system_cpus=CPUSet([0, 8]))


def machine() -> Machine:
    rows = [{"cpu": c + t * 8, "core": c, "socket": c // 4, "numa": c // 4} for t in range(2) for c in range(8)]
    return Machine.from_cpu_table(rows, memory_per_numa=16 * GiB)


class Departures(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.kubelet = KubeletNode(machine(), CONFIG, name=NODE)
        self.cluster = Cluster(reflect_timeout=1e9)  # only the fingerprint says a report shows a pod
        self.cluster.set_node(NodeSpec(NODE, allocatable={"cpu": 14000, "memory": 32 * GiB, "pods": 110}))
        self.scheduler = Scheduler(self.cluster, load_profile("toposched"))
        self.running: dict[str, Pod] = {}
        self.placements: dict[str, str] = {}
        self.now = 0.0
        self.count = 0
        self.publish()

    def publish(self) -> None:
        pods = [{"metadata": {"name": p.name, "namespace": p.namespace, "uid": uid,
                              "annotations": {PLACEMENT_ANNOTATION: self.placements[uid]}},
                 "spec": {"nodeName": NODE}, "status": {"phase": "Running"}} for uid, p in self.running.items()]
        report = node_report(machine(), CONFIG, node_name=NODE, cpu_state=self.kubelet.cpu.to_checkpoint(), pods=pods)
        self.cluster.update_report(parse_nrt(json.loads(json.dumps(report))), self.now)

    @rule(cpus=st.integers(1, 3), gib=st.integers(1, 4))
    def place(self, cpus: int, gib: int) -> None:
        self.now += 1
        self.count += 1
        limits = {"cpu": cpus * 1000, "memory": gib * GiB}
        pod = Pod(f"p{self.count}", uid=f"p{self.count}", containers=(Container("c", requests=limits, limits=limits),),
                  scheduler_name="toposched")
        decision = self.scheduler.schedule(pod, self.now)
        if decision.node is None:
            return
        self.scheduler.bound(pod, self.now)
        admission = self.kubelet.admit(pod)
        assert admission.admitted, admission.message  # the replica predicted this kubelet
        self.running[pod.uid] = pod
        self.placements[pod.uid] = decision.placement.to_annotation()

    @precondition(lambda self: self.running)
    @rule(which=st.integers(0, 50))
    def depart(self, which: int) -> None:
        self.now += 1
        uid = sorted(self.running)[which % len(self.running)]
        self.kubelet.release(uid)
        self.cluster.forget(self.running.pop(uid), self.now)
        self.placements.pop(uid)

    @rule()
    def report(self) -> None:
        self.now += 1
        self.publish()

    @invariant()
    def zones_offer_what_the_kubelet_has_free(self) -> None:
        offered = self.cluster.zone_available(NODE)
        truth = self.kubelet.available()
        for numa_id, resources in truth.items():
            for name in ("cpu", "memory"):
                assert offered[numa_id][name] == resources[name], (numa_id, name, offered, truth)


TestDepartures = Departures.TestCase
TestDepartures.settings = settings(max_examples=60, stateful_step_count=30, deadline=None,
                                   suppress_health_check=[HealthCheck.too_slow])
