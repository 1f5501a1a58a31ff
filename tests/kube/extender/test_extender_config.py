"""deploy/extender: the KubeSchedulerConfiguration examples kube-scheduler loads to call the extender.

Field names and rules follow kube-scheduler's config v1 ``Extender`` (kubernetes/kubernetes
staging/src/k8s.io/kube-scheduler/config/v1/types.go) and its validation
(pkg/scheduler/apis/config/validation: a positive weight with a prioritize verb, at most one
binder, managed resources that are extended resource names, no duplicates). The verbs must be
routes the extender's app serves under the urlPrefix's path.
"""

import re
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from tests.kube.extender.scenario import build
from toposched.devices import DeviceResourceMap, share
from toposched.scheduler.framework import registry
from toposched.scheduler.profiles import load_scheduler_config

DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "extender"
FILES = ["scheduler-config.yaml", "scheduler-config-devices.yaml"]
# IsQualifiedName: an optional DNS subdomain prefix and "/", then a name of up to 63 characters.
_QUALIFIED = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def extender(name: str) -> dict:
    doc = yaml.safe_load((DEPLOY / name).read_text())
    assert doc["apiVersion"] == "kubescheduler.config.k8s.io/v1" and doc["kind"] == "KubeSchedulerConfiguration"
    assert doc["percentageOfNodesToScore"] == 100
    assert [p["schedulerName"] for p in doc["profiles"]] == ["toposched"]
    assert doc["leaderElection"]["resourceName"] != "kube-scheduler"  # not the default scheduler's lease
    (only,) = doc["extenders"]
    return only


@pytest.mark.parametrize("name", FILES)
def test_the_extender_stanza_is_what_toposched_needs(name):
    ext = extender(name)
    assert ext["nodeCacheCapable"] is True and ext["ignorable"] is False
    assert isinstance(ext["weight"], int) and ext["weight"] > 0
    # 0..10 x weight x 10 must be able to outweigh the three load-based default scores (3 x 100)
    assert 10 * ext["weight"] * 10 > 3 * 100
    assert urlparse(ext["urlPrefix"]).port == 8888  # `toposched extender --listen 0.0.0.0:8888`


@pytest.mark.parametrize("name", FILES)
def test_every_verb_is_a_route_of_the_app_under_the_url_prefix(name):
    ext = extender(name)
    prefix = urlparse(ext["urlPrefix"]).path
    world = build(url_prefix=prefix)
    bodies = {"filterVerb": {"Pod": world.request_pod("web-0"), "NodeNames": ["a"]},
              "prioritizeVerb": {"Pod": world.request_pod("web-0"), "NodeNames": ["a"]},
              "preemptVerb": {"Pod": world.request_pod("web-0"), "NodeNameToMetaVictims": {}},
              "bindVerb": {"PodName": "web-0", "PodNamespace": "default", "PodUID": "", "Node": "a"}}
    for field, body in bodies.items():
        # kube-scheduler: strings.TrimRight(urlPrefix, "/") + "/" + verb
        response = world.http.post(prefix.rstrip("/") + "/" + ext[field], json=body)
        assert response.status_code == 200, (field, response.text)


@pytest.mark.parametrize("name", FILES)
def test_toposcheds_own_strict_reader_accepts_the_file(name):
    config = load_scheduler_config(DEPLOY / name, known_plugins=registry.known())
    assert config.scheduler_names == ("toposched",)


def test_the_main_example_sends_every_pod_to_toposched():
    assert "managedResources" not in extender("scheduler-config.yaml")  # any entry would narrow it to device pods


def test_the_devices_example_manages_extended_resources_toposched_knows():
    managed = extender("scheduler-config-devices.yaml")["managedResources"]
    names = [r["name"] for r in managed]
    assert len(names) == len(set(names))
    known = set(DeviceResourceMap.default().resources) | {
        share.GPU_CORE, share.GPU_MEMORY, share.GPU_MEMORY_RATIO, share.KOORD_GPU, share.GPU_SHARED}
    for resource in managed:
        name = resource["name"]
        assert _QUALIFIED.match(name), name
        domain = name.split("/")[0]
        assert domain != "kubernetes.io" and not domain.endswith(".kubernetes.io") and not name.startswith("requests.")
        assert name in known
        # device-plugin resources keep kube-scheduler's count check; Koordinator's shares are toposched's alone
        assert resource["ignoredByScheduler"] is name.startswith("koordinator.sh/")
