"""The extender fed by ClusterSync from an API server, as it runs: watch events and verbs share the service's lock.

A bound pod's MODIFIED event arrives after the extender's own bind; the ledger must then hold
the pod once, on the node and CPUs the bind wrote, and the next pod must get other CPUs.
"""

from tests.kube.extender.scenario import Clock, machine, node_object, pod_object
from tests.kube.memory_client import MemoryClient
from toposched.kube.client import NODES, NRTS, PODS
from toposched.kube.cluster_sync import ClusterSync
from toposched.kube.extender import ExtenderArgs, ExtenderBindingArgs, ExtenderService
from toposched.scheduler import Cluster, Scheduler
from toposched.scheduler.placement import PLACEMENT_ANNOTATION, Placement
from toposched.scheduler.profile_setup import load_profile
from toposched.topology import CPUSet
from toposched.topology.nrt import dump_nrt, nrt_from_machine


def test_bind_then_the_watch_event_keeps_one_ledger_entry_and_the_next_pod_gets_other_cpus():
    client = MemoryClient(clock=lambda: 1_700_000_000.0)
    for name in ("n1", "n2"):
        node = node_object(name)
        del node["metadata"]["resourceVersion"]  # the API server sets it
        client.create(NODES, node)
        nrt = nrt_from_machine(machine(), node_name=name, policy="single-numa-node", reserved_cpus=CPUSet([0]))
        client.create(NRTS, dump_nrt(nrt))
    for name in ("p1", "p2"):
        client.create(PODS, pod_object(name, 4), namespace="default")
    clock = Clock()
    scheduler = Scheduler(Cluster(), load_profile("toposched"))
    service = ExtenderService(scheduler, clock=clock, client=client)
    sync = ClusterSync(scheduler, clock=clock)
    with service.lock:
        sync.relist_nodes(client.list(NODES).items)
        sync.relist_nrts(client.list(NRTS).items)
        listed = client.list(PODS)
        sync.relist_pods(listed.items)
    assert sync.ready

    def cycle(name):
        obj = client.get(PODS, name, namespace="default")
        result = service.filter(ExtenderArgs.model_validate({"Pod": obj, "NodeNames": ["n1", "n2"]}))
        node = result.node_names[0]
        bound = service.bind(ExtenderBindingArgs(PodName=name, PodNamespace="default",
                                                 PodUID=obj["metadata"]["uid"], Node=node))
        assert bound.error == ""
        return obj["metadata"]["uid"], node

    uid1, node1 = cycle("p1")
    seen = []
    for event in client.watch(PODS, resource_version=listed.resource_version, timeout_seconds=0):
        with service.lock:
            sync.on_pod(event)
        seen.append((event.type, event.object["spec"].get("nodeName")))
    assert seen[-1] == ("MODIFIED", node1)  # the annotation patch, then the binding
    entry = scheduler.cluster.nodes[node1].pods[uid1]
    written = Placement.from_annotation(client.get(PODS, "p1", namespace="default")["metadata"]["annotations"][
        PLACEMENT_ANNOTATION])
    assert entry.placement.cpuset == written.cpuset and not entry.assumed
    assert [uid for uid, node in scheduler.cluster.pod_node.items() if uid == uid1] == [uid1]
    uid2, node2 = cycle("p2")
    assert node2 == node1  # the profile packs
    assert scheduler.cluster.nodes[node2].pods[uid2].placement.cpuset.isdisjoint(written.cpuset)
