"""The ledger's invariants under random sequences of scheduling events (a hypothesis state machine).

A :class:`Cluster` and a :class:`Scheduler` run against 1-3 "real" nodes: each real node is an
independent :class:`KubeletNode` (the kubelet's reference code) built from the same machine and
configuration, which admits the pods the cluster binds there, releases deleted ones and
publishes NodeResourceTopology reports. Some nodes are known to the cluster directly (hardware
and kubelet configuration), others only through their reports. Rules: reserve (a scheduling
cycle), unreserve, bind, delete, a foreign pod bound by another scheduler, a report published
(with or without node-feature-discovery's ``nodeTopologyPodsFingerprint``), time passing.

After every step:

* no CPU and no device is owned by two pods of a node;
* no NUMA zone is over-committed: per zone, the pods' exclusive CPUs, pinned memory and
  hugepages, and devices fit what the zone can give;
* ``Cluster.zone_available`` is never negative nor above what the replica itself offers;
* a node's ``requested`` is the sum of its pods' requests, in the cluster and in the replica.

And per step:

* an unreserve right after the reserve restores the node's exact prior state (replica and
  ``zone_available``), and a cycle that places nothing changes nothing;
* when a directly known node's replica holds what its real kubelet holds, the decision's
  placement there is what that kubelet decides for the pod;
* a node whose last report matches its pods, with nothing in flight, offers exactly what its
  real kubelet reports.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import toposched.scheduler.plugins  # noqa: F401  (registers the plugins)
from tests.scheduler.held import assert_node_sums_match_the_ledger
from tests.scheduler.strategies import (
    GI,
    MI,
    NodeShape,
    describe_pod,
    memory_group_cluster,
    memory_pod,
    node_shapes,
    pods,
)
from toposched.kubelet import KubeletConfig, KubeletNode
from toposched.kubelet.memory_manager import hugepage_resource_name
from toposched.scheduler.cluster import FINGERPRINT_ATTRIBUTE, Cluster, placement_of
from toposched.scheduler.fingerprint import pods_fingerprint
from toposched.scheduler.framework import Profile
from toposched.scheduler.nodes import NodeSpec
from toposched.scheduler.scheduler import Scheduler
from toposched.topology import CPUSet, Machine
from toposched.workload import Container, Pod, add_resources


def toposched_profile() -> Profile:
    """toposched's filters and scores as the built-in profile orders them."""
    return Profile.build(
        "toposched",
        filters=["NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodeResourcesFit", "NUMAAlignment"],
        scores=[("NUMAScore", 5), ("NodeResourcesFit", 1)],
        args={"NodeResourcesFit": {"scoringStrategy": {"type": "MostAllocated"}}},
    )


def requests_of(all_pods: list[Pod]) -> dict[str, int]:
    """The summed effective requests of ``all_pods`` and their count, without zero entries."""
    total: dict[str, int] = {}
    for pod in all_pods:
        add_resources(total, pod.effective_requests())
    if all_pods:
        total["pods"] = len(all_pods)
    return {k: v for k, v in total.items() if v}


class LedgerMachine(RuleBasedStateMachine):
    """The cluster's ledger against real kubelets, one random history at a time."""

    @initialize(
        shapes=st.lists(node_shapes(max_numa=4), min_size=1, max_size=3),
        direct=st.lists(st.booleans(), min_size=3, max_size=3),
        reflect_timeout=st.sampled_from((30.0, 120.0)),
    )
    def build(self, shapes: list[NodeShape], direct: list[bool], reflect_timeout: float) -> None:
        self.cluster = Cluster(reflect_timeout=reflect_timeout)
        self.scheduler = Scheduler(self.cluster, toposched_profile())
        self.shapes = {f"n{i}": shape for i, shape in enumerate(shapes)}
        self.real: dict[str, KubeletNode] = {}
        self.real_log: dict[str, list[tuple[bool, Pod]]] = {name: [] for name in self.shapes}  # (admitted?, pod)
        self.direct: set[str] = set()
        self.now = 0.0
        self.count = 0
        self.assumed: dict[str, Pod] = {}
        self.bound: dict[str, Pod] = {}
        self.last_reserve: tuple[Pod, dict[str, object]] | None = None
        for (name, shape), known in zip(self.shapes.items(), direct):
            self.real[name] = shape.kubelet(name)
            if known:
                self.direct.add(name)
                self.cluster.set_node(NodeSpec(name), machine=shape.machine, kubelet_config=shape.config,
                                      device_plugins=shape.devices)
            else:
                self.cluster.update_report(self.real[name].to_nrt(), now=self.now)

    # ---- helpers ---------------------------------------------------------------------------------

    def new_pod(self, data: st.DataObject) -> Pod:
        self.count += 1
        return data.draw(pods(f"p{self.count}"), label=f"pod p{self.count}")

    def snapshot(self) -> dict[str, object]:
        """Every node's replica state, offer and requests."""
        out = {}
        for name, record in self.cluster.nodes.items():
            model = record.model
            if model is None:
                out[name] = (None, None, dict(record.requested))
                continue
            out[name] = (model.state(), self.cluster.zone_available(name), dict(record.requested))
        return out

    def describe(self) -> str:
        nodes = "\n".join(f"  {n} ({'direct' if n in self.direct else 'by report'}): {s!r}" for n, s in self.shapes.items())
        pods_ = "\n".join(f"  {uid} on {node}: {describe_pod(self.cluster.nodes[node].pods[uid].pod)}"
                          for uid, node in sorted(self.cluster.pod_node.items()))
        return f"\n{nodes}\n{pods_}"

    def real_admit(self, node: str, pod: Pod) -> bool:
        """The real kubelet admits (or refuses) the pod; the admission is logged for :meth:`real_copy`."""
        admitted = self.real[node].admit(pod).admitted
        if admitted:
            self.real_log[node].append((True, pod))
        return admitted

    def real_release(self, node: str, pod: Pod) -> None:
        self.real[node].release(pod.uid)
        self.real_log[node].append((False, pod))

    def real_copy(self, node: str) -> KubeletNode:
        """A kubelet in the real node's state (its history replayed), to try a pod on without touching it."""
        probe = self.shapes[node].kubelet(node)
        for admitted, pod in self.real_log[node]:
            if admitted:
                assert probe.admit(pod).admitted
            else:
                probe.release(pod.uid)
        return probe

    # ---- rules -----------------------------------------------------------------------------------

    @rule(data=st.data())
    def reserve(self, data: st.DataObject) -> None:
        pod = self.new_pod(data)
        before = self.snapshot()
        decision = self.scheduler.schedule(pod, now=self.now)
        self.last_reserve = None
        if decision.node is None:
            event("reserve: unschedulable")
            assert self.snapshot() == before, "a cycle that placed nothing changed the cluster" + self.describe()
            return
        event("reserve: placed")
        uid = pod.uid
        self.assumed[uid] = pod
        self.last_reserve = (pod, before)
        node = decision.node
        assert self.cluster.pod_node[uid] == node
        record = self.cluster.nodes[node]
        held = record.pods[uid].placement
        # A count-only replica's ids are not the node's: the decision names NUMA nodes only.
        assert (held.without_ids() if record.count_only else held) == decision.placement
        if node in self.direct and before[node][0] == self.real[node].state():
            # The replica held exactly what the real kubelet holds: it predicted that kubelet.
            admission = self.real_copy(node).admit(pod)
            event("reserve: replica in step with the real kubelet")
            assert admission.admitted, f"the real kubelet would reject {describe_pod(pod)}: {admission.message}" + \
                self.describe()
            assert decision.placement == placement_of(node, admission, pod), (
                    f"placement {decision.placement.to_dict()} is not the real kubelet's "
                    f"{placement_of(node, admission, pod).to_dict()}" + self.describe())

    @precondition(lambda self: self.last_reserve is not None)
    @rule()
    def unreserve_last(self) -> None:
        pod, before = self.last_reserve
        event("unreserve right after its reserve")
        self.scheduler.unreserve(pod)
        del self.assumed[pod.uid]
        self.last_reserve = None
        assert pod.uid not in self.cluster.pod_node
        assert self.snapshot() == before, f"unreserving {pod.name} did not restore the cluster" + self.describe()

    @precondition(lambda self: self.assumed)
    @rule(data=st.data())
    def unreserve_any(self, data: st.DataObject) -> None:
        uid = data.draw(st.sampled_from(sorted(self.assumed)), label="unreserve")
        self.scheduler.unreserve(self.assumed.pop(uid))
        self.last_reserve = None
        assert uid not in self.cluster.pod_node

    @precondition(lambda self: self.assumed)
    @rule(data=st.data())
    def bind(self, data: st.DataObject) -> None:
        uid = data.draw(st.sampled_from(sorted(self.assumed)), label="bind")
        pod = self.assumed.pop(uid)
        node = self.cluster.pod_node[uid]
        self.last_reserve = None
        self.scheduler.bound(pod, now=self.now)
        known = "direct" if node in self.direct else "by report"
        if self.real_admit(node, pod):
            event(f"bind: the real kubelet admitted the pod (node known {known})")
            self.bound[uid] = pod
        else:
            # Out of step with its replica (other pods bound in another order, or a node known by
            # report only), the kubelet refused: the pod fails and is deleted.
            event(f"bind: the real kubelet refused the pod (node known {known})")
            self.cluster.forget(uid)

    @precondition(lambda self: self.bound)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        uid = data.draw(st.sampled_from(sorted(self.bound)), label="delete")
        pod = self.bound.pop(uid)
        event("delete")
        node = self.cluster.pod_node[uid]
        self.cluster.forget(uid)
        self.real_release(node, pod)
        self.last_reserve = None

    @rule(data=st.data())
    def foreign_pod_bound(self, data: st.DataObject) -> None:
        pod = self.new_pod(data)
        node = data.draw(st.sampled_from(sorted(self.shapes)), label="foreign node")
        self.last_reserve = None
        if self.real_admit(node, pod):
            event("foreign pod bound")
            self.cluster.add_bound_pod(pod, node, now=self.now)
            self.bound[pod.uid] = pod

    @rule(data=st.data(), with_fingerprint=st.booleans())
    def report(self, data: st.DataObject, with_fingerprint: bool) -> None:
        node = data.draw(st.sampled_from(sorted(self.shapes)), label="report of")
        real = self.real[node]
        nrt = real.to_nrt()
        if with_fingerprint:
            fingerprint = pods_fingerprint((p.namespace, p.name) for p in real.pods.values())
            nrt = dataclasses.replace(nrt, attributes={**nrt.attributes, FINGERPRINT_ATTRIBUTE: fingerprint})
        self.cluster.update_report(nrt, now=self.now)
        self.last_reserve = None
        record = self.cluster.nodes[node]
        settled = with_fingerprint and not any(e.assumed for e in record.pods.values()) and \
            set(record.pods) == set(real.pods)
        if settled and node in self.direct and record.model.state() == real.state():
            event("report: settled node")
            assert self.cluster.zone_available(node) == real.available(), (
                f"a settled node offers {self.cluster.zone_available(node)}, its kubelet reports {real.available()}"
                + self.describe())

    @rule(seconds=st.sampled_from((1.0, 15.0, 60.0, 150.0)))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds

    # ---- invariants ------------------------------------------------------------------------------

    @invariant()
    def nothing_owned_twice(self) -> None:
        if not hasattr(self, "cluster"):
            return
        for name, record in self.cluster.nodes.items():
            cpus = 0
            devices: set[tuple[str, str]] = set()
            for uid, entry in record.pods.items():
                if entry.placement is None:
                    continue
                mask = entry.placement.cpuset.mask
                assert not cpus & mask, f"{name}: CPUs of {uid} are owned twice" + self.describe()
                cpus |= mask
                for resource, ids in entry.placement.devices().items():
                    for device in ids:
                        assert (resource, device) not in devices, f"{name}: {device} owned twice" + self.describe()
                        devices.add((resource, device))

    @invariant()
    def no_zone_over_committed(self) -> None:
        if not hasattr(self, "cluster"):
            return
        for name, record in self.cluster.nodes.items():
            model = record.model
            if model is None:
                continue
            machine = model.machine
            reserved = model.cpu.reserved_cpus if model.cpu is not None else None
            capacity: dict[int, dict[str, int]] = {}
            for node in machine.numa_nodes:
                hugepages = {hugepage_resource_name(size): size * count for size, count in node.hugepages.items()}
                zone = capacity[node.id] = {"cpu": len(node.cpus - reserved if reserved is not None else node.cpus),
                                            "memory": node.memory_bytes - sum(hugepages.values()), **hugepages}
                if model.memory is not None:
                    for resource, value in model.config.reserved_memory.get(node.id, {}).items():
                        zone[resource] -= value
            for resource, per_zone in model.device_counts().items():
                for numa_id, zone in capacity.items():
                    zone[resource] = per_zone.get(numa_id, 0)
            # Exclusive CPUs and devices per zone, from the placements; app containers reuse their
            # init containers' CPUs and devices, so each pod counts its union once.
            used: dict[tuple[int, ...], dict[str, int]] = {}
            for entry in record.pods.values():
                if entry.placement is None:
                    continue
                cpuset = entry.placement.cpuset
                assert reserved is None or not cpuset & reserved, f"{name}: reserved CPUs handed out" + self.describe()
                assert cpuset <= machine.online
                for cpu in cpuset:
                    add_resources(used.setdefault((machine.cpu(cpu).numa_id,), {}), {"cpu": 1})
                for resource, ids in entry.placement.devices().items():
                    for device in ids:
                        numa = model.devices.state.devices[resource].get(device)
                        if numa is not None and len(numa) == 1:
                            add_resources(used.setdefault((next(iter(numa)),), {}), {resource: 1})
            # Pinned memory and hugepages per zone (or per multi-NUMA group), from the memory
            # manager's blocks: the placements list init-container memory the app containers reuse.
            if model.memory is not None:
                for containers in (model.memory.checkpoint().entries or {}).values():
                    for blocks in (containers or {}).values():
                        for block in blocks or ():
                            key = tuple(sorted(block.numa_affinity or ()))
                            add_resources(used.setdefault(key, {}), {block.type: block.size})
            for key, resources in used.items():
                for resource, value in resources.items():
                    # A group's blocks may also draw on its members' single-NUMA blocks' zones.
                    held = value + (sum(used.get((n,), {}).get(resource, 0) for n in key) if len(key) > 1 else 0)
                    limit = sum(capacity[n].get(resource, 0) for n in key)
                    assert held <= limit, (f"{name}: NUMA {list(key)} over-committed on {resource}: {held} > {limit}"
                                           + self.describe())

    @invariant()
    def zone_available_is_sane(self) -> None:
        if not hasattr(self, "cluster"):
            return
        for name, record in self.cluster.nodes.items():
            if record.model is None:
                continue
            offered = self.cluster.zone_available(name)
            replica = record.model.available()
            for numa_id, resources in offered.items():
                for resource, value in resources.items():
                    assert value >= 0, f"{name}: NUMA {numa_id} offers {value} {resource}" + self.describe()
                    assert value <= replica[numa_id][resource], f"{name}: offers more than its replica has"

    @invariant()
    def node_sums_are_the_sums_over_pods(self) -> None:
        if hasattr(self, "cluster"):
            assert_node_sums_match_the_ledger(self.cluster)

    @invariant()
    def requested_is_the_sum_over_pods(self) -> None:
        if not hasattr(self, "cluster"):
            return
        for name, record in self.cluster.nodes.items():
            assert dict(record.requested) == requests_of([e.pod for e in record.pods.values()]), (
                f"{name}: requested {dict(record.requested)} is not the sum over its pods" + self.describe())
            if record.model is not None:
                assert dict(record.model.requested) == requests_of(list(record.model.pods.values()))
                assert set(record.model.pods) <= set(record.pods)
            for uid in record.pods:
                assert self.cluster.pod_node[uid] == name
        assert set(self.cluster.pod_node) == set(self.assumed) | set(self.bound)


LedgerMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=30, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestLedger = LedgerMachine.TestCase


def test_unreserve_restores_memory_exactly() -> None:
    # The next pod's 1 GiB comes from node 1, the only one with memory left; unreserving it the
    # kubelet's way would give the 1 GiB back to node 0.
    cluster = memory_group_cluster()
    scheduler = Scheduler(cluster, toposched_profile())
    before = (cluster.nodes["n"].model.state(), cluster.zone_available("n"))
    assert scheduler.schedule(memory_pod("small", GI), now=1).node == "n"
    scheduler.unreserve(memory_pod("small", GI))
    assert (cluster.nodes["n"].model.state(), cluster.zone_available("n")) == before


@pytest.mark.parametrize(
    ("reserved", "gpus", "published"),
    [
        pytest.param(CPUSet([0, 1]), (), {"node-0": {"memory"}, "node-1": {"cpu", "memory"}}, id="NUMA node 0 all reserved"),
        pytest.param(None, (("GPU-0", (1,)),), {"node-0": {"cpu", "memory"}, "node-1": {"cpu", "memory", "nvidia.com/gpu"}},
                     id="GPU on NUMA node 1 only"),
    ],
)
def test_reports_publish_what_the_zones_have(reserved: CPUSet | None, gpus: tuple, published: dict[str, set[str]]) -> None:
    machine = Machine.from_cpu_table([{"cpu": c, "core": c, "socket": 0, "numa": c // 2} for c in range(4)],
                                     memory_per_numa=4 * GI)
    kubelet = KubeletNode(machine, KubeletConfig(cpu_manager_policy="static", reserved_system_cpus=reserved),
                          device_plugins={"nvidia.com/gpu": gpus} if gpus else None)
    assert {z.name: {r.name for r in z.resources} for z in kubelet.to_nrt().zones} == published


def test_a_pod_with_an_init_container_is_subtracted_once() -> None:
    # Two NUMA nodes of 4 CPUs and 4 GiB. The pod's init container and app container take 1 CPU
    # and 1 GiB each; the app container reuses the init container's CPU and memory, so the pod
    # holds 1 CPU and 1 GiB of NUMA node 0 and the node still offers 3 CPUs and 3 GiB there.
    machine = Machine.from_cpu_table([{"cpu": c, "core": c, "socket": 0, "numa": c // 4} for c in range(8)],
                                     memory_per_numa=4 * GI)
    config = KubeletConfig(topology_manager_policy="single-numa-node", cpu_manager_policy="static",
                           memory_manager_policy="Static", system_reserved={"memory": 256 * MI},
                           eviction_memory=100 * MI, reserved_memory={1: {"memory": 356 * MI}})
    cluster = Cluster(reflect_timeout=120)
    cluster.set_node(NodeSpec("n"), machine=machine, kubelet_config=config)
    cluster.update_report(KubeletNode(machine, config, name="n").to_nrt(), now=0)
    pod = Pod("p", uid="p", init_containers=(Container("init", limits={"cpu": 1000, "memory": GI}),),
              containers=(Container("app", limits={"cpu": 1000, "memory": GI}),))
    cluster.add_bound_pod(pod, "n", now=1)  # bound, not yet in any report
    assert cluster.nodes["n"].model.available()[0] == {"cpu": 3000, "memory": 3 * GI}
    assert cluster.zone_available("n")[0] == {"cpu": 3000, "memory": 3 * GI}


def test_a_cpu_two_pods_hold_stays_held_when_one_of_them_leaves() -> None:
    # Two placements naming one CPU (a report's ids over the replica's guess can do that): the
    # counts show a CPU held twice, so removing one pod recounts instead of clearing its CPUs.
    from toposched.scheduler.cluster import NodeRecord, PodEntry
    from toposched.scheduler.placement import ContainerPlacement, Placement

    record = NodeRecord(NodeSpec("n"))
    for uid, cpus in (("a", [1, 2]), ("b", [2, 3])):
        placement = Placement("n", frozenset({0}), {"c": ContainerPlacement(CPUSet(cpus), frozenset({0}))})
        record.add(uid, PodEntry(Pod(uid, uid=uid), placement, assumed=True, since=0.0, usage={0: {"cpu": 2000}}))
    assert record.held_cpus == CPUSet([1, 2, 3]).mask and record.held_count == 4
    assert record.unreflected == {0: {"cpu": 4000}}
    record.remove("a")
    assert record.held_cpus == CPUSet([2, 3]).mask and record.held_count == 2
    assert record.unreflected == {0: {"cpu": 2000}}
