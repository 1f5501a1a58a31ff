"""What the device plugins remember between pods is what they would compute afresh.

GPUShare keeps each node's GPU view (shares taken, GPUs the kubelet holds whole, free share per
GPU) until the cluster reports a change of that node or a share is reserved there; DeviceLocality
remembers device choices by the node's hardware, the request, the scope and the free devices, so
nodes of one hardware model share them. On random sequences of GPU pods (whole GPUs with HCAs
under a scope, shares of a GPU) scheduled on 8-GPU servers, bound, unreserved, deleted and joined
by pods another scheduler bound, every node's kept view equals a fresh one, every remembered
choice equals the chooser's answer on the node's current free devices, and GPUShare's filter
refuses a share exactly where the share chooser does, with its reason.
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toposched.devices import DeviceInventory, choose_devices
from toposched.devices.share import Refusal
from toposched.scheduler import Cluster, NodeSpec, Scheduler
from toposched.scheduler.framework import CycleState
from toposched.scheduler.plugins.device_locality import free_devices
from toposched.scheduler.plugins.gpu_share import _NodeGPUs
from toposched.scheduler.profile_setup import load_profile
from toposched.sim.hardware import load_hardware_profile as hardware_profile
from toposched.workload import Container, Pod

GI = 2**30
SERVER = hardware_profile("gpu-8x")


def cluster_of(count: int) -> Cluster:
    cluster = Cluster()
    for i in range(count):
        cluster.set_node(NodeSpec(f"gpu{i}"), machine=SERVER.machine, kubelet_config=SERVER.kubelet,
                         device_plugins={r: list(d) for r, d in (SERVER.device_plugins or {}).items()})
    return cluster


@st.composite
def gpu_pods(draw: st.DrawFn, name: str) -> Pod:
    if draw(st.booleans()):
        gpus = draw(st.sampled_from((1, 2, 4, 8)))
        limits = {"cpu": 2000 * gpus, "memory": 4 * GI * gpus, "nvidia.com/gpu": gpus, "rdma/hca": max(1, gpus // 2)}
        scope = draw(st.sampled_from(("pcie:preferred", "pcie:required", "numa:required", "")))
        annotations = {"toposched.io/device-scope": scope} if scope else {}
        return Pod(name, uid=name, containers=(Container("train", limits=limits),), annotations=annotations)
    percent = draw(st.sampled_from((10, 25, 50, 100)))
    limits = {"koordinator.sh/gpu-core": percent, "koordinator.sh/gpu-memory-ratio": percent}
    return Pod(name, uid=name, containers=(Container("infer", requests={"cpu": 1000, "memory": GI}, limits=limits),))


def plugin(scheduler: Scheduler, name: str):
    return next(p for p in scheduler.profile.filters if p.name == name)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kept_gpu_views_and_remembered_choices_are_fresh_ones(data: st.DataObject) -> None:
    scheduler = Scheduler(cluster_of(3), load_profile("toposched"))
    cluster = scheduler.cluster
    gpu_share, locality = plugin(scheduler, "GPUShare"), plugin(scheduler, "DeviceLocality")
    judge = scheduler.runner.filters_few[scheduler.runner.filters.index(gpu_share)]  # derived from the batch form
    placed: list[Pod] = []
    for i in range(12):
        pod = data.draw(gpu_pods(f"p{i}"), label=f"pod {i}")
        decision = scheduler.schedule(pod, now=float(i))
        action = data.draw(st.sampled_from(("bind", "bind", "unreserve", "delete", "foreign")), label="then")
        if decision.node is not None:
            if action == "unreserve":
                scheduler.unreserve(pod)
            else:
                scheduler.bound(pod, now=float(i))
                placed.append(pod)
        if action == "delete" and placed:
            cluster.forget(placed.pop(0))
        elif action == "foreign":
            other = dataclasses.replace(data.draw(gpu_pods(f"f{i}"), label="foreign"), name=f"f{i}", uid=f"f{i}")
            if "nvidia.com/gpu" in other.containers[0].limits:
                cluster.add_bound_pod(other, f"gpu{i % 3}", now=float(i))
        state = CycleState(cluster=cluster)
        scheduler.table.refresh()
        probe = data.draw(gpu_pods("probe"), label="probe")
        for p in scheduler.profile.pre_filters:
            p.pre_filter(state, probe)
        for node in cluster.nodes.values():
            kept, fresh = gpu_share._gpus(cluster, node), _NodeGPUs(node, gpu_share.default_memory)
            assert (kept.state, kept.busy, kept.free) == (fresh.state, fresh.busy, fresh.free), node.name
            share = state.get("GPUShare.request")
            reason = judge(state, probe, [scheduler.table.index[node.name]])[0]
            if share is not None:  # the refusal is what the chooser says of the GPUs not held whole
                free = [d.id for d in fresh.state.devices if d.id not in fresh.busy]
                choice = fresh.state.choose(share, candidates=free, policy=gpu_share.policy)
                assert (reason is None) == (not isinstance(choice, Refusal)), node.name
                if reason is not None:
                    assert str(reason) == choice.reason
            request, scope = locality._request(state, probe)
            if request and any(node.inventory.of_resource(r) for r in request):
                fresh = choose_devices(node.inventory, request, free_devices(node, request), scope=scope)
                assert locality._choice(state, probe, node) == fresh, node.name


def test_inventories_of_one_hardware_model_share_a_key_and_others_do_not() -> None:
    cluster = cluster_of(2)
    first, second = (cluster.nodes[f"gpu{i}"].inventory for i in range(2))
    assert first is not second and first.key == second.key
    fewer = DeviceInventory(first.devices[:-1], source="smaller")
    assert fewer.key != first.key
    assert DeviceInventory(list(first.devices), source="copy").key == first.key
