"""Scheduler throughput on a realistic cluster: heterogeneous nodes, nearly every pod a new shape, churn.

Nodes (seeded): four hardware shapes (1, 2, 4 and 8 NUMA nodes of 16 two-thread cores, 128 GiB
and 16 x 1 GiB hugepages each), each node with its own kubelet: Topology Manager policy none /
best-effort / restricted / single-numa-node at container or pod scope, CPU manager static or
none, memory manager Static or None; 10% of the nodes are GPU servers (the simulator's
``gpu-8x``, as ``benchmarks/scheduler.py --gpu`` builds them: 8 GPUs and 4 RDMA HCAs).

The cluster is first filled to ``--per-node`` pods a node (~30,000 at 5,000 nodes) by the
scheduler itself, each decision bound. Then ``--pods`` arrivals are timed, each preceded by the
deletion of a random running pod (``Cluster.forget`` with the time, as ``ClusterSync`` does when
a bound pod is deleted; ``--delete-via unreserve`` uses ``Scheduler.unreserve`` instead). Nearly
every pod is a new shape: random CPU millis and MiB; Guaranteed (whole CPUs or millis),
Burstable and BestEffort; some with init containers and sidecars, some with annotations
(NUMA policy, CPU binding, unrelated ones); ~8% GPU pods (whole GPUs with HCAs, or a GPU share).
Every node is evaluated, every placement exact, only the public API is used.
``--percentage-of-nodes-to-score P`` instead looks for P% of the nodes as feasible, in
kube-scheduler's order (``toposched.scheduler.sampling``; 0 is upstream's adaptive share, 10% at
5,000 nodes): what a profile that trades the best node for speed costs.

``--mix wide`` is the same loop on a cluster and pods drawn differently, as a held-out benchmark
would draw them (what a user's cluster has that the default mix lacks):

- hardware of nine shapes: 1, 2, 3, 4, 6, 8 and 16 NUMA nodes, with and without SMT, one or two
  sockets, 1 GiB and 2 MiB hugepages or none, and the simulator's ``intel-snc``, ``epyc-8numa``
  and ``vm-2numa`` profiles; 10% GPU servers, tainted ``nvidia.com/gpu=present:NoSchedule`` as GPU
  pools are (their pods tolerate it), and 5% of the other nodes tainted for a dedicated team;
- kubelets with CPU manager options (``full-pcpus-only``, ``distribute-cpus-across-numa``,
  ``align-by-socket`` where upstream allows it) and Topology Manager options
  (``prefer-closest-numa-nodes``; ``max-allowable-numa-nodes`` on the 16-NUMA machines);
- pods: Guaranteed ones of up to three containers, some with 2 MiB or 1 GiB hugepages or
  ephemeral storage; init containers as large as the app; 10% with a nodeSelector on the nodes'
  zone label; bind and NUMA policy annotations; Burstable pods with CPU limits.

``--replace-every K`` also replaces a node every ``K`` arrivals, as autoscaled pools and spot
instances do: a random node leaves with its pods (``Cluster.remove_node``) and a node of the same
hardware, kubelet, labels and taints joins under a new name. The replacement is timed apart (it
is not a scheduling decision); the decisions after it show what a changing set of nodes costs.

    python benchmarks/realistic.py --nodes 5000 --pods 10000 [--mix wide] [--replace-every K] [--cpu-time] [--json OUT.json]

Prints pods/s, ms per decision (mean, p50, p99, p99.9, max) overall and per class of pod, the classes the
slowest 1% of decisions belong to (what the p99 is made of), peak RSS, and
where the time goes per phase (``--phases``: a second run with the plugins' methods, the
replica's admission, the table refresh and the deletion wrapped with timers on the run's clock;
a plugin's filter includes the per-node or few-rows calls it makes, which are also listed; the
headline figures come from the run without timers), in all and, for the largest phases, per
class of the arriving pod.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from _common import callgrind_instrument, peak_rss_mib, write_json

from toposched.kube.ops import freeze_heap
from toposched.kubelet import KubeletConfig
from toposched.scheduler import Cluster, NodeSpec, Scheduler, Taint, rowloops
from toposched.scheduler.profile_setup import load_profile
from toposched.topology import CPUSet, Machine, NUMANode
from toposched.workload import Container, Pod, Toleration

GI = 2**30
MI = 2**20
POLICIES = ("none", "best-effort", "restricted", "single-numa-node")


def build_machine(numa: int) -> Machine:
    """``numa`` NUMA nodes of 16 two-thread cores, 128 GiB and 16 x 1 GiB pages each, one or two sockets."""
    return wide_machine(numa, 16, 2, 1 if numa == 1 else 2, 128, 16, 0, distances=(12, 32))


def kubelet_config(numa: int, rnd: random.Random) -> KubeletConfig:
    """A random but valid kubelet configuration for a ``numa``-NUMA machine of :func:`build_machine`."""
    cpu = rnd.choice(("static", "static", "none"))
    memory = rnd.choice(("Static", "None"))
    return KubeletConfig(
        topology_manager_policy=rnd.choice(POLICIES),
        topology_manager_scope=rnd.choice(("container", "container", "pod")),
        cpu_manager_policy=cpu,
        reserved_system_cpus=CPUSet([0, 16 * numa]) if cpu == "static" else None,
        kube_reserved={"memory": GI},
        system_reserved={"memory": GI},
        memory_manager_policy=memory,
        reserved_memory={0: {"memory": 2 * GI + 100 * MI}} if memory == "Static" else {},
    )


def build_cluster(n_nodes: int, seed: int, gpu_share: float = 0.1) -> Cluster:
    """``n_nodes`` nodes, hardware and kubelet drawn from ``seed``; ``gpu_share`` of them GPU servers."""
    from toposched.sim.hardware import load_hardware_profile as hardware_profile

    rnd = random.Random(seed)
    machines = {numa: build_machine(numa) for numa in (1, 2, 4, 8)}
    gpu = hardware_profile("gpu-8x")
    gpu_plugins = {r: list(d) for r, d in (gpu.device_plugins or {}).items()}
    configs: dict[tuple, KubeletConfig] = {}  # one object per distinct configuration, as nodes of a pool share one
    cluster = Cluster()
    for i in range(n_nodes):
        name = f"node-{i:05d}"
        if rnd.random() < gpu_share:
            cluster.set_node(NodeSpec(name, labels={"toposched.io/device-enforcement": "kubelet"}),
                             machine=gpu.machine, kubelet_config=gpu.kubelet, device_plugins=gpu_plugins)
            continue
        numa = rnd.choices((1, 2, 4, 8), (20, 35, 30, 15))[0]
        config = kubelet_config(numa, rnd)
        config = configs.setdefault((numa, config.topology_manager_policy, config.topology_manager_scope,
                                     config.cpu_manager_policy, config.memory_manager_policy), config)
        cluster.set_node(NodeSpec(name, labels={"pool": f"numa-{numa}"}), machine=machines[numa], kubelet_config=config)
    return cluster


WIDE_SHAPES = (  # numa, cores per NUMA node, threads per core, sockets, GiB and 1 GiB / 2 MiB pages per NUMA node
    (2, 12, 2, 2, 96, 0, 1024), (4, 8, 1, 2, 64, 4, 0), (6, 10, 2, 2, 80, 0, 0), (3, 16, 2, 1, 60, 2, 512),
    (8, 8, 2, 2, 48, 8, 0), (1, 48, 2, 1, 384, 0, 0),
)
WIDE_PROFILES = ("intel-snc", "epyc-8numa", "vm-2numa")
GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
TEAM_TAINT = Taint("dedicated", "batch", "NoSchedule")
ZONES = ("a", "b", "c")


def wide_machine(numa: int, cores: int, threads: int, sockets: int, gib: int, pages_1g: int, pages_2m: int,
                 distances: tuple[int, int] = (11, 21)) -> Machine:
    """``numa`` NUMA nodes of ``cores`` cores with ``threads`` threads each, on ``sockets`` sockets;
    ``distances`` between NUMA nodes of one socket and of two."""
    total = cores * numa
    per_socket = total // sockets
    rows = [{"cpu": c + t * total, "core": c, "socket": c // per_socket, "numa": c // cores}
            for t in range(threads) for c in range(total)]
    per_socket_numa = max(1, numa // sockets)
    near, far = distances
    base = Machine.from_cpu_table(rows, distances={a: {b: 10 if a == b else (near if a // per_socket_numa == b // per_socket_numa else far)
                                                       for b in range(numa)} for a in range(numa)})
    pages = {size: count for size, count in ((GI, pages_1g), (2 * MI, pages_2m)) if count}
    return Machine(base.cpus, tuple(NUMANode(n.id, n.cpus, gib * GI, pages, n.distances) for n in base.numa_nodes))


def wide_kubelet_config(machine: Machine, rnd: random.Random) -> KubeletConfig:
    """A random kubelet configuration upstream accepts, with CPU manager and Topology Manager options."""
    numa, sockets = len(machine.numa_nodes), len({c.socket_id for c in machine.cpus})
    topology = rnd.choice(POLICIES)
    cpu = rnd.choice(("static", "static", "none"))
    cpu_options: dict[str, str] = {}
    if cpu == "static":
        if rnd.random() < 0.25:
            cpu_options["full-pcpus-only"] = "true"
        if rnd.random() < 0.2:
            cpu_options["distribute-cpus-across-numa"] = "true"
        if rnd.random() < 0.1 and topology != "single-numa-node" and sockets <= numa:
            cpu_options["align-by-socket"] = "true"
    topology_options = {"prefer-closest-numa-nodes": "true"} if rnd.random() < 0.3 else {}
    if numa > 8:
        topology_options["max-allowable-numa-nodes"] = str(numa)
    memory = rnd.choice(("Static", "None"))
    cpus = len(machine.cpus)
    return KubeletConfig(
        topology_manager_policy=topology, topology_manager_scope=rnd.choice(("container", "container", "pod")),
        topology_manager_options=topology_options, cpu_manager_policy=cpu, cpu_manager_options=cpu_options,
        reserved_system_cpus=CPUSet([0, cpus // 2]) if cpu == "static" else None,
        kube_reserved={"memory": GI}, system_reserved={"memory": GI}, memory_manager_policy=memory,
        reserved_memory={0: {"memory": 2 * GI + 100 * MI}} if memory == "Static" else {})


def build_cluster_wide(n_nodes: int, seed: int) -> Cluster:
    """``--mix wide``'s cluster (module notes): ``n_nodes`` nodes drawn from ``seed``."""
    from toposched.sim.hardware import load_hardware_profile as hardware_profile

    rnd = random.Random(seed)
    gpu = hardware_profile("gpu-8x")
    gpu_plugins = {r: list(d) for r, d in (gpu.device_plugins or {}).items()}
    profiles = {name: hardware_profile(name) for name in WIDE_PROFILES}
    machines = [wide_machine(*shape) for shape in WIDE_SHAPES]
    sixteen = wide_machine(16, 4, 2, 2, 32, 1, 256)
    cluster = Cluster()
    for i in range(n_nodes):
        name = f"node-{i:05d}"
        labels = {"topology.kubernetes.io/zone": rnd.choice(ZONES)}
        roll = rnd.random()
        if roll < 0.1:
            cluster.set_node(NodeSpec(name, labels={**labels, "toposched.io/device-enforcement": "kubelet"}, taints=(GPU_TAINT,)),
                             machine=gpu.machine, kubelet_config=gpu.kubelet, device_plugins=gpu_plugins)
            continue
        taints = (TEAM_TAINT,) if rnd.random() < 0.05 else ()
        if roll < 0.3:
            hardware = profiles[rnd.choice(WIDE_PROFILES)]
            cluster.set_node(NodeSpec(name, labels=labels, taints=taints), machine=hardware.machine, kubelet_config=hardware.kubelet)
            continue
        machine = sixteen if roll < 0.32 else rnd.choice(machines)
        cluster.set_node(NodeSpec(name, labels=labels, taints=taints), machine=machine,
                         kubelet_config=wide_kubelet_config(machine, rnd))
    return cluster


def make_pod_wide(i: int, rnd: random.Random) -> Pod:
    """One pod of ``--mix wide`` (module notes), its sizes drawn fresh."""
    name, uid = f"pod-{i:06d}", f"uid-{i:06d}"
    annotations: dict[str, str] = {}
    init: list[Container] = []
    tolerations: tuple[Toleration, ...] = ()
    selector = {"topology.kubernetes.io/zone": rnd.choice(ZONES)} if rnd.random() < 0.1 else {}
    roll = rnd.random()
    if roll < 0.06:  # whole GPUs
        gpus = rnd.choice([1, 2, 4, 8])
        limits = {"cpu": gpus * rnd.randrange(1, 16) * 1000, "memory": gpus * rnd.randrange(1, 40) * GI, "nvidia.com/gpu": gpus}
        if rnd.random() < 0.5:
            limits["rdma/hca"] = 1
        containers = [Container("train", limits=limits)]
        tolerations = (Toleration("nvidia.com/gpu", "Exists"),)
    elif roll < 0.1:  # GPU shares
        percent = rnd.choice([5, 30, 50, 100])
        containers = [Container("infer", requests={"cpu": 1000, "memory": 4 * GI},
                                limits={"koordinator.sh/gpu-core": percent, "koordinator.sh/gpu-memory-ratio": percent})]
        tolerations = (Toleration("nvidia.com/gpu", "Exists"),)
    elif roll < 0.5:  # Guaranteed, up to three containers
        containers = []
        for k in range(rnd.choice([1, 1, 1, 2, 3])):
            limits = {"cpu": rnd.choice([1, 2, 4, 5, 7, 10, 24, 40]) * 1000 if rnd.random() < 0.7 else rnd.randrange(50, 9000),
                      "memory": rnd.randrange(100, 60000) * MI}
            if rnd.random() < 0.1:
                limits["hugepages-2Mi"] = rnd.randrange(1, 200) * 2 * MI
            if rnd.random() < 0.1:
                limits["hugepages-1Gi"] = rnd.randrange(1, 3) * GI
            if rnd.random() < 0.1:
                limits["ephemeral-storage"] = rnd.randrange(1, 20) * GI
            containers.append(Container(f"c{k}", limits=limits))
        if rnd.random() < 0.2:
            init.append(Container("init", limits={"cpu": rnd.randrange(1, 30) * 1000, "memory": GI}))
        if rnd.random() < 0.1:
            init.append(Container("sidecar", limits={"cpu": 500, "memory": 256 * MI}, restart_policy="Always"))
        if rnd.random() < 0.1:
            annotations["toposched.io/numa-policy"] = rnd.choice(["single-numa-node", "restricted", "best-effort", "none"])
        if rnd.random() < 0.1:
            annotations["toposched.io/cpu-bind-policy"] = rnd.choice(["FullPCPUs", "SpreadByPCPUs"])
    elif roll < 0.9:  # Burstable
        containers = [Container("app", requests={"cpu": rnd.randrange(1, 20000), "memory": rnd.randrange(1, 50000) * MI},
                                limits={"cpu": 30000} if rnd.random() < 0.3 else {})]
    else:  # BestEffort, two containers
        containers = [Container("app"), Container("helper")]
    return Pod(name, uid=uid, containers=tuple(containers), init_containers=tuple(init), annotations=annotations,
               node_selector=selector, tolerations=tolerations)


def make_pod(i: int, rnd: random.Random) -> Pod:
    """One pod of the realistic mix, its sizes drawn fresh (nearly every pod a new shape)."""
    name, uid = f"pod-{i:06d}", f"uid-{i:06d}"
    annotations: dict[str, str] = {}
    if rnd.random() < 0.3:
        annotations["app.kubernetes.io/version"] = f"v{rnd.randrange(50)}"
    init: list[Container] = []
    roll = rnd.random()
    if roll < 0.08:  # GPU pods
        if rnd.random() < 0.5:
            gpus = rnd.choices([1, 2, 4, 8], [40, 30, 20, 10])[0]
            limits = {"cpu": rnd.randrange(2, 12) * 1000 * gpus, "memory": rnd.randrange(8 * 1024, 64 * 1024) * MI * gpus,
                      "nvidia.com/gpu": gpus, "rdma/hca": max(1, gpus // 2)}
            annotations["toposched.io/device-scope"] = "pcie:preferred"
            containers = [Container("train", limits=limits)]
        else:
            percent = rnd.choice([10, 20, 25, 50])
            containers = [Container("infer", requests={"cpu": rnd.randrange(500, 4000), "memory": rnd.randrange(1024, 16384) * MI},
                                    limits={"koordinator.sh/gpu-core": percent, "koordinator.sh/gpu-memory-ratio": percent})]
    elif roll < 0.43:  # Guaranteed
        if rnd.random() < 0.6:
            cpu = rnd.choices([1, 2, 3, 4, 6, 8, 12, 16], [20, 25, 8, 18, 6, 12, 4, 3])[0] * 1000
        else:
            cpu = rnd.randrange(100, 8000)
        limits = {"cpu": cpu, "memory": rnd.randrange(256, 32 * 1024) * MI}
        if rnd.random() < 0.1:
            limits["hugepages-1Gi"] = rnd.choice([1, 2, 4]) * GI
        containers = [Container("app", limits=limits)]
        if rnd.random() < 0.2:
            containers.append(Container("proxy", limits={"cpu": rnd.choice([100, 200, 500, 1000]), "memory": rnd.randrange(64, 512) * MI}))
        if rnd.random() < 0.15:
            init.append(Container("init", limits={"cpu": rnd.randrange(100, 2000), "memory": rnd.randrange(64, 1024) * MI}))
        if rnd.random() < 0.05:
            annotations["toposched.io/numa-policy"] = rnd.choice(["single-numa-node", "restricted", "best-effort"])
        if rnd.random() < 0.05:
            annotations["toposched.io/cpu-bind-policy"] = rnd.choice(["FullPCPUs", "SpreadByPCPUs"])
    elif roll < 0.88:  # Burstable
        containers = [Container("app", requests={"cpu": rnd.randrange(50, 4000), "memory": rnd.randrange(64, 8192) * MI},
                                limits={"memory": rnd.randrange(8192, 16384) * MI} if rnd.random() < 0.5 else {})]
        if rnd.random() < 0.25:
            init.append(Container("sidecar", requests={"cpu": rnd.randrange(10, 500), "memory": rnd.randrange(32, 256) * MI},
                                  restart_policy="Always"))
        if rnd.random() < 0.15:
            init.append(Container("migrate", requests={"cpu": rnd.randrange(100, 1000), "memory": rnd.randrange(64, 512) * MI}))
    else:  # BestEffort
        containers = [Container("app")]
    return Pod(name, uid=uid, containers=tuple(containers), init_containers=tuple(init), annotations=annotations)


MIXES: dict[str, tuple[Callable[[int, int], Cluster], Callable[[int, random.Random], Pod]]] = {
    "default": (build_cluster, make_pod),
    "wide": (build_cluster_wide, make_pod_wide),
}


class PhaseTimer:
    """Wraps the profile's plugin methods with timers: seconds per (phase, plugin), in all and per
    kind of the pod arriving (``kind``, set by the run before each deletion and arrival)."""

    METHODS = {
        "pre_filter": "prefilter", "filter": "filter", "filter_all": "filter", "filter_few": "filter",
        "pre_score": "prescore", "score": "score", "score_all": "score", "score_few": "score",
        "normalize_scores": "normalize", "confirm": "confirm", "reserve": "reserve", "unreserve": "unreserve",
        "post_bind": "postbind",
    }

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock  # the run's clock: CPU time with --cpu-time, so phases add up to the total
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._running: set[str] = set()  # labels being timed now (a nested call under the same label is not counted twice)
        self.kind = ""
        self.by_kind: dict[tuple[str, str], float] = defaultdict(float)

    def wrap_plugins(self, profile: Any) -> None:
        """Time every plugin method the profile's plugins have (before a scheduler is built on it)."""
        seen: set[int] = set()
        plugins = [*profile.pre_filters, *profile.filters, *(p for p, _ in profile.scores), *profile.pre_scores,
                   *profile.reserves, *profile.pre_binds]
        for plugin in plugins:
            if id(plugin) in seen:
                continue
            seen.add(id(plugin))
            for method, phase in self.METHODS.items():
                fn = getattr(plugin, method, None)
                if fn is not None:
                    setattr(plugin, method, self.timed(f"{phase}/{plugin.name}", fn))

    def wrap(self, obj: Any, method: str, label: str) -> None:
        """Time ``obj.method`` under ``label``."""
        setattr(obj, method, self.timed(label, getattr(obj, method)))

    def timed(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn``, adding its time to ``label``."""
        clock = self.clock
        seconds, calls, running, by_kind = self.seconds, self.calls, self._running, self.by_kind

        def run(*args: Any, **kwargs: Any) -> Any:
            if label in running:  # called from a method timed under the same label (filter_all -> filter): counted there
                return fn(*args, **kwargs)
            running.add(label)
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = clock() - t0
                seconds[label] += spent
                by_kind[(self.kind, label)] += spent
                calls[label] += 1
                running.discard(label)
        return run


def kind(pod: Pod) -> str:
    """The pod's class in the mix, for latencies per class."""
    if any("/" in r for c in pod.all_containers for r in c.limits_or_requests):
        return "gpu"
    if "toposched.io/cpu-bind-policy" in pod.annotations:
        return "bind-policy"
    return pod.qos_class


def decision_record(decision: Any) -> list[Any]:
    """What must not change between two versions of the scheduler: the node and the exact placement."""
    placement = decision.placement.to_dict() if decision.placement is not None else None
    return [decision.pod, decision.node, placement]


def replace_node(cluster: Cluster, running: list[Pod], rnd: random.Random, serial: int) -> list[Pod]:
    """A random node leaves with its pods and one of its kind joins as ``joined-<serial>``; the
    running pods that are left."""
    leaving = rnd.choice(sorted(cluster.nodes))
    record = cluster.nodes[leaving]
    model = record.model
    cluster.remove_node(leaving)
    spec = NodeSpec(f"joined-{serial:06d}", labels=record.spec.labels, taints=record.spec.taints)
    if model is not None:
        cluster.set_node(spec, machine=model.machine, kubelet_config=model.config)
    else:
        cluster.set_node(spec)
    return [pod for pod in running if (pod.uid or pod.key) in cluster.pod_node]


def run(n_nodes: int, pods: int, seed: int, per_node: float = 6.0, clock: Callable[[], float] = time.perf_counter,
        delete_via: str = "forget", phases: bool = False, record: list | None = None,
        callgrind: bool = False, mix: str = "default", replace_every: int = 0,
        percentage: int | None = None) -> dict[str, Any]:
    """Build, pre-fill, then time ``pods`` arrivals each after a deletion. ``record`` collects every
    decision; ``callgrind`` switches callgrind's instrumentation on for the timed loop only; ``mix``
    names the cluster and pods (:data:`MIXES`); ``replace_every`` replaces a node every that many
    arrivals (0: never); ``percentage`` replaces the profile's percentageOfNodesToScore (100:
    every node, the issue's measure)."""
    t0 = time.perf_counter()
    build, make_pod = MIXES[mix]
    cluster = build(n_nodes, seed)
    profile = load_profile("toposched")
    if percentage is not None:
        profile.percentage_of_nodes_to_score = percentage
    timer = PhaseTimer(clock) if phases else None
    if timer is not None:
        timer.wrap_plugins(profile)
        timer.wrap(cluster, "assume", "reserve/kubelet replica admission")
    scheduler = Scheduler(cluster, profile)
    if timer is not None:
        timer.wrap(scheduler.table, "refresh", "table refresh")
    rnd = random.Random(seed + 1)
    running: list[Pod] = []
    now = 0.0
    prefill = int(per_node * n_nodes)
    fill_start = time.perf_counter()
    for i in range(prefill):
        pod = make_pod(i, rnd)
        now += 0.01
        decision = scheduler.schedule(pod, now=now)
        if record is not None:
            record.append(decision_record(decision))
        if decision.node is not None:
            scheduler.bound(pod, now=now)
            running.append(pod)
    fill_s = time.perf_counter() - fill_start
    build_s = time.perf_counter() - t0 - fill_s
    freeze_heap()  # as `toposched scheduler` does once the cluster is listed
    if timer is not None:
        timer.seconds.clear()
        timer.calls.clear()
        timer.by_kind.clear()
        timer.wrap(cluster, "forget", "delete/forget")
        timer.wrap(scheduler, "bound", "bound")
    arrivals = [make_pod(prefill + i, rnd) for i in range(pods)]
    victims = [rnd.random() for _ in range(pods)]
    latencies, delete_times, replace_times, scheduled = [], [], [], 0
    churn = random.Random(seed + 2)  # which nodes leave: apart from the pods' draws
    if callgrind:
        callgrind_instrument(True)
    start = clock()
    for i, pod in enumerate(arrivals):
        now += 0.01
        if timer is not None:
            timer.kind = kind(pod)
        if replace_every and i % replace_every == replace_every - 1:
            t_replace = clock()
            running = replace_node(cluster, running, churn, len(replace_times))
            replace_times.append((clock() - t_replace) * 1000)
        t1 = clock()
        if running:
            k = int(victims[i] * len(running))
            running[k], running[-1] = running[-1], running[k]
            victim = running.pop()
            if delete_via == "unreserve":
                scheduler.unreserve(victim)
            else:
                cluster.forget(victim, now)
        t2 = clock()
        decision = scheduler.schedule(pod, now=now)
        t3 = clock()
        delete_times.append((t2 - t1) * 1000)
        latencies.append((t3 - t2) * 1000)
        if record is not None:
            record.append(decision_record(decision))
        if decision.node is not None:
            scheduler.bound(pod, now=now)
            running.append(pod)
            scheduled += 1
    elapsed = clock() - start
    if callgrind:
        callgrind_instrument(False)
    gc.unfreeze()
    mean = statistics.fmean(latencies)
    by_kind: dict[str, list[float]] = defaultdict(list)
    for pod, ms in zip(arrivals, latencies):
        by_kind[kind(pod)].append(ms)
    ordered = sorted(latencies)
    # Which classes of pod make the slowest 1% (what the p99 is made of).
    slowest = sorted(range(len(latencies)), key=latencies.__getitem__)[-max(1, len(latencies) // 100):]
    tail = Counter(kind(arrivals[i]) for i in slowest)
    figures: dict[str, Any] = {
        "nodes": n_nodes,
        "mix": mix,
        "pods": pods,
        "running_at_start": prefill,
        "scheduled": scheduled,
        "pods_per_second": pods / elapsed,
        "mean_ms": mean,
        "p50_ms": ordered[len(ordered) // 2],
        "p99_ms": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
        "p999_ms": ordered[min(len(ordered) - 1, int(0.999 * len(ordered)))],
        "max_ms": ordered[-1],
        "delete_mean_ms": statistics.fmean(delete_times),
        "replaced_nodes": len(replace_times),
        "replace_mean_ms": statistics.fmean(replace_times) if replace_times else 0.0,
        "table_rows": scheduler.table.size,
        "by_kind": {k: {"pods": len(v), "mean_ms": statistics.fmean(v), "p99_ms": sorted(v)[min(len(v) - 1, int(0.99 * len(v)))]}
                    for k, v in sorted(by_kind.items())},
        "slowest_1pct_by_kind": dict(tail.most_common()),
        "build_seconds": build_s,
        "prefill_seconds": fill_s,
        "seconds": elapsed,
    }
    if timer is not None:
        total = sum(latencies) / 1000
        figures["phases_ms_per_pod"] = {k: v * 1000 / pods for k, v in sorted(timer.seconds.items())}
        figures["phases_calls"] = dict(sorted(timer.calls.items()))
        figures["phases_ms_per_pod"]["schedule (all of it)"] = total * 1000 / pods
        per_kind: dict[str, dict[str, float]] = defaultdict(dict)
        for (name, label), spent in sorted(timer.by_kind.items()):
            per_kind[name][label] = spent * 1000 / len(by_kind[name])
        figures["phases_ms_per_pod_by_kind"] = dict(sorted(per_kind.items()))
    return figures


def digest(records: list) -> str:
    """A stable digest of decision records."""
    return hashlib.sha256(json.dumps(records, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--per-node", type=float, default=6.0, help="pods a node placed before the timed arrivals")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--mix", choices=sorted(MIXES), default="default",
                        help="the cluster and pods: the default mix, or 'wide' (other hardware, kubelet options, taints, selectors)")
    parser.add_argument("--delete-via", choices=("forget", "unreserve"), default="forget")
    parser.add_argument("--replace-every", type=int, default=0, metavar="K",
                        help="replace a random node by a new one of its kind every K arrivals (0: never)")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time with this process's CPU time instead of wall time (for a busy machine)")
    parser.add_argument("--phases", action="store_true", help="also a second run with per-phase timers")
    parser.add_argument("--digest", action="store_true", help="print a digest of every decision (node and placement); "
                        "converting and keeping them slows the timed loop: time without it")
    parser.add_argument("--callgrind", action="store_true",
                        help="under valgrind --tool=callgrind --instr-atstart=no: count the timed loop's instructions only")
    parser.add_argument("--percentage-of-nodes-to-score", type=int, default=None, metavar="P",
                        help="look for P%% of the nodes as feasible, as kube-scheduler does (0: its adaptive share); "
                        "default: the toposched profile's 100, every node")
    parser.add_argument("--numpy-forms", action="store_true",
                        help="run the plugins' row loops in their NumPy forms, as an install without a C compiler does")
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    if args.numpy_forms:
        rowloops.compiled = None
    clock = time.process_time if args.cpu_time else time.perf_counter
    unit = " (CPU time)" if args.cpu_time else ""
    records: list | None = [] if args.digest else None
    figures = run(args.nodes, args.pods, args.seed, args.per_node, clock, args.delete_via, record=records,
                  callgrind=args.callgrind, mix=args.mix, replace_every=args.replace_every,
                  percentage=args.percentage_of_nodes_to_score)
    figures["clock"] = "cpu" if args.cpu_time else "wall"
    figures["row_loops"] = "compiled" if rowloops.compiled is not None else "numpy"
    figures["percentage_of_nodes_to_score"] = args.percentage_of_nodes_to_score
    print(f"{figures['nodes']} heterogeneous nodes ({args.mix} mix), {figures['running_at_start']} pods running, "
          f"{figures['pods']} arrivals each after a deletion: {figures['pods_per_second']:.0f} pods/s{unit}, "
          f"mean {figures['mean_ms']:.2f} ms, p50 {figures['p50_ms']:.2f} ms, p99 {figures['p99_ms']:.2f} ms, "
          f"p99.9 {figures['p999_ms']:.2f} ms, max {figures['max_ms']:.2f} ms, deletion {figures['delete_mean_ms']:.3f} ms, "
          f"scheduled {figures['scheduled']} (built in {figures['build_seconds']:.1f} s, "
          f"pre-filled in {figures['prefill_seconds']:.1f} s; row loops {figures['row_loops']})", flush=True)
    if figures["replaced_nodes"]:
        print(f"  {figures['replaced_nodes']} nodes replaced ({figures['replace_mean_ms']:.2f} ms each); "
              f"the table has {figures['table_rows']} rows for {args.nodes} nodes", flush=True)
    for name, row in figures["by_kind"].items():
        print(f"  {name:12s} {row['pods']:6d} pods  mean {row['mean_ms']:.2f} ms  p99 {row['p99_ms']:.2f} ms", flush=True)
    print("  the slowest 1%: " + ", ".join(f"{n} {k}" for k, n in figures["slowest_1pct_by_kind"].items()), flush=True)
    if records is not None:
        figures["digest"] = digest(records)
        print(f"decisions digest {figures['digest']}", flush=True)
    if args.phases:
        timed = run(args.nodes, args.pods, args.seed, args.per_node, clock, args.delete_via, phases=True, mix=args.mix,
                    replace_every=args.replace_every, percentage=args.percentage_of_nodes_to_score)
        figures["phases_ms_per_pod"] = timed["phases_ms_per_pod"]
        figures["phases_calls"] = timed["phases_calls"]
        figures["phases_run_mean_ms"] = timed["mean_ms"]
        print(f"where the time goes (ms per arrival, timed run: mean {timed['mean_ms']:.3f} ms):", flush=True)
        pods_n = args.pods
        for label, ms in sorted(timed["phases_ms_per_pod"].items(), key=lambda kv: -kv[1]):
            print(f"  {label:45s} {ms:8.4f}  ({timed['phases_calls'].get(label, pods_n)} calls)", flush=True)
        figures["phases_ms_per_pod_by_kind"] = timed["phases_ms_per_pod_by_kind"]
        print("the largest phases per kind of pod (ms per pod of that kind):", flush=True)
        for name, phases in timed["phases_ms_per_pod_by_kind"].items():
            largest = sorted(phases.items(), key=lambda kv: -kv[1])[:6]
            print(f"  {name:12s} " + ", ".join(f"{label} {ms:.3f}" for label, ms in largest), flush=True)
    figures["peak_rss_mib"] = peak_rss_mib()
    print(f"peak RSS {figures['peak_rss_mib']:.0f} MiB", flush=True)
    write_json(args.json_out, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
