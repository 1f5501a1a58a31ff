"""The hostile-input corpus: malformed files and flags for every command (issue 19).

Each :class:`Case` names the files it writes (in a folder of its own), the ``toposched``
arguments (``{d}`` stands for that folder) and words the one-line error must contain (the file,
the field, the limit). The CLI corpus is run by ``test_cli_corpus.py``; the extender's
requests are in ``test_extender_corpus.py``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

FIFO = object()  # a file entry that is made a FIFO
DEV_ZERO_LINK = object()  # a symlink to /dev/zero
SPARSE_HUGE = object()  # a sparse file larger than the input size cap


@dataclass
class Case:
    """One hostile invocation: files to write, arguments, and words its error must contain."""

    id: str
    argv: list[str]
    files: dict[str, Any] = field(default_factory=dict)
    expect: tuple[str, ...] = ()
    stdin: bytes | None = None
    setup: Callable[[Any], None] | None = None  # extra preparation of the folder (a pathlib.Path)


# ---- good objects, mutated below ----------------------------------------------------------------

GOOD_POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "web", "namespace": "default", "annotations": {"a": "b"}},
    "spec": {"containers": [{"name": "app", "resources": {"limits": {"cpu": "2", "memory": "2Gi"}}}]},
}

GOOD_NODE = {
    "apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-a"},
    "status": {"capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
               "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}},
}


def good_nrt() -> dict:
    """A small v1alpha2 NodeResourceTopology for worker-a: 2 zones of 8 CPUs and 32 GiB."""
    zones = []
    for z in range(2):
        zones.append({"name": f"node-{z}", "type": "Node",
                      "costs": [{"name": f"node-{o}", "value": 10 if o == z else 21} for o in range(2)],
                      "resources": [
                          {"name": "cpu", "capacity": "8", "allocatable": "8", "available": "8"},
                          {"name": "memory", "capacity": "32Gi", "allocatable": "32Gi", "available": "32Gi"}]})
    return {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
            "metadata": {"name": "worker-a"},
            "topologyPolicies": ["SingleNUMANodeContainerLevel"],
            "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"},
                           {"name": "topologyManagerScope", "value": "container"}],
            "zones": zones}


def dump(obj: Any) -> str:
    return yaml.safe_dump(obj, sort_keys=False)


def _set(obj: dict, path: tuple, value: Any) -> dict:
    out = copy.deepcopy(obj)
    target = out
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return out


_DELETE = object()
C0 = ("spec", "containers", 0)
LIM = (*C0, "resources", "limits")
REQ = (*C0, "resources", "requests")

# (id, path, value, words the error must contain)
POD_MUTATIONS: list[tuple[str, tuple, Any, tuple[str, ...]]] = [
    ("cpu-inf", (*LIM, "cpu"), float("inf"), ("cpu",)),
    ("cpu-nan", (*LIM, "cpu"), float("nan"), ("cpu",)),
    ("cpu-neg-inf", (*LIM, "cpu"), float("-inf"), ("cpu",)),
    ("cpu-1e400-text", (*LIM, "cpu"), "1e400", ("cpu",)),
    ("cpu-5000-digits-text", (*LIM, "cpu"), "9" * 5000, ("cpu",)),
    ("cpu-huge-int", (*LIM, "cpu"), 10**30, ("cpu",)),
    ("cpu-negative", (*LIM, "cpu"), "-1", ("cpu",)),
    ("cpu-bool", (*LIM, "cpu"), True, ("cpu",)),
    ("cpu-list", (*LIM, "cpu"), [1, 2], ("cpu",)),
    ("cpu-mapping", (*LIM, "cpu"), {"a": 1}, ("cpu",)),
    ("cpu-null", (*LIM, "cpu"), None, ("cpu",)),
    ("cpu-unit-junk", (*LIM, "cpu"), "2 cores", ("cpu",)),
    ("cpu-unknown-suffix", (*LIM, "cpu"), "2Xi", ("cpu",)),
    ("cpu-empty", (*LIM, "cpu"), "", ("cpu",)),
    ("memory-over-int64-milli", (*LIM, "memory"), "9Ei", ("memory",)),
    ("memory-1e19", (*LIM, "memory"), "1e19", ("memory",)),
    ("memory-exponent-absurd", (*LIM, "memory"), "1e99999", ("memory",)),
    ("memory-float-huge", (*LIM, "memory"), 1e300, ("memory",)),
    ("gpu-half", (*LIM, "nvidia.com/gpu"), "0.5", ("nvidia.com/gpu",)),
    ("gpu-milli", (*LIM, "nvidia.com/gpu"), "500m", ("nvidia.com/gpu",)),
    ("gpu-request-only", REQ, {"nvidia.com/gpu": "1"}, ("nvidia.com/gpu",)),
    ("gpu-request-ne-limit", (*C0, "resources"), {"requests": {"nvidia.com/gpu": "1"},
                                                  "limits": {"nvidia.com/gpu": "2"}}, ("nvidia.com/gpu",)),
    ("request-above-limit", (*C0, "resources"), {"requests": {"cpu": "4"}, "limits": {"cpu": "2"}}, ("cpu",)),
    ("memory-request-above-limit", (*C0, "resources"), {"requests": {"memory": "4Gi"}, "limits": {"memory": "2Gi"}},
     ("memory",)),
    ("resource-name-space", (*LIM, "c p u"), "1", ("c p u",)),
    ("resource-name-empty", (*LIM, ""), "1", ("limits",)),
    ("resource-name-slashes", (*LIM, "a/b/c"), "1", ("a/b/c",)),
    ("resource-name-unqualified", (*LIM, "gpus"), "1", ("gpus",)),
    ("hugepages-fraction", (*C0, "resources"), {"limits": {"hugepages-2Mi": "1.5", "memory": "1Gi", "cpu": "1"}},
     ("hugepages-2Mi",)),
    ("hugepages-bad-size", (*LIM, "hugepages-3Xi"), "2Mi", ("hugepages-3Xi",)),
    ("resources-list", (*C0, "resources"), ["cpu"], ("resources",)),
    ("limits-string", LIM, "cpu=2", ("limits",)),
    ("containers-empty", ("spec", "containers"), [], ("containers",)),
    ("containers-missing", ("spec", "containers"), _DELETE, ("containers",)),
    ("containers-mapping", ("spec", "containers"), {"name": "app"}, ("containers",)),
    ("containers-string", ("spec", "containers"), "app", ("containers",)),
    ("container-not-mapping", ("spec", "containers"), ["app"], ("containers",)),
    ("container-no-name", (*C0, "name"), _DELETE, ("name",)),
    ("container-name-int", (*C0, "name"), 7, ("name",)),
    ("container-name-bad", (*C0, "name"), "App_1", ("name",)),
    ("container-name-long", (*C0, "name"), "a" * 64, ("name",)),
    ("containers-duplicate", ("spec", "containers"), [{"name": "app"}, {"name": "app"}], ("app",)),
    ("init-dup-with-app", ("spec", "initContainers"), [{"name": "app"}], ("app",)),
    ("name-list", ("metadata", "name"), ["a", "b"], ("metadata.name",)),
    ("name-mapping", ("metadata", "name"), {"a": 1}, ("metadata.name",)),
    ("name-bad-chars", ("metadata", "name"), "Web Server!", ("metadata.name",)),
    ("name-too-long", ("metadata", "name"), "a" * 254, ("metadata.name",)),
    ("name-int", ("metadata", "name"), 12, ("metadata.name",)),
    ("namespace-path", ("metadata", "namespace"), "default/pods?x=", ("metadata.namespace",)),
    ("namespace-dots", ("metadata", "namespace"), "a.b", ("metadata.namespace",)),
    ("namespace-list", ("metadata", "namespace"), ["x"], ("metadata.namespace",)),
    ("annotation-int", ("metadata", "annotations"), {"a": 1}, ("annotations",)),
    ("annotation-list", ("metadata", "annotations"), {"a": [1, 2]}, ("annotations",)),
    ("annotation-mapping", ("metadata", "annotations"), {"a": {"b": "c"}}, ("annotations",)),
    ("annotation-null", ("metadata", "annotations"), {"a": None}, ("annotations",)),
    ("annotation-bool", ("metadata", "annotations"), {"a": True}, ("annotations",)),
    ("annotation-bad-key", ("metadata", "annotations"), {"bad key!": "x"}, ("annotations",)),
    ("annotations-list", ("metadata", "annotations"), ["a"], ("annotations",)),
    ("label-int", ("metadata", "labels"), {"a": 1}, ("labels",)),
    ("label-bad-value", ("metadata", "labels"), {"a": "has space"}, ("labels",)),
    ("numa-policy-unknown", ("metadata", "annotations"), {"toposched.io/numa-policy": "sometimes"},
     ("numa-policy",)),
    ("cpu-bind-unknown", ("metadata", "annotations"), {"toposched.io/cpu-bind-policy": "Everywhere"},
     ("cpu-bind-policy",)),
    ("metadata-list", ("metadata",), ["a"], ("metadata",)),
    ("spec-string", ("spec",), "x", ("spec",)),
    ("nodename-list", ("spec", "nodeName"), ["a"], ("nodeName",)),
    ("nodename-bad", ("spec", "nodeName"), "Bad Name/../!", ("nodeName",)),
    ("priority-string", ("spec", "priority"), "high", ("priority",)),
    ("priority-huge", ("spec", "priority"), 2**40, ("priority",)),
    ("tolerations-string", ("spec", "tolerations"), "all", ("tolerations",)),
    ("tolerations-item-int", ("spec", "tolerations"), [1], ("tolerations",)),
    ("node-selector-list", ("spec", "nodeSelector"), ["a"], ("nodeSelector",)),
    ("overhead-nan", ("spec", "overhead"), {"cpu": float("nan")}, ("overhead",)),
    ("restart-policy-int", (*C0, "restartPolicy"), 3, ("restartPolicy",)),
    ("scheduler-name-list", ("spec", "schedulerName"), ["x"], ("schedulerName",)),
]

NODE_MUTATIONS: list[tuple[str, tuple, Any, tuple[str, ...]]] = [
    ("status-string", ("status",), "Ready", ("status",)),
    ("status-list", ("status",), ["x"], ("status",)),
    ("allocatable-string", ("status", "allocatable"), "cpu=4", ("allocatable",)),
    ("allocatable-cpu-inf", ("status", "allocatable", "cpu"), float("inf"), ("allocatable",)),
    ("allocatable-cpu-nan", ("status", "allocatable", "cpu"), float("nan"), ("allocatable",)),
    ("allocatable-1e400", ("status", "allocatable", "memory"), "1e400", ("allocatable",)),
    ("allocatable-negative", ("status", "allocatable", "cpu"), "-4", ("allocatable",)),
    ("allocatable-digits", ("status", "allocatable", "memory"), "1" * 5000, ("allocatable",)),
    ("allocatable-huge-int", ("status", "allocatable", "memory"), 10**40, ("allocatable",)),
    ("allocatable-bad-name", ("status", "allocatable", "c p u"), "4", ("c p u",)),
    ("allocatable-gpu-fraction", ("status", "allocatable", "nvidia.com/gpu"), "1.5", ("nvidia.com/gpu",)),
    ("capacity-list", ("status", "capacity"), [1], ("capacity",)),
    ("name-missing", ("metadata", "name"), _DELETE, ("name",)),
    ("name-bad", ("metadata", "name"), "Worker A", ("metadata.name",)),
    ("name-list", ("metadata", "name"), ["a"], ("metadata.name",)),
    ("name-too-long", ("metadata", "name"), "a" * 300, ("metadata.name",)),
    ("metadata-string", ("metadata",), "x", ("metadata",)),
    ("labels-int-value", ("metadata", "labels"), {"a": 5}, ("labels",)),
    ("labels-list", ("metadata", "labels"), ["a"], ("labels",)),
    ("taints-string", ("spec",), {"taints": "NoSchedule"}, ("taints",)),
    ("taints-bad-item", ("spec",), {"taints": [5]}, ("taints",)),
    ("unschedulable-string", ("spec",), {"unschedulable": "yes"}, ("unschedulable",)),
    ("spec-list", ("spec",), [1], ("spec",)),
]

NRT_ZONE0 = ("zones", 0)
NRT_CPU = (*NRT_ZONE0, "resources", 0)
NRT_MUTATIONS: list[tuple[str, tuple, Any, tuple[str, ...]]] = [
    ("available-above-capacity", (*NRT_CPU, "available"), "9", ("available",)),
    ("allocatable-above-capacity", (*NRT_CPU, "allocatable"), "9", ("allocatable",)),
    ("capacity-inf", (*NRT_CPU, "capacity"), float("inf"), ("capacity",)),
    ("capacity-nan", (*NRT_CPU, "capacity"), float("nan"), ("capacity",)),
    ("capacity-1e400", (*NRT_CPU, "capacity"), "1e400", ("capacity",)),
    ("capacity-digits", (*NRT_CPU, "capacity"), "7" * 5000, ("capacity",)),
    ("capacity-negative", (*NRT_CPU, "capacity"), "-8", ("capacity",)),
    ("capacity-list", (*NRT_CPU, "capacity"), [8], ("capacity",)),
    ("cpu-fraction", (*NRT_CPU, "capacity"), "7.5", ("capacity",)),
    ("cpu-count-huge", NRT_CPU, {"name": "cpu", "capacity": "100000", "allocatable": "100000",
                                 "available": "100000"}, ("cpu",)),
    ("unknown-policy-attr", ("attributes", 0, "value"), "sometimes", ("topologyManagerPolicy",)),
    ("unknown-scope-attr", ("attributes", 1, "value"), "galaxy", ("topologyManagerScope",)),
    ("topology-policies-int", ("topologyPolicies",), [5], ("topologyPolicies",)),
    ("attributes-string", ("attributes",), "x", ("attributes",)),
    ("attribute-value-int", ("attributes", 0, "value"), 5, ("attributes",)),
    ("zones-string", ("zones",), "all", ("zones",)),
    ("zones-empty", ("zones",), [], ("zones",)),
    ("zone-no-name", (*NRT_ZONE0, "name"), _DELETE, ("name",)),
    ("zone-name-int", (*NRT_ZONE0, "name"), 0, ("name",)),
    ("zone-type-unknown", (*NRT_ZONE0, "type"), "Galaxy", ("type",)),
    ("zone-dup", ("zones", 1, "name"), "node-0", ("node-0",)),
    ("cost-inf", (*NRT_ZONE0, "costs", 1, "value"), float("inf"), ("costs",)),
    ("cost-huge", (*NRT_ZONE0, "costs", 1, "value"), 10**30, ("costs",)),
    ("cost-unknown-zone", (*NRT_ZONE0, "costs", 1, "name"), "node-9", ("costs",)),
    ("resources-mapping", (*NRT_ZONE0, "resources"), {"cpu": 8}, ("resources",)),
    ("resource-dup", (*NRT_ZONE0, "resources", 1, "name"), "cpu", ("cpu",)),
    ("resource-name-bad", (*NRT_ZONE0, "resources", 1, "name"), "m e m", ("m e m",)),
    ("name-bad", ("metadata", "name"), "Bad Name/../!", ("metadata.name",)),
    ("name-list", ("metadata", "name"), ["a"], ("metadata.name",)),
    ("api-version-unknown", ("apiVersion",), "topology.node.k8s.io/v9", ("apiVersion",)),
    ("many-zones-many-devices", ("zones",),
     [{"name": f"node-{i}", "type": "Node", "resources": [
         {"name": "cpu", "capacity": "1", "allocatable": "1", "available": "1"},
         {"name": "nvidia.com/gpu", "capacity": "4096", "allocatable": "4096", "available": "4096"}]}
      for i in range(1000)], ("devices",)),
    ("many-zones", ("zones",), [{"name": f"node-{i}", "type": "Node", "resources": []} for i in range(10000)],
     ("zones",)),
]


def _mutated(base: dict, path: tuple, value: Any) -> dict:
    return _set(base, path, value)


# Generic file-level attacks, applied to every flag that reads a file.
ALIAS_BOMB = """\
a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""

FILE_ATTACKS: list[tuple[str, Any, tuple[str, ...]]] = [
    ("missing", None, ("no such file",)),
    ("directory", "DIR", ("directory",)),
    ("fifo", FIFO, ("FIFO",)),
    ("dev-zero-link", DEV_ZERO_LINK, ("character device",)),
    ("over-size-cap", SPARSE_HUGE, ("limit",)),
    ("binary", b"\x00\x01\x02\xff\xfe" * 100, ("UTF-8",)),
    ("latin1", "caf\xe9: 1\n".encode("latin-1"), ("UTF-8",)),
    ("alias-bomb", ALIAS_BOMB, ("alias",)),
    ("self-alias", "a: &a [*a]\n", ("alias",)),
    ("duplicate-keys", "kind: Pod\nkind: Node\nmetadata: {name: x}\n", ("repeats",)),
    ("json-duplicate-keys", '{"kind": "Pod", "kind": "Node"}', ("repeats",)),
    ("json-nan", '{"kind": "Pod", "x": NaN}', ("NaN",)),
    ("json-infinity", '{"kind": "Pod", "x": -Infinity}', ("Infinity",)),
    ("json-1e400", '{"kind": "Pod", "x": 1e400}', ("range",)),
    ("yaml-5000-digit-int", "kind: Pod\nx: " + "9" * 5000 + "\n", ("YAML",)),
    ("json-5000-digit-int", '{"kind": "Pod", "x": ' + "9" * 5000 + "}", ("JSON",)),
    ("deep-yaml", "[" * 5000 + "]" * 5000, ("nested",)),
    ("deep-json", "[" * 100000 + "]" * 100000, ("nested",)),
    ("invalid-yaml", "kind: Pod\n  bad: [\n", ("YAML",)),
    ("invalid-json", '{"kind": ', ("JSON",)),
    ("python-tag", "!!python/object/apply:os.system ['true']\n", ("YAML",)),
    ("scalar", "just a string\n", ()),
    ("empty", "", ()),
]


# Attacks whose words hold for any file reader; the others are about YAML/JSON text only.
_ANY_FORMAT = {"missing", "directory", "fifo", "dev-zero-link", "over-size-cap", "binary"}


def _file_cases(command: str, flag: str, base_argv: list[str], base_files: dict[str, Any], *,
                yaml_reader: bool = True) -> list[Case]:
    out = []
    for attack, content, words in FILE_ATTACKS:
        files = dict(base_files)
        if content is not None:
            files["target"] = content
        argv = [command, *base_argv, flag, "{d}/target"]
        expect = words if (yaml_reader or attack in _ANY_FORMAT) else ()
        if attack == "binary" and not yaml_reader:
            expect = ()
        out.append(Case(f"{command}{flag}:{attack}", argv, files, ("target", *expect)))
    return out


def pod_cases() -> list[Case]:
    """``explain --pod`` with each pod mutation."""
    base = {"nodes.yaml": dump(GOOD_NODE), "nrt.yaml": dump(good_nrt())}
    out = []
    for name, path, value, words in POD_MUTATIONS:
        pod = _mutated(GOOD_POD, path, value)
        text = dump(pod)
        files = {**base, "pod.yaml": text}
        out.append(Case(f"explain-pod:{name}", ["explain", "--pod", "{d}/pod.yaml", "--node", "{d}/nodes.yaml",
                                                "--nrt", "{d}/nrt.yaml"], files, ("pod.yaml", *words)))
    return out


def _has_float_special(value: Any) -> bool:
    text = repr(value)
    return "inf" in text or "nan" in text


def node_cases() -> list[Case]:
    """``explain --node`` with each Node mutation."""
    out = []
    for name, path, value, words in NODE_MUTATIONS:
        node = _mutated(GOOD_NODE, path, value)
        files = {"pod.yaml": dump(GOOD_POD), "nodes.yaml": dump(node)}
        out.append(Case(f"explain-node:{name}", ["explain", "--pod", "{d}/pod.yaml", "--node", "{d}/nodes.yaml"],
                        files, ("nodes.yaml", *words)))
    return out


def nrt_cases() -> list[Case]:
    """``discover --nrt`` and ``explain --nrt`` with each NodeResourceTopology mutation."""
    out = []
    for name, path, value, words in NRT_MUTATIONS:
        nrt = _mutated(good_nrt(), path, value)
        out.append(Case(f"discover-nrt:{name}", ["discover", "--nrt", "{d}/nrt.yaml"], {"nrt.yaml": dump(nrt)},
                        ("nrt.yaml", *words)))
    for name, path, value, words in NRT_MUTATIONS[:12]:
        if name == "cpu-count-huge":  # a count-only node's numbers drive no work; discover --nrt refuses it
            continue
        nrt = _mutated(good_nrt(), path, value)
        files = {"pod.yaml": dump(GOOD_POD), "nodes.yaml": dump(GOOD_NODE)}
        out.append(Case(f"explain-nrt-stdin:{name}", ["explain", "--pod", "{d}/pod.yaml", "--node",
                                                      "{d}/nodes.yaml", "--nrt", "-"], files,
                        ("stdin", *words), stdin=dump(nrt).encode()))
    return out


KUBELET = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: static\n"


def flag_cases() -> list[Case]:
    """Flags with bad values."""
    nrt = {"nrt.yaml": dump(good_nrt())}
    pod = {"pod.yaml": dump(GOOD_POD), "nodes.yaml": dump(GOOD_NODE)}
    explain = ["explain", "--pod", "{d}/pod.yaml", "--node", "{d}/nodes.yaml"]
    return [
        Case("discover:node-name-bad", ["discover", "--nrt", "{d}/nrt.yaml", "-o", "nrt", "--node-name", "Bad Name/../!"],
             nrt, ("--node-name",)),
        Case("discover:node-name-empty-ish", ["discover", "--nrt", "{d}/nrt.yaml", "-o", "nrt", "--node-name", "-x-"],
             nrt, ("--node-name",)),
        Case("discover:node-name-long", ["discover", "--nrt", "{d}/nrt.yaml", "-o", "nrt", "--node-name", "a" * 300],
             nrt, ("--node-name",)),
        Case("discover:policy-unknown", ["discover", "--nrt", "{d}/nrt.yaml", "-o", "nrt", "--policy", "sometimes"],
             nrt, ("--policy",)),
        Case("discover:scope-unknown", ["discover", "--nrt", "{d}/nrt.yaml", "-o", "nrt", "--scope", "galaxy"],
             nrt, ("--scope",)),
        Case("discover:cpu-policy-unknown", ["discover", "--nrt", "{d}/nrt.yaml", "-o", "nrt",
                                             "--cpu-manager-policy", "dynamic"], nrt, ("--cpu-manager-policy",)),
        Case("discover:two-sources", ["discover", "--nrt", "{d}/nrt.yaml", "--hwloc", "{d}/nrt.yaml"], nrt,
             ("at most one",)),
        Case("discover:sysfs-not-dir", ["discover", "--sysfs", "{d}/nrt.yaml"], nrt, ("directory",)),
        Case("discover:sysfs-missing", ["discover", "--sysfs", "{d}/nope"], nrt, ("no such",)),
        Case("discover:sysfs-empty-dir", ["discover", "--sysfs", "{d}/empty"], nrt, ("sysfs",),
             setup=lambda d: (d / "empty").mkdir()),
        Case("discover:kubelet-reserved-huge", ["discover", "--nrt", "{d}/nrt.yaml", "-o", "nrt", "--kubelet-config",
                                                "{d}/k.yaml"], {**nrt, "k.yaml": KUBELET + 'reservedSystemCPUs: "0-99999999"\n'},
             ("k.yaml", "reservedSystemCPUs")),
        Case("discover:kubelet-reserved-garbage", ["discover", "--nrt", "{d}/nrt.yaml", "-o", "nrt", "--kubelet-config",
                                                   "{d}/k.yaml"], {**nrt, "k.yaml": KUBELET + 'reservedSystemCPUs: "zero"\n'},
             ("k.yaml", "reservedSystemCPUs")),
        Case("discover:kubelet-reserved-list", ["discover", "--nrt", "{d}/nrt.yaml", "-o", "nrt", "--kubelet-config",
                                                "{d}/k.yaml"], {**nrt, "k.yaml": KUBELET + "reservedSystemCPUs: [0, 1]\n"},
             ("k.yaml", "reservedSystemCPUs")),
        Case("discover:kubelet-policy-unknown", ["discover", "--nrt", "{d}/nrt.yaml", "-o", "nrt", "--kubelet-config",
                                                 "{d}/k.yaml"], {**nrt, "k.yaml": KUBELET + "topologyManagerPolicy: often\n"},
             ("k.yaml", "topologyManagerPolicy")),
        Case("discover:kubelet-kind-wrong", ["discover", "--nrt", "{d}/nrt.yaml", "-o", "nrt", "--kubelet-config",
                                             "{d}/k.yaml"], {**nrt, "k.yaml": "kind: Pod\n"}, ("k.yaml", "kind")),
        Case("discover:kubelet-reserved-inf", ["discover", "--nrt", "{d}/nrt.yaml", "-o", "nrt", "--kubelet-config",
                                               "{d}/k.yaml"], {**nrt, "k.yaml": KUBELET + "kubeReserved: {cpu: .inf}\n"},
             ("k.yaml", "kubeReserved")),
        Case("explain:no-nodes", ["explain", "--pod", "{d}/pod.yaml"], pod, ("--node",)),
        Case("explain:profile-unknown", [*explain, "--profile", "nope"], pod, ("nope",)),
        Case("explain:config-alias-bomb", [*explain, "--config", "{d}/cfg.yaml"], {**pod, "cfg.yaml": ALIAS_BOMB},
             ("alias",)),
        Case("explain:config-list", [*explain, "--config", "{d}/cfg.yaml"], {**pod, "cfg.yaml": "[1, 2]\n"},
             ("cfg.yaml",)),
        Case("explain:nrt-stdin-empty", [*explain, "--nrt", "-"], pod, ("stdin",), stdin=b""),
        Case("explain:nrt-stdin-binary", [*explain, "--nrt", "-"], pod, ("stdin",), stdin=b"\xff\xfe\x00" * 50),
        Case("explain:nrt-stdin-bomb", [*explain, "--nrt", "-"], pod, ("alias",), stdin=ALIAS_BOMB.encode()),
        Case("explain:pod-of-nodes", ["explain", "--pod", "{d}/nodes.yaml", "--node", "{d}/nodes.yaml"], pod,
             ("Pod",)),
        Case("explain:pod-list-of-ints", ["explain", "--pod", "{d}/p.yaml", "--node", "{d}/nodes.yaml"],
             {**pod, "p.yaml": "[1, 2, 3]\n"}, ("Pod",)),
        Case("explain:node-list-items-string", ["explain", "--pod", "{d}/pod.yaml", "--node", "{d}/n.yaml"],
             {**pod, "n.yaml": "kind: List\nitems: nope\n"}, ("items",)),
        Case("explain:node-dup-names", ["explain", "--pod", "{d}/pod.yaml", "--node", "{d}/n.yaml"],
             {**pod, "n.yaml": dump({"kind": "List", "items": [GOOD_NODE, GOOD_NODE]})}, ("worker-a",)),
    ]


def file_cases() -> list[Case]:
    """Every file-reading flag of discover, explain and simulate, with each file-level attack."""
    pod = {"pod.yaml": dump(GOOD_POD), "nodes.yaml": dump(GOOD_NODE)}
    out = []
    out += _file_cases("explain", "--pod", ["--node", "{d}/nodes.yaml"], pod)
    out += _file_cases("explain", "--node", ["--pod", "{d}/pod.yaml"], pod)
    out += _file_cases("explain", "--nrt", ["--pod", "{d}/pod.yaml", "--node", "{d}/nodes.yaml"], pod)
    out += _file_cases("discover", "--nrt", [], {})
    out += _file_cases("discover", "--hwloc", [], {}, yaml_reader=False)
    out += _file_cases("discover", "--kubelet-config", ["--nrt", "{d}/nrt.yaml", "-o", "nrt"],
                       {"nrt.yaml": dump(good_nrt())})
    out += _file_cases("simulate", "--scenario", ["--report", "{d}/out"], {})
    small = {"s.yaml": dump(SMALL_SCENARIO)}
    out += _file_cases("simulate", "--nodes", ["--scenario", "{d}/s.yaml", "--report", "{d}/out"], small)
    out += _file_cases("simulate", "--pods", ["--scenario", "{d}/s.yaml", "--report", "{d}/out"], small)
    out += _file_cases("explain", "--config", ["--pod", "{d}/pod.yaml", "--node", "{d}/nodes.yaml"], pod,
                       yaml_reader=False)  # the profile loader words its YAML errors its own way
    return out


SMALL_SCENARIO = {
    "name": "small", "seed": 1,
    "nodes": [{"profile": "vm-2numa", "count": 2}],
    "workload": {"synthetic": {"pods": 10}},
    "simulation": {"reportInterval": 60},
    "schedulers": ["toposched"],
}

SCENARIO_MUTATIONS: list[tuple[str, tuple, Any, tuple[str, ...]]] = [
    ("report-interval-tiny", ("simulation", "reportInterval"), 1e-9, ("reportInterval", "limit")),
    ("report-interval-zero", ("simulation", "reportInterval"), 0, ("reportInterval",)),
    ("report-interval-inf", ("simulation", "reportInterval"), float("inf"), ("reportInterval",)),
    ("report-interval-nan", ("simulation", "reportInterval"), float("nan"), ("reportInterval",)),
    ("report-interval-string", ("simulation", "reportInterval"), "often", ("reportInterval",)),
    ("retry-interval-tiny", ("simulation", "retryInterval"), 1e-6, ("retryInterval",)),
    ("sample-interval-tiny", ("simulation", "sampleInterval"), 1e-12, ("sampleInterval",)),
    ("backoff-nan", ("simulation", "backoff"), float("nan"), ("backoff",)),
    ("max-backoff-inf", ("simulation", "maxBackoff"), float("inf"), ("maxBackoff",)),
    ("horizon-inf", ("simulation", "horizon"), float("inf"), ("horizon",)),
    ("horizon-nan", ("simulation", "horizon"), float("nan"), ("horizon",)),
    ("max-recreations-huge", ("simulation", "maxRecreations"), 10**12, ("maxRecreations",)),
    ("report-on-events-string", ("simulation", "reportOnEvents"), "yes", ("reportOnEvents",)),
    ("simulation-list", ("simulation",), [1], ("simulation",)),
    ("node-count-huge", ("nodes", 0, "count"), 10**9, ("count",)),
    ("node-count-1e7", ("nodes", 0, "count"), 10**7, ("count",)),
    ("node-count-zero", ("nodes", 0, "count"), 0, ("nodes",)),
    ("node-count-negative", ("nodes", 0, "count"), -3, ("count",)),
    ("node-count-float", ("nodes", 0, "count"), 2.5, ("count",)),
    ("node-count-string", ("nodes", 0, "count"), "many", ("count",)),
    ("nodes-empty", ("nodes",), [], ("nodes",)),
    ("nodes-string", ("nodes",), "all", ("nodes",)),
    ("node-profile-unknown", ("nodes", 0, "profile"), "cray-1", ("cray-1",)),
    ("node-gpu-model-unknown", ("nodes", 0), {"profile": "gpu-8x", "count": 1, "gpuModel": "Voodoo5"}, ("Voodoo5",)),
    ("pods-huge", ("workload", "synthetic", "pods"), 10**9, ("pods",)),
    ("pods-1e7", ("workload", "synthetic", "pods"), 10**7, ("pods",)),
    ("pods-negative", ("workload", "synthetic", "pods"), -1, ("pods",)),
    ("pods-float", ("workload", "synthetic", "pods"), 1.5, ("pods",)),
    ("duration-sigma-huge", ("workload", "synthetic", "duration_sigma"), 1000, ("duration_sigma",)),
    ("duration-sigma-inf", ("workload", "synthetic", "duration_sigma"), float("inf"), ("duration_sigma",)),
    ("duration-median-huge", ("workload", "synthetic", "duration_median"),
     {"latency": 1e308, "training": 1, "inference": 1, "burstable": 1, "best-effort": 1}, ("duration_median",)),
    ("duration-median-nan", ("workload", "synthetic", "duration_median"), {"latency": float("nan")},
     ("duration_median",)),
    ("rate-start-tiny", ("workload", "synthetic", "rate_start"), 1e-300, ("rate_start",)),
    ("rate-end-inf", ("workload", "synthetic", "rate_end"), float("inf"), ("rate_end",)),
    ("rate-start-nan", ("workload", "synthetic", "rate_start"), float("nan"), ("rate_start",)),
    ("start-inf", ("workload", "synthetic", "start"), float("inf"), ("start",)),
    ("controllers-huge", ("workload", "synthetic", "controllers"), 10**9, ("controllers",)),
    ("mix-nan", ("workload", "synthetic", "mix"), {"latency": float("nan")}, ("mix",)),
    ("mix-negative", ("workload", "synthetic", "mix"), {"latency": -1}, ("mix",)),
    ("mix-all-zero", ("workload", "synthetic", "mix"), {"latency": 0}, ("mix",)),
    ("table-huge-cpus", ("workload", "synthetic", "latency_cpus_table"), [[10**9, 1]], ("latency_cpus_table",)),
    ("table-string", ("workload", "synthetic", "latency_cpus_table"), "many", ("latency_cpus_table",)),
    ("table-nan-weight", ("workload", "synthetic", "latency_cpus_table"), [[1, float("nan")]],
     ("latency_cpus_table",)),
    ("synthetic-unknown-key", ("workload", "synthetic", "bogus"), 1, ("bogus",)),
    ("synthetic-list", ("workload", "synthetic"), [1], ("synthetic",)),
    ("ramp-huge", ("workload", "ramp"), {"start": 1e300, "end": 1e308}, ("ramp.start",)),
    ("ramp-nan", ("workload", "ramp"), {"start": float("nan"), "end": 2}, ("ramp.start",)),
    ("ramp-string", ("workload", "ramp"), {"start": "x", "end": 2}, ("ramp.start",)),
    ("seed-huge", ("seed",), 10**40, ("seed",)),
    ("seed-string", ("seed",), "abc", ("seed",)),
    ("scheduler-unknown", ("schedulers",), ["magic"], ("magic",)),
    ("schedulers-string", ("schedulers",), "toposched", ("schedulers",)),
    ("name-mapping", ("name",), {"a": 1}, ("name",)),
    ("workload-file-missing", ("workload",), {"file": "nope.yaml"}, ("nope.yaml",)),
    ("workload-file-list", ("workload",), {"file": ["a"]}, ("workload.file",)),
    ("nodes-file-missing", ("nodes",), {"file": "nope.csv"}, ("nope.csv",)),
    ("nodes-file-dev-zero", ("nodes",), {"file": "/dev/zero"}, ("character device",)),
    ("hwloc-dev-zero", ("nodes", 0), {"hwloc": "/dev/zero", "count": 1}, ("character device",)),
    ("sysfs-outside", ("nodes", 0), {"sysfs": "/nonexistent-root", "count": 1}, ("nonexistent",)),
    ("node-unknown-key", ("nodes", 0), {"profile": "vm-2numa", "count": 1, "hugepages_1Gi": 1000000},
     ("hugepages_1Gi",)),
]


def scenario_cases() -> list[Case]:
    """``simulate --scenario`` with each scenario mutation, and bad simulate flags."""
    out = []
    for name, path, value, words in SCENARIO_MUTATIONS:
        try:
            scenario = _mutated(SMALL_SCENARIO, path, value)
        except (KeyError, IndexError, TypeError):
            scenario = copy.deepcopy(SMALL_SCENARIO)
            target = scenario
            for key in path[:-1]:
                target = target.setdefault(key, {})
            target[path[-1]] = value
        text = dump(scenario)
        names_file = any(w.endswith((".yaml", ".csv")) or w == "character device" for w in words)
        out.append(Case(f"simulate-scenario:{name}", ["simulate", "--scenario", "{d}/s.yaml", "--report", "{d}/out",
                                                      "--no-wall-clock"], {"s.yaml": text},
                        words if names_file else ("s.yaml", *words)))
    base = {"s.yaml": dump(SMALL_SCENARIO)}
    run = ["simulate", "--scenario", "{d}/s.yaml", "--no-wall-clock"]
    out += [
        Case("simulate:report-is-file", [*run, "--report", "{d}/s.yaml"], base, ("--report",)),
        Case("simulate:report-unwritable", [*run, "--report", "/proc/toposched-report"], base, ("--report",)),
        Case("simulate:report-interval-flag-tiny", [*run, "--report", "{d}/o", "--report-interval", "1e-9"], base,
             ("--report-interval",)),
        Case("simulate:report-interval-flag-nan", [*run, "--report", "{d}/o", "--report-interval", "nan"], base,
             ("--report-interval",)),
        Case("simulate:report-interval-flag-inf", [*run, "--report", "{d}/o", "--report-interval", "inf"], base,
             ("--report-interval",)),
        Case("simulate:scheduler-unknown", [*run, "--report", "{d}/o", "-s", "magic"], base, ("magic",)),
        Case("simulate:seed-huge", [*run, "--report", "{d}/o", "--seed", str(10**30)], base, ("--seed",)),
        Case("simulate:config-missing", [*run, "--report", "{d}/o", "--config", "{d}/nope.yaml"], base,
             ("nope.yaml",)),
        Case("simulate:config-bomb", [*run, "--report", "{d}/o", "--config", "{d}/c.yaml"],
             {**base, "c.yaml": ALIAS_BOMB}, ("alias",)),
    ]
    return out


NODE_CSV_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"
POD_CSV_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
POD_ROW = "p-0,1000,1024,0,0,,LS,Running,10,100,11\n"
NODE_CSV_ROWS: list[tuple[str, str, tuple[str, ...]]] = [
    ("cpu-inf", "n-0,inf,262144,0,\n", ("cpu_milli",)),
    ("cpu-nan", "n-0,nan,262144,0,\n", ("cpu_milli",)),
    ("cpu-huge", "n-0,1" + "0" * 30 + ",262144,0,\n", ("cpu_milli",)),
    ("cpu-digits", "n-0," + "9" * 5000 + ",262144,0,\n", ("cpu_milli",)),
    ("cpus-per-machine", "n-0,100000000,262144,0,\n", ("cpu_milli",)),
    ("memory-negative", "n-0,64000,-5,0,\n", ("memory_mib",)),
    ("memory-1e400", "n-0,64000,1e400,0,\n", ("memory_mib",)),
    ("gpu-huge", "n-0,64000,262144,1000000,V100\n", ("gpu",)),
    ("gpu-fraction", "n-0,64000,262144,1.5,V100\n", ("gpu",)),
    ("gpu-model-unknown", "n-0,64000,262144,2,Voodoo5\n", ("Voodoo5",)),
    ("name-bad", "Bad Name!,64000,262144,0,\n", ("sn",)),
    ("short-row", "n-0,64000\n", ("cells",)),
    ("empty-after-header", "", ("node",)),
]
POD_CSV_ROWS: list[tuple[str, str, tuple[str, ...]]] = [
    ("cpu-inf", "p-0,inf,1024,0,0,,LS,Running,10,100,11\n", ("cpu_milli",)),
    ("cpu-nan", "p-0,nan,1024,0,0,,LS,Running,10,100,11\n", ("cpu_milli",)),
    ("memory-digits", "p-0,1000," + "9" * 5000 + ",0,0,,LS,Running,10,100,11\n", ("memory_mib",)),
    ("gpu-milli-huge", "p-0,1000,1024,1,100000,,LS,Running,10,100,11\n", ("gpu_milli",)),
    ("num-gpu-huge", "p-0,1000,1024,100000000,1000,,LS,Running,10,100,11\n", ("GPU",)),
    ("creation-inf", "p-0,1000,1024,0,0,,LS,Running,inf,100,11\n", ("creation_time",)),
    ("creation-nan", "p-0,1000,1024,0,0,,LS,Running,nan,100,11\n", ("creation_time",)),
    ("scheduled-before-creation", "p-0,1000,1024,0,0,,LS,Running,100,10,11\n", ("scheduled_time",)),
    ("deletion-before-start", "p-0,1000,1024,0,0,,LS,Running,10,5,10\n", ("deletion_time",)),
    ("gpu-spec-unknown", "p-0,1000,1024,1,1000,Voodoo5,LS,Running,10,100,11\n", ("Voodoo5",)),
    ("name-bad", "p 0!,1000,1024,0,0,,LS,Running,10,100,11\n", ("name",)),
    ("short-row", "p-0,1000\n", ("cells",)),
]


OUR_NODE_CSV = "name,cpus,memory,hugepages_1Gi\n"
OUR_NODE_ROWS: list[tuple[str, str, tuple[str, ...]]] = [
    ("hugepages-above-memory", "big,64,256Gi,1000000\n", ("hugepages_1Gi",)),
    ("cpus-huge", "big,100000000,256Gi,0\n", ("cpus",)),
    ("memory-inf", "big,64,inf,0\n", ("memory",)),
    ("name-bad", "Big Node,64,256Gi,0\n", ("name",)),
]


def csv_cases() -> list[Case]:
    """``simulate --nodes x.csv`` and ``--pods x.csv`` with bad rows."""
    base = {"s.yaml": dump(SMALL_SCENARIO)}
    run = ["simulate", "--scenario", "{d}/s.yaml", "--report", "{d}/o", "--no-wall-clock"]
    out = []
    for name, row, words in NODE_CSV_ROWS:
        files = {**base, "nodes.csv": NODE_CSV_HEADER + row}
        out.append(Case(f"simulate-nodes-csv:{name}", [*run, "--nodes", "{d}/nodes.csv"], files, ("nodes.csv", *words)))
    for name, row, words in OUR_NODE_ROWS:
        files = {**base, "nodes.csv": OUR_NODE_CSV + row}
        out.append(Case(f"simulate-our-nodes-csv:{name}", [*run, "--nodes", "{d}/nodes.csv"], files,
                        ("nodes.csv", *words)))
    for name, row, words in POD_CSV_ROWS:
        files = {**base, "pods.csv": POD_CSV_HEADER + row}
        out.append(Case(f"simulate-pods-csv:{name}", [*run, "--pods", "{d}/pods.csv"], files, ("pods.csv", *words)))
    return out


WORKLOAD_ITEMS: list[tuple[str, dict, tuple[str, ...]]] = [
    ("count-huge", {"name": "w", "count": 10**9, "requests": {"cpu": "1"}}, ("count",)),
    ("count-1e7", {"name": "w", "count": 10**7, "requests": {"cpu": "1"}}, ("count",)),
    ("count-negative", {"name": "w", "count": -1, "requests": {"cpu": "1"}}, ("count",)),
    ("arrival-inf", {"name": "w", "arrival": float("inf"), "requests": {"cpu": "1"}}, ("arrival",)),
    ("arrival-nan", {"name": "w", "arrival": float("nan"), "requests": {"cpu": "1"}}, ("arrival",)),
    ("duration-nan", {"name": "w", "duration": float("nan"), "requests": {"cpu": "1"}}, ("duration",)),
    ("interval-inf", {"name": "w", "count": 2, "interval": float("inf"), "requests": {"cpu": "1"}}, ("interval",)),
    ("requests-inf", {"name": "w", "requests": {"cpu": float("inf")}}, ("cpu",)),
    ("gpu-fraction", {"name": "w", "limits": {"nvidia.com/gpu": "0.5"}}, ("nvidia.com/gpu",)),
    ("request-above-limit", {"name": "w", "requests": {"cpu": "4"}, "limits": {"cpu": "2"}}, ("cpu",)),
    ("annotation-int", {"name": "w", "requests": {"cpu": "1"}, "annotations": {"a": 5}}, ("annotations",)),
    ("name-bad", {"name": "Bad Name!", "requests": {"cpu": "1"}}, ("name",)),
    ("gpu-models-unknown", {"name": "w", "requests": {"cpu": "1"}, "gpuModels": ["Voodoo5"]}, ("Voodoo5",)),
]


def workload_cases() -> list[Case]:
    """``simulate --pods workload.yaml`` with bad items."""
    base = {"s.yaml": dump(SMALL_SCENARIO)}
    run = ["simulate", "--scenario", "{d}/s.yaml", "--report", "{d}/o", "--no-wall-clock"]
    out = []
    for name, item, words in WORKLOAD_ITEMS:
        doc = {"pods": [item]}
        text = dump(doc)
        out.append(Case(f"simulate-workload:{name}", [*run, "--pods", "{d}/w.yaml"], {**base, "w.yaml": text},
                        ("w.yaml", *words)))
    return out


def cluster_cases() -> list[Case]:
    """The cluster commands (scheduler, extender, agent): bad configuration files and flags, refused before
    anything connects to a cluster."""
    attacks = {"missing", "directory", "fifo", "dev-zero-link", "over-size-cap", "binary", "alias-bomb",
               "self-alias", "duplicate-keys", "deep-yaml", "yaml-5000-digit-int", "invalid-yaml", "python-tag"}
    out = []
    for command in ("scheduler", "extender"):
        out += [c for c in _file_cases(command, "--config", [], {}, yaml_reader=False)
                if c.id.rsplit(":", 1)[1] in attacks]
    agent = ["agent", "--dry-run", "--kubeconfig", "{d}/nope"]
    out += [
        Case("agent:node-name-bad", [*agent, "--node-name", "Bad Name/../!"], {}, ("--node-name",)),
        Case("agent:node-name-long", [*agent, "--node-name", "a" * 300], {}, ("--node-name",)),
        Case("agent:interval-tiny", [*agent, "--node-name", "n1", "--interval", "1e-9"], {}, ("--interval", "limit")),
        Case("agent:interval-nan", [*agent, "--node-name", "n1", "--interval", "nan"], {}, ("--interval",)),
        Case("agent:period-inf", [*agent, "--node-name", "n1", "--period", "inf"], {}, ("--period",)),
        Case("agent:period-zero", [*agent, "--node-name", "n1", "--period", "0"], {}, ("--period",)),
    ]
    return out


def all_cases() -> list[Case]:
    """The whole CLI corpus."""
    return [*pod_cases(), *node_cases(), *nrt_cases(), *flag_cases(), *file_cases(), *scenario_cases(),
            *csv_cases(), *workload_cases(), *sysfs_cases(), *hwloc_cases(), *cluster_cases()]


def sysfs_cases() -> list[Case]:
    """``discover --sysfs`` on snapshot trees broken in hostile ways (built by ``setup``)."""
    from tests.fixtures.sysfs_tree import two_socket_smt, write_sysfs_tree

    def tree(mutate: Callable[[Any], None]) -> Callable[[Any], None]:
        def setup(d: Any) -> None:
            root = write_sysfs_tree(d / "root", two_socket_smt())
            mutate(root)

        return setup

    cpu = "sys/devices/system/cpu"
    node = "sys/devices/system/node"

    def replace_with_link(rel: str, target: str) -> Callable[[Any], None]:
        def go(root: Any) -> None:
            import shutil
            path = root / rel
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
            path.symlink_to(target)
        return go

    def replace_with_fifo(rel: str) -> Callable[[Any], None]:
        def go(root: Any) -> None:
            import os
            path = root / rel
            path.unlink()
            os.mkfifo(path)
        return go

    def write(rel: str, text: str | bytes) -> Callable[[Any], None]:
        def go(root: Any) -> None:
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(text, bytes):
                path.write_bytes(text)
            else:
                path.write_text(text)
        return go

    def huge(rel: str) -> Callable[[Any], None]:
        def go(root: Any) -> None:
            with open(root / rel, "wb") as fh:
                fh.truncate(200 * 2**20)
        return go

    argv = ["discover", "--sysfs", "{d}/root"]
    cases = [
        ("online-to-dev-zero", replace_with_link(f"{cpu}/online", "/dev/zero"), ("online",)),
        ("meminfo-to-dev-zero", replace_with_link(f"{node}/node0/meminfo", "/dev/zero"), ("meminfo",)),
        ("cpu-dir-outside-root", replace_with_link(f"{cpu}/cpu0", "/proc/self"), ("cpu0",)),
        ("online-fifo", replace_with_fifo(f"{cpu}/online"), ("online",)),
        ("online-huge", huge(f"{cpu}/online"), ("online",)),
        ("online-absurd-range", write(f"{cpu}/online", "0-99999999\n"), ("online",)),
        ("online-garbage", write(f"{cpu}/online", "zero to four\n"), ("online",)),
        ("online-binary", write(f"{cpu}/online", b"\xff\xfe\x00\x01"), ("online",)),
        ("distance-garbage", write(f"{node}/node0/distance", "ten twenty\n"), ("distance",)),
        ("distance-huge", write(f"{node}/node0/distance", "10 " + "9" * 5000 + "\n"), ("distance",)),
        ("meminfo-huge-number", write(f"{node}/node0/meminfo", "Node 0 MemTotal: " + "9" * 5000 + " kB\n"),
         ("meminfo",)),
        ("hugepages-garbage", write(f"{node}/node0/hugepages/hugepages-2048kB/nr_hugepages", "lots\n"),
         ("nr_hugepages",)),
        ("package-id-digits", write(f"{cpu}/cpu0/topology/physical_package_id", "9" * 5000 + "\n"),
         ("physical_package_id",)),
        ("node-cpulist-huge", write(f"{node}/node0/cpulist", "0-1000000\n"), ("cpulist",)),
    ]
    return [Case(f"discover-sysfs:{name}", argv, {}, words, setup=tree(mutate)) for name, mutate, words in cases]


def hwloc_cases() -> list[Case]:
    """``discover --hwloc`` on hostile XML."""
    def bitmap(words: int) -> str:
        return ",".join(["0xffffffff"] * words)

    head = '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n<topology version="2.0">\n'
    pus = "".join(f'<object type="PU" os_index="{i}" cpuset="0x{1 << i:08x}" complete_cpuset="0x{1 << i:08x}" '
                  f'nodeset="0x1" complete_nodeset="0x1"/>' for i in range(4))
    numa = ('<object type="NUMANode" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" nodeset="0x1" '
            'complete_nodeset="0x1" local_memory="1073741824"/>')

    def machine(children: str, cpuset: str = "0x0000000f") -> str:
        return (f'{head}<object type="Machine" os_index="0" cpuset="{cpuset}" complete_cpuset="{cpuset}" '
                f'nodeset="0x1" complete_nodeset="0x1">{numa}{children}</object>')

    many = 70000
    many_pus = "".join(f'<object type="PU" os_index="{i}" cpuset="{_word_bit(i)}" nodeset="0x1"/>' for i in range(many))
    cases = [
        ("cpukind-huge-bitmap", machine(pus) + f'<cpukind cpuset="{bitmap(300000)}"/></topology>',
         ("cpukind",)),
        ("pu-lacks-own-bit", machine(pus.replace('os_index="2" cpuset="0x00000004"', 'os_index="2" cpuset="0x00000001"'))
         + "</topology>", ("PU",)),
        ("too-many-pus", machine(many_pus, cpuset="0xffffffff") + "</topology>", ("PU",)),
        ("entity-bomb", '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>'
         '<topology>&lol2;</topology>', ("entit",)),
        ("truncated", machine(pus)[:200], ("XML",)),
        ("not-xml", "this is not xml", ("XML",)),
        ("os-index-huge", machine(pus.replace('os_index="3"', 'os_index="99999999999"')) + "</topology>",
         ("os_index",)),
        ("os-index-negative", machine(pus.replace('os_index="3"', 'os_index="-3"')) + "</topology>", ("os_index",)),
        ("memory-digits", machine(pus).replace('local_memory="1073741824"', 'local_memory="' + "9" * 5000 + '"')
         + "</topology>", ("local_memory",)),
        ("memory-negative", machine(pus).replace('local_memory="1073741824"', 'local_memory="-1"') + "</topology>",
         ("local_memory",)),
        ("bitmap-garbage", machine(pus.replace('cpuset="0x00000001"', 'cpuset="0xZZZZ"')) + "</topology>",
         ("cpuset",)),
        ("deep-nesting", head + "<object type=\"Group\">" * 20000 + "</object>" * 20000 + "</topology>", ("XML",)),
        ("wrong-root", '<?xml version="1.0"?><html></html>', ("topology",)),
    ]
    return [Case(f"discover-hwloc:{name}", ["discover", "--hwloc", "{d}/t.xml"], {"t.xml": xml}, ("t.xml", *words))
            for name, xml, words in cases]


def _word_bit(i: int) -> str:
    """hwloc's bitmap text with only bit ``i`` set."""
    word, bit = divmod(i, 32)
    return ",".join([f"0x{1 << bit:08x}"] + ["0x00000000"] * word) if word < 4 else f"0x{1 << bit:08x}" + ",," * 0
