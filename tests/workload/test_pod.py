"""The pod model: requests after API-server defaulting, QoS class, the effective pod request.

Cases follow component-helpers' PodRequests tests and the kubelet's GetPodQOS tests. One
deliberate difference: upstream's helper tests feed pods that skipped API-server defaulting, so a
container with only a limit has no request there; toposched models pods as the API server stores
them, where a missing request defaults to the limit.
"""

import pytest

from toposched.errors import InputError
from toposched.workload import BEST_EFFORT, BURSTABLE, GUARANTEED, Container, Pod

GI = 2**30


def ctr(name, cpu=None, mem=None, lcpu=None, lmem=None, restart=None, **extra):
    req, lim = {}, {}
    if cpu is not None:
        req["cpu"] = cpu
    if mem is not None:
        req["memory"] = mem
    if lcpu is not None:
        lim["cpu"] = lcpu
    if lmem is not None:
        lim["memory"] = lmem
    req.update(extra)
    return Container(name, req, lim, restart)


@pytest.mark.parametrize(
    ("init", "app", "overhead", "expected"),
    [
        # larger init container wins
        ([ctr("i", cpu=4000)], [ctr("a", cpu=1000)], {}, {"cpu": 4000}),
        # larger app containers win
        ([ctr("i", cpu=2000)], [ctr("a", cpu=2000), ctr("b", cpu=3000)], {}, {"cpu": 5000}),
        # overhead is added on top
        ([ctr("i", cpu=2000, lcpu=2000)], [ctr("a", cpu=2000), ctr("b", cpu=3000)], {"cpu": 1000, "memory": GI},
         {"cpu": 6000, "memory": GI}),
        # massive init container: the largest init container alone
        ([ctr("s", cpu=1000, mem=5), ctr("big", cpu=40000, mem=120)], [ctr("a", cpu=1000, mem=5), ctr("b", cpu=4000, mem=12)],
         {}, {"cpu": 40000, "memory": 120}),
        # a sidecar runs beside the app containers
        ([ctr("side", cpu=1000, restart="Always")], [ctr("a", cpu=1000)], {}, {"cpu": 2000}),
        # two sidecars
        ([ctr("s1", cpu=1000, restart="Always"), ctr("s2", cpu=2000, restart="Always")], [ctr("a", cpu=1000)], {},
         {"cpu": 4000}),
        # a regular init container after a sidecar runs next to it
        ([ctr("s1", cpu=1000, restart="Always"), ctr("i", cpu=2000)], [ctr("a", cpu=1000)], {}, {"cpu": 3000}),
        # mixed: regular 5, sidecar 1, regular 3, sidecar 2, regular 3 -> peak 3 + (1 + 2) = 6
        (
            [ctr("r1", cpu=5000), ctr("s1", cpu=1000, restart="Always"), ctr("r2", cpu=3000),
             ctr("s2", cpu=2000, restart="Always"), ctr("r3", cpu=3000)],
            [ctr("a", cpu=1000)],
            {},
            {"cpu": 6000},
        ),
    ],
)
def test_effective_requests(init, app, overhead, expected):
    pod = Pod("p", containers=tuple(app), init_containers=tuple(init), overhead=overhead)
    assert pod.effective_requests() == expected


def test_limit_only_defaults_the_request():
    c = Container("a", limits={"cpu": 9000})
    assert c.requests == {"cpu": 9000}


@pytest.mark.parametrize(
    ("containers", "init", "qos"),
    [
        ([ctr("a", lcpu=100, lmem=100), ctr("b", lcpu=100, lmem=100)], [], GUARANTEED),
        ([ctr("a", cpu=100, mem=100, lcpu=100, lmem=100)], [ctr("i", lcpu=100, lmem=100)], GUARANTEED),
        ([ctr("a"), ctr("b")], [], BEST_EFFORT),
        ([ctr("a", **{"nvidia.com/gpu": 2})], [], BEST_EFFORT),
        ([ctr("a", lcpu=100, lmem=100), ctr("b")], [], BURSTABLE),
        ([ctr("a", cpu=100)], [], BURSTABLE),
        ([ctr("a", cpu=100, lcpu=200, lmem=100)], [], BURSTABLE),
        ([ctr("a", lcpu=100, lmem=100)], [ctr("i", cpu=10, mem=10)], BURSTABLE),
        ([ctr("a", lcpu=100)], [], BURSTABLE),
    ],
)
def test_qos_class(containers, init, qos):
    assert Pod("p", containers=tuple(containers), init_containers=tuple(init)).qos_class == qos


def test_overhead_does_not_change_qos():
    pod = Pod("p", containers=(ctr("a", lcpu=1000, lmem=GI),), overhead={"cpu": 250})
    assert pod.qos_class == GUARANTEED


def test_from_dict_real_shape():
    pod = Pod.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web-0", "namespace": "prod", "uid": "u1",
                         "annotations": {"toposched.io/numa-policy": "single-numa-node"}},
            "spec": {
                "schedulerName": "toposched",
                "initContainers": [{"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}}],
                "containers": [
                    {"name": "app", "image": "x", "resources": {"limits": {"cpu": "4", "memory": "8Gi", "hugepages-2Mi": "1Gi"}}}
                ],
                "unknownField": {"kept": "ignored"},
            },
        }
    )
    assert pod.key == "prod/web-0" and pod.scheduler_name == "toposched"
    assert pod.container("app").requests == {"cpu": 4000, "memory": 8 * GI, "hugepages-2Mi": GI}
    assert pod.init_containers[0].is_sidecar
    assert pod.effective_requests()["cpu"] == 4100
    assert pod.annotations["toposched.io/numa-policy"] == "single-numa-node"


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        ({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "-1"}}}]}},
         "spec.containers[0].resources.requests.cpu"),
        ({"metadata": {"name": "p"}, "spec": {"containers": [{"resources": {}}]}}, "spec.containers[0].name"),
        ({"metadata": {"name": "p"}, "spec": {"containers": "nope"}}, "spec.containers"),
        ({"metadata": {}, "spec": {}}, "metadata.name"),
        ({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "resources": {"limits": {"memory": "lots"}}}]}},
         "spec.containers[0].resources.limits.memory"),
        # 10^13 CPUs parse as a quantity, but 10^16 millicores are past what toposched counts
        ({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "10000000000000"}}}]}},
         "spec.containers[0].resources.limits.cpu"),
    ],
)
def test_from_dict_errors_name_pod_and_field(obj, field):
    with pytest.raises(InputError) as err:
        Pod.from_dict(obj)
    assert err.value.field == field
    assert "pod default/" in str(err.value) or "metadata.name" in str(err.value)


@pytest.mark.parametrize("value", [-1, 1.5, True, 10**20])
def test_containers_built_in_code_refuse_what_no_manifest_states(value):
    """Negative, fractional and absurd amounts (past 2^63 / 1000: they would overflow the scheduler's
    int64 arrays) are refused when the container is built, naming the container and resource."""
    with pytest.raises(InputError) as err:
        Container("app", limits={"cpu": 1000, "memory": value})
    assert err.value.field == "app.limits.memory"


def test_duplicate_container_names_refused():
    with pytest.raises(InputError, match="repeat"):
        Pod("p", containers=(ctr("a"), ctr("a")))
