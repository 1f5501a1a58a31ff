"""The controller: facts a node cannot see, merged into its NodeResourceTopology zone attributes.

The cassini master's role: something outside the node knows, e.g., how many CPUs of each NUMA
zone an oversold host really has for pods (``toposched.io/cpu-capacity``, read by the
ZoneCapacity plugin). A *source* holds the desired attributes as one document, node -> zone
-> attribute -> value::

    node-a:
      node-0: {toposched.io/cpu-capacity: "11500m"}
      node-1: {toposched.io/cpu-capacity: "12"}

read from a ConfigMap key (:class:`ConfigMapSource`) or an HTTP endpoint answering JSON
(:class:`HTTPSource`). The document is the whole desired state: an attribute the controller
wrote before and the document no longer names is removed. The controller never creates NRTs
or zones (the agent or node-feature-discovery publishes them) and touches no attribute it was
not told to own.

**Why read-modify-apply and not a plain server-side apply of the attributes.** The CRD
(noderesourcetopology-api, ``v1alpha2``) declares neither ``zones`` nor a zone's
``attributes`` with ``x-kubernetes-list-type: map``, and CRD lists default to *atomic*: an
apply owns and replaces a list as a whole. Applying just ``zones: [{name, type, attributes}]``
would wipe every zone's resources and costs. So the controller reads the object, edits the
attributes it owns inside the full ``zones`` list, and applies that list back with
``force=True`` and the object's ``metadata.resourceVersion`` as a precondition: a publisher
that wrote in between makes the write fail with 409 Conflict, and the controller reads again
and retries instead of overwriting fresh resources with stale ones. Which attributes it owns
is kept in the annotation ``toposched.io/controller-attributes`` (JSON, zone -> names), so it
survives restarts and knows what to remove.

Publishers replace ``zones`` wholesale too (NFD's topology-updater reads, sets ``Zones`` and
updates; the agent applies the list), dropping the controller's attributes each time they
publish. The controller therefore watches NRTs and re-merges an object as soon as a change
leaves it out of step, and re-merges everything whenever it reads its source.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import httpx

from toposched.errors import InputError, ToposchedError
from toposched.kube.client import CONFIGMAPS, NRTS, ApiError, Conflict, KubeClient, NotFound, WatchEvent
from toposched.kube.informer import Reflector
from toposched.kube.ops import Metrics
from toposched.manifests import decode_documents
from toposched.names import CONTROLLER_ATTRIBUTES_ANNOTATION as OWNED_ANNOTATION
from toposched.quantity import canonical_units
from toposched.scheduler.plugins.zone_capacity import CPU_CAPACITY_ATTRIBUTE, MAX_ZONE_CPUS

__all__ = [
    "DEFAULT_CONFIGMAP_KEY",
    "OWNED_ANNOTATION",
    "ConfigMapSource",
    "Controller",
    "HTTPSource",
    "SourceUnavailable",
    "ZoneAttributeSource",
    "ZoneAttributes",
    "keep_controller_attributes",
    "merge_zone_attributes",
    "parse_zone_attributes",
]

log = logging.getLogger(__name__)

#: The ConfigMap data key :class:`ConfigMapSource` reads unless told another.
DEFAULT_CONFIGMAP_KEY = "zone-attributes.yaml"
#: Annotation on each NRT the controller wrote: ``{"<zone>": ["<attribute>", ...]}`` it owns there.

#: node name -> zone name -> attribute name -> value.
ZoneAttributes = dict[str, dict[str, dict[str, str]]]

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


class SourceUnavailable(ToposchedError):
    """The source could not be read (unreachable, HTTP error, ConfigMap or key missing); try again later."""


# ---- the document ------------------------------------------------------------------------------


def _check_attribute_name(name: Any, field: str, source: str) -> str:
    if not isinstance(name, str):
        raise InputError(f"attribute name {name!r} is not a string", field=field, source=source)
    prefix, slash, local = name.rpartition("/")
    ok = bool(_QUALIFIED_NAME.match(local)) and len(local) <= 63
    if slash:
        ok = ok and bool(_DNS_SUBDOMAIN.match(prefix)) and len(prefix) <= 253
    if not ok:
        raise InputError(f"attribute name {name!r} is not a qualified name ([prefix/]name, as label keys)",
                         field=field, source=source)
    return name


def _value_text(value: Any, field: str, source: str) -> str:
    # NRT attribute values are strings; YAML turns 12 and 11.5 into numbers, which are meant as text.
    if isinstance(value, bool) or value is None or not isinstance(value, str | int | float):
        raise InputError(f"value {value!r} is not a string (quote it)", field=field, source=source)
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"value {value!r} is not a finite number", field=field, source=source)
    return value if isinstance(value, str) else str(value)


def _check_known_attribute(name: str, value: str, field: str, source: str) -> None:
    """Attributes toposched reads are checked here, so a typo stops at the source and not at the scheduler."""
    if name == CPU_CAPACITY_ATTRIBUTE:
        millis = canonical_units("cpu", value, field=field)
        if millis > MAX_ZONE_CPUS * 1000:
            raise InputError(f"{value!r} is more than {MAX_ZONE_CPUS} CPUs", field=field, source=source)


def parse_zone_attributes(document: Any, *, source: str) -> ZoneAttributes:
    """Check a source document (node -> zone -> attribute -> value) and return it with string values.

    Raises InputError naming ``source`` and the field (``node.zone.attribute``) for: a document
    that is not a mapping (``{}`` is the empty state; an empty text is refused so that a
    ConfigMap emptied by mistake does not strip every attribute), a node name that is not a DNS
    subdomain, an empty zone name, a zone or node that is not a mapping, an attribute name that
    is not a qualified name, a value that is not a string or number, and a
    ``toposched.io/cpu-capacity`` that is not a CPU quantity between 0 and 8192 CPUs.
    """
    if document is None:
        raise InputError("the document is empty; write {} to remove every attribute", source=source)
    if not isinstance(document, Mapping):
        raise InputError(f"the document is a {type(document).__name__}, not a mapping of node names",
                         source=source)
    out: ZoneAttributes = {}
    for node, zones in document.items():
        if not isinstance(node, str) or len(node) > 253 or not _DNS_SUBDOMAIN.match(node):
            raise InputError(f"{node!r} is not a node name (a DNS subdomain)", field=str(node), source=source)
        if zones is None:
            zones = {}
        if not isinstance(zones, Mapping):
            raise InputError("must map zone names to attributes", field=node, source=source)
        out[node] = {}
        for zone, attributes in zones.items():
            path = f"{node}.{zone}"
            if not isinstance(zone, str) or not zone:
                raise InputError(f"zone name {zone!r} is not a non-empty string", field=path, source=source)
            if attributes is None:
                attributes = {}
            if not isinstance(attributes, Mapping):
                raise InputError("must map attribute names to values", field=path, source=source)
            out[node][zone] = {}
            for name, value in attributes.items():
                field = f"{path}.{name}"
                name = _check_attribute_name(name, field, source)
                text = _value_text(value, field, source)
                try:
                    _check_known_attribute(name, text, field, source)
                except InputError as err:
                    raise err.with_source(source) from None
                out[node][zone][name] = text
    return out


# ---- sources -----------------------------------------------------------------------------------


class ZoneAttributeSource(Protocol):
    """Where the desired zone attributes come from."""

    description: str

    def read(self) -> ZoneAttributes:
        """The current document; InputError when it is malformed, SourceUnavailable when it cannot be read."""
        ...


class ConfigMapSource:
    """The document as YAML (or JSON) under one data key of a ConfigMap, read with ``get`` each time."""

    def __init__(self, client: KubeClient, namespace: str, name: str, *, key: str = DEFAULT_CONFIGMAP_KEY):
        self.client = client
        self.namespace = namespace
        self.name = name
        self.key = key
        self.description = f"ConfigMap {namespace}/{name} key {key}"

    def read(self) -> ZoneAttributes:
        """The ConfigMap's document; SourceUnavailable when the ConfigMap or its key is missing or the API fails."""
        try:
            obj = self.client.get(CONFIGMAPS, self.name, namespace=self.namespace)
        except ApiError as err:
            raise SourceUnavailable(f"{self.description}: {err}") from None
        data = obj.get("data") or {}
        if self.key not in data:
            raise SourceUnavailable(f"{self.description}: the ConfigMap has no key {self.key!r} "
                                    f"(keys: {', '.join(sorted(data)) or 'none'})")
        documents = decode_documents(data[self.key], self.description)
        if len(documents) > 1:
            raise InputError(f"{len(documents)} YAML documents; write one", source=self.description)
        return parse_zone_attributes(documents[0] if documents else None, source=self.description)


class HTTPSource:
    """The document as JSON from ``GET url`` (the cassini master's role), through the given httpx client."""

    def __init__(self, url: str, client: httpx.Client):
        self.url = url
        self.client = client
        self.description = url

    def read(self) -> ZoneAttributes:
        """The endpoint's document; SourceUnavailable on a transport error or a non-2xx answer."""
        try:
            response = self.client.get(self.url, headers={"Accept": "application/json"})
        except httpx.HTTPError as err:
            raise SourceUnavailable(f"{self.url}: {type(err).__name__}: {err}") from None
        if not response.is_success:
            raise SourceUnavailable(f"{self.url}: HTTP {response.status_code}")
        try:
            document = json.loads(response.content)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise InputError(f"the answer is not JSON: {err}", source=self.url) from None
        return parse_zone_attributes(document, source=self.url)


# ---- the merge -----------------------------------------------------------------------------------


def _owned(obj: Mapping[str, Any]) -> dict[str, list[str]]:
    text = ((obj.get("metadata") or {}).get("annotations") or {}).get(OWNED_ANNOTATION)
    if text is None:
        return {}
    try:
        owned = json.loads(text)
        if isinstance(owned, dict) and all(isinstance(v, list) and all(isinstance(n, str) for n in v)
                                           for v in owned.values()):
            return owned
    except json.JSONDecodeError:
        pass
    log.warning("unreadable ownership annotation; treating it as empty",
                extra={"nrt": (obj.get("metadata") or {}).get("name"), "annotation": OWNED_ANNOTATION})
    return {}


def _set_attributes(attributes: list[Any], remove: set[str], desired: Mapping[str, str]) -> list[Any]:
    """``attributes`` without the names in ``remove``, with each desired name set once, in place when present."""
    out: list[Any] = []
    written: set[str] = set()
    for entry in attributes:
        name = entry.get("name") if isinstance(entry, Mapping) else None
        if name in desired:
            # Readers keep the first of a repeated name (noderesourcetopology-api's attribute.Get),
            # so the value goes into the first entry and later duplicates are dropped.
            if name not in written:
                out.append({**entry, "value": desired[name]})
                written.add(name)
        elif name not in remove:
            out.append(entry)
    out.extend({"name": name, "value": value} for name, value in desired.items() if name not in written)
    return out


def merge_zone_attributes(obj: Mapping[str, Any], desired: Mapping[str, Mapping[str, str]]
                          ) -> tuple[list[Any], dict[str, list[str]], list[str]]:
    """The NRT's ``zones`` with ``desired`` (zone -> attribute -> value) merged in, the new ownership, missing zones.

    Attributes the object's ownership annotation lists and ``desired`` no longer names are
    removed; every other attribute, and everything else in the zones, is kept as it is. Zones
    ``desired`` names that the object lacks are returned (sorted), not created.
    """
    zones = copy.deepcopy(list(obj.get("zones") or []))
    previously = _owned(obj)
    present = set()
    for zone in zones:
        if not isinstance(zone, dict) or not isinstance(zone.get("name"), str):
            continue
        name = zone["name"]
        present.add(name)
        want = desired.get(name, {})
        remove = set(previously.get(name, ())) - set(want)
        if not want and not remove:
            continue
        attributes = _set_attributes(list(zone.get("attributes") or []), remove, want)
        if attributes:
            zone["attributes"] = attributes
        else:
            zone.pop("attributes", None)  # omitempty, as the Go type writes it
    owned = {zone: sorted(attrs) for zone, attrs in sorted(desired.items()) if zone in present and attrs}
    return zones, owned, sorted(set(desired) - present)


def keep_controller_attributes(report: Mapping[str, Any], current: Mapping[str, Any] | None) -> dict[str, Any]:
    """``report`` (a publisher's new NRT) with the zone attributes the controller owns in ``current`` carried over.

    A publisher that replaces ``zones`` wholesale would otherwise drop them until the
    controller re-merges, leaving e.g. a ZoneCapacity cap off for a moment.
    """
    if not current:
        return dict(report)
    owned = _owned(current)
    values: dict[str, dict[str, str]] = {}
    for zone in current.get("zones") or []:
        if isinstance(zone, Mapping) and zone.get("name") in owned:
            names = set(owned[zone["name"]])
            found = {}
            for entry in zone.get("attributes") or []:
                if isinstance(entry, Mapping) and entry.get("name") in names and entry["name"] not in found:
                    found[entry["name"]] = entry.get("value")
            values[zone["name"]] = {k: v for k, v in found.items() if isinstance(v, str)}
    if not any(values.values()):
        return dict(report)
    zones = copy.deepcopy(list(report.get("zones") or []))
    for zone in zones:
        if isinstance(zone, dict) and values.get(zone.get("name")):
            zone["attributes"] = _set_attributes(list(zone.get("attributes") or []), set(), values[zone["name"]])
    return {**report, "zones": zones}


# ---- the controller ---------------------------------------------------------------------------


class Controller:
    """Keeps every NRT's zone attributes equal to the source's document, for the attributes it owns.

    ``step(timeout_seconds)`` reads the source when ``source_interval`` has passed (keeping the
    last good document when the read fails), re-merges every known NRT after a read, then runs
    one list-or-watch round on NRTs whose changes re-merge the changed object. ``run(stop)``
    repeats ``step`` until ``stop`` is set. Nothing is written before a first good document.
    """

    def __init__(self, client: KubeClient, source: ZoneAttributeSource, *, clock: Callable[[], float],
                 field_manager: str = "toposched-controller", source_interval: float = 30.0,
                 max_conflict_retries: int = 5, metrics: Metrics | None = None,
                 sleep: Callable[[float], Any] | None = None):
        self.client = client
        self.source = source
        self.clock = clock
        self.field_manager = field_manager
        self.source_interval = source_interval
        self.max_conflict_retries = max_conflict_retries
        self.metrics = metrics
        self._desired: ZoneAttributes | None = None
        self._next_read: float | None = None
        self._nrts: dict[str, dict[str, Any]] = {}
        self._listed = False
        self._reported_missing: dict[str, list[str]] = {}
        self._stop = threading.Event()
        # The watch's backoff after an API failure waits through ``sleep``, by default on the stop
        # event of run(), so stopping cuts the wait short.
        self._reflector = Reflector(client, NRTS, self._on_event, self._on_relist,
                                    sleep=sleep if sleep is not None else lambda s: self._stop.wait(s))

    @property
    def ready(self) -> bool:
        """True once a good document was read and the NRTs were listed."""
        return self._desired is not None and self._listed

    @property
    def desired(self) -> ZoneAttributes | None:
        """The last good document, or None before the first one."""
        return self._desired

    def read_source(self) -> bool:
        """Read the source now; True when it gave a good document. A bad or missing one is logged and kept out."""
        self._next_read = self.clock() + self.source_interval
        try:
            document = self.source.read()
        except (InputError, SourceUnavailable) as err:
            self._count("controller_source_reads", "error")
            log.error("cannot use the zone-attribute source; keeping the last good document",
                      extra={"source": self.source.description, "error": str(err),
                             "have_document": self._desired is not None})
            return False
        self._count("controller_source_reads", "ok")
        if document != self._desired:
            log.info("zone-attribute document changed", extra={"source": self.source.description,
                                                                "nodes": len(document)})
        self._desired = document
        return True

    def reconcile(self, name: str) -> str:
        """Bring one NRT in line with the document: ``unchanged``, ``updated``, ``absent`` or ``error``.

        A 409 (the object changed since it was read) reads it again and retries, up to
        ``max_conflict_retries`` times; other API errors are logged and left to the next resync.
        """
        if self._desired is None:
            return "unchanged"
        for _ in range(self.max_conflict_retries + 1):
            obj = self._nrts.get(name)
            if obj is None:
                return "absent"
            try:
                return self._write_if_needed(obj)
            except Conflict:
                self._count("controller_nrt_updates", "conflict")
                try:
                    self._nrts[name] = self.client.get(NRTS, name)
                except NotFound:
                    self._nrts.pop(name, None)
                    return "absent"
                except ApiError as err:
                    return self._failed(name, err)
            except NotFound:
                self._nrts.pop(name, None)
                return "absent"
            except ApiError as err:
                return self._failed(name, err)
        log.warning("NRT kept changing under the controller; will retry at the next resync", extra={"nrt": name})
        return "error"

    def reconcile_all(self) -> dict[str, int]:
        """Reconcile every known NRT; the count of each outcome."""
        outcomes: dict[str, int] = {}
        for name in sorted(self._nrts):
            outcome = self.reconcile(name)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        return outcomes

    def step(self, timeout_seconds: float = 0.0) -> None:
        """Read the source when due (then re-merge all), and run one list-or-watch round of NRTs."""
        if (self._next_read is None or self.clock() >= self._next_read) and self.read_source():
            self.reconcile_all()
        self._reflector.step(timeout_seconds)

    def run(self, stop: threading.Event, *, watch_timeout: float = 5.0) -> None:
        """Step until ``stop`` is set; a watch round lasts at most ``watch_timeout`` so a stop is seen soon."""
        self._stop = stop
        while not stop.is_set():
            wait = watch_timeout
            if self._next_read is not None:
                wait = max(0.0, min(wait, self._next_read - self.clock()))
            self.step(wait)

    # -- internals ---------------------------------------------------------------------------

    def _on_relist(self, items: list[dict[str, Any]]) -> None:
        self._nrts = {item["metadata"]["name"]: item for item in items}
        self._listed = True
        self.reconcile_all()

    def _on_event(self, event: WatchEvent) -> None:
        name = (event.object.get("metadata") or {}).get("name")
        if not name:
            return
        if event.type == "DELETED":
            self._nrts.pop(name, None)
        elif event.type in ("ADDED", "MODIFIED"):
            self._nrts[name] = event.object
            self.reconcile(name)

    def _write_if_needed(self, obj: dict[str, Any]) -> str:
        assert self._desired is not None
        meta = obj.get("metadata") or {}
        name = meta["name"]
        zones, owned, missing = merge_zone_attributes(obj, self._desired.get(name, {}))
        if missing != self._reported_missing.get(name, []):
            if missing:
                log.warning("the document names zones this NRT does not have", extra={"nrt": name, "zones": missing})
            self._reported_missing[name] = missing
        if zones == list(obj.get("zones") or []) and owned == _owned(obj):
            return "unchanged"
        # The annotation is written even when it becomes "{}": leaving it out would rely on this
        # manager owning it to have it removed, and a leftover would never compare equal.
        metadata: dict[str, Any] = {
            "name": name,
            "annotations": {OWNED_ANNOTATION: json.dumps(owned, sort_keys=True, separators=(",", ":"))},
        }
        if meta.get("resourceVersion"):
            metadata["resourceVersion"] = meta["resourceVersion"]
        applied = {"apiVersion": NRTS.api_version, "kind": NRTS.kind, "metadata": metadata, "zones": zones}
        result = self.client.apply(NRTS, applied, field_manager=self.field_manager, force=True)
        self._nrts[name] = result
        self._count("controller_nrt_updates", "updated")
        log.info("zone attributes merged", extra={"nrt": name, "owned": owned})
        return "updated"

    def _failed(self, name: str, err: ApiError) -> str:
        self._count("controller_nrt_updates", "error")
        log.error("cannot write zone attributes; will retry at the next resync", extra={"nrt": name, "error": str(err)})
        return "error"

    def _count(self, metric: str, result: str) -> None:
        if self.metrics is not None:
            getattr(self.metrics, metric).labels(result=result).inc()
