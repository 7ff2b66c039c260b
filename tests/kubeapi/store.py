"""The object store: resourceVersions, write semantics, finalizers, garbage collection.

Everything here is synchronous and runs on the server's event loop, so each request's
read-check-write is atomic, like an etcd transaction. Stored dicts are never mutated in
place: a write builds a new dict, which makes the history a list of immutable snapshots
that watches can replay. Objects are keyed by group and plural, so every served version of
a kind shares one storage.

Simplifications, each chosen because no product code depends on the difference: garbage
collection runs synchronously inside the owner's deletion (a cluster takes a moment: tests
poll), ``Foreground`` propagation behaves like ``Background``, and a dependent whose owner
never existed is left alone.
"""

from __future__ import annotations

import asyncio
import copy
import enum
import random
import uuid
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NamedTuple

from tests.kubeapi.defaults import check_labels, check_name, prepare_create
from tests.kubeapi.kinds import Kind, KindRegistry
from tests.kubeapi.policies import admit
from tests.kubeapi.review import review_request
from tests.kubeapi.schema import prune_and_default, violations
from tests.kubeapi.selectors import Selector
from tests.kubeapi.service_accounts import default_account
from tests.kubeapi.status import (
    ApiError,
    already_exists,
    bad_request,
    conflict,
    expired,
    invalid,
    not_found,
    stale,
    success,
)
from tests.kubeapi.writes import (
    bound_pod,
    check_same_namespace,
    ephemeral_update,
    is_no_op,
    merged_update,
    typed,
)
from wspin.core.objects import Obj

#: What admission sees for ``pods/binding``: a Binding object on the pods resource.
BINDING = Kind("", "v1", "pods", "Binding")
#: kube-apiserver's generateName alphabet (no vowels, no look-alike digits).
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


class Change(NamedTuple):
    """One committed write, as watches replay it."""

    rv: int
    type: str
    kind: Kind
    obj: Obj
    old: Obj | None


class Signal(enum.Enum):
    """Out-of-band instructions to open watches (tests trigger them through the server)."""

    BOOKMARK = "bookmark"
    CLOSE = "close"
    ABORT = "abort"


def structural(kind: Kind, obj: Obj) -> Obj:
    """A custom resource as stored: pruned and defaulted by its schema, or a 422 listing
    every violation (``<Kind>.<group> "<name>" is invalid: <path>: <problem>``)."""
    if kind.schema is None:
        return obj
    stored = prune_and_default(kind.schema, obj)
    problems = violations(kind.schema, stored)
    if not problems:
        return stored
    name = str(stored["metadata"].get("name") or stored["metadata"].get("generateName") or "")
    summary = problems[0] if len(problems) == 1 else f"[{', '.join(problems)}]"
    causes = [
        {"reason": "FieldValueInvalid", "field": p.split(": ", 1)[0], "message": p}
        for p in problems
    ]
    raise ApiError(
        422,
        f'{kind.kind}.{kind.group} "{name}" is invalid: {summary}',
        "Invalid",
        {"name": name, "group": kind.group, "kind": kind.kind, "causes": causes},
    )


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Store:
    """All objects of one test API server, their history and the open watches' queues."""

    def __init__(self, kinds: KindRegistry, *, history_limit: int = 10_000) -> None:
        self.kinds = kinds
        #: False emulates kube-apiserver v1.32 with the ImageVolume feature gate off.
        self.image_volume_gate = True
        self.history: deque[Change] = deque()
        self.history_limit = history_limit
        #: Watches may resume from any resourceVersion >= this one.
        self.compacted_rv = 0
        self._rv = 0
        self._objects: dict[tuple[str, str], dict[tuple[str, str], Obj]] = {}
        self._watchers: set[asyncio.Queue[Change | Signal]] = set()
        self._orphaning: set[str] = set()
        # Indexes over the current objects, kept by ``_commit``, so garbage collection and
        # namespace deletion stay linear in what they touch (the benchmarks hold 40,000
        # objects): uid → where the object lives, owner uid → its dependents, and how many
        # objects each namespace holds.
        self._storage = {(k.group, k.plural): k for k in kinds}
        self._by_uid: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {}
        self._dependents: dict[str, set[tuple[tuple[str, str], tuple[str, str]]]] = {}
        self._per_namespace: dict[str, int] = {}
        namespaces = kinds.find("", "v1", "namespaces")
        if namespaces is None:
            raise ValueError("the store needs the core/v1 namespaces kind")
        self._namespaces = namespaces
        self._policies = kinds.find(
            "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies"
        )
        self._bindings = kinds.find(
            "admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings"
        )
        self._accounts = kinds.find("", "v1", "serviceaccounts")
        for name in ("default", "kube-system"):
            self.create(self._namespaces, "", {"metadata": {"name": name}})

    # -- reads ----------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        return self._rv

    def get(self, kind: Kind, namespace: str, name: str) -> Obj:
        return copy.deepcopy(self._get(kind, namespace, name))

    def select(self, kind: Kind, namespace: str, *selectors: Selector) -> list[Obj]:
        """Matching objects in etcd key order (namespace, then name)."""
        items = sorted(self._bucket(kind).items())
        return [
            copy.deepcopy(obj)
            for (ns, _), obj in items
            if (not namespace or ns == namespace) and all(s(obj) for s in selectors)
        ]

    def select_at(self, kind: Kind, namespace: str, rv: int) -> list[Obj]:
        """The objects of ``kind`` (in ``namespace``, or all) as they were at ``rv``: the
        current ones with every later change undone from the history. A version older than
        the compacted history answers 410, as etcd does after compaction."""
        if rv < self.compacted_rv:
            raise expired(f"too old resource version: {rv} ({self.compacted_rv})")
        objects = dict(self._bucket(kind))
        storage = (kind.group, kind.plural)
        for change in reversed(self.history):
            if change.rv <= rv:
                break
            if (change.kind.group, change.kind.plural) != storage:
                continue
            meta = change.obj["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            if change.type == "ADDED" or change.old is None:
                objects.pop(key, None)
            else:
                objects[key] = change.old
        # The stored dicts themselves (never mutated in place): the caller copies what it
        # returns, so a page of 250 does not cost a copy of all 10,000.
        return [obj for (ns, _), obj in objects.items() if not namespace or ns == namespace]

    # -- writes ---------------------------------------------------------------------------

    def create(self, kind: Kind, namespace: str, body: Obj, *, dry_run: bool = False) -> Obj:
        obj = typed(kind, body)
        meta = obj["metadata"]
        if kind.namespaced:
            check_same_namespace(meta, namespace)
            meta["namespace"] = namespace
            self._check_namespace_open(namespace, kind, str(meta.get("name") or ""))
        else:
            meta.pop("namespace", None)
        if meta.get("resourceVersion"):
            raise bad_request("resourceVersion should not be set on objects to be created")
        meta["name"] = self._name_for(kind, namespace, meta)
        if (namespace if kind.namespaced else "", meta["name"]) in self._bucket(kind):
            raise already_exists(kind.plural, kind.group, meta["name"])
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(key, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now()
        if kind.tracks_generation:
            meta["generation"] = 1
        prepare_create(kind, obj, image_volume_gate=self.image_volume_gate)
        # As kube-apiserver orders it: the structural schema prunes, defaults and validates
        # the object, then validating admission sees what would be stored.
        obj = structural(kind, obj)
        check_labels(kind, obj)
        self._admit(kind, "CREATE", namespace, obj, None, dry_run=dry_run)
        if dry_run:
            return obj
        created = self._commit("ADDED", kind, obj, None)
        if self._is_namespace(kind) and self._accounts is not None:
            # The controller manager's serviceaccounts controller, which a v1.32 cluster runs.
            name = created["metadata"]["name"]
            self.create(self._accounts, name, default_account(name))
        return created

    def update(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        body: Obj,
        *,
        status: bool = False,
        ephemeral: bool = False,
        dry_run: bool = False,
    ) -> Obj:
        """PUT: a full replacement with optimistic concurrency on resourceVersion.

        ``status`` and ``ephemeral`` are the ``/status`` and ``/ephemeralcontainers``
        subresources: only that part of the object changes."""
        old = self._get(kind, namespace, name)
        new = typed(kind, body)
        meta = new["metadata"]
        if meta.get("name") not in (None, name):
            raise bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on "
                f"the URL ({name})"
            )
        if kind.namespaced:
            check_same_namespace(meta, namespace)
        if not meta.get("resourceVersion") and kind.custom:
            raise invalid(
                kind.kind,
                name,
                "metadata.resourceVersion",
                "Invalid value: 0x0: must be specified for an update",
            )
        return self._update(kind, old, new, status=status, ephemeral=ephemeral, dry_run=dry_run)

    def patch(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        apply: Callable[[Obj], Any],
        *,
        status: bool = False,
        ephemeral: bool = False,
        dry_run: bool = False,
    ) -> Obj:
        """PATCH: ``apply`` turns the current object into the new one, then as an update.

        A resourceVersion the patch itself sets is a precondition, as on a real server.
        """
        old = self._get(kind, namespace, name)
        new = apply(copy.deepcopy(old))
        if not isinstance(new, dict):
            raise invalid(kind.kind, name, "<root>", "the patched object is not an object")
        new = typed(kind, new)
        if new["metadata"].get("name") != name:
            raise bad_request("a patch may not change metadata.name")
        return self._update(kind, old, new, status=status, ephemeral=ephemeral, dry_run=dry_run)

    def bind(self, kind: Kind, namespace: str, name: str, body: Obj, *, dry_run: bool) -> Obj:
        """POST ``pods/<name>/binding``: admission judges the Binding (kind ``Binding``, resource
        ``pods``, subresource ``binding``), then the pod is assigned (``writes.bound_pod``)."""
        old = self._get(kind, namespace, name)
        binding = typed(BINDING, body)
        check_same_namespace(binding["metadata"], namespace)
        binding["metadata"]["namespace"] = namespace
        if binding["metadata"].get("name") not in (None, name):
            raise bad_request("the Binding's name must be the pod's name")
        binding["metadata"]["name"] = name
        result = bound_pod(old, binding)
        self._admit(BINDING, "CREATE", namespace, binding, None, sub="binding", dry_run=dry_run)
        if not dry_run:
            self._commit("MODIFIED", kind, result, old)
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }

    def delete(
        self, kind: Kind, namespace: str, name: str, options: Obj, *, dry_run: bool = False
    ) -> Obj:
        """DELETE: at once without finalizers, else mark with ``deletionTimestamp``."""
        obj = self._get(kind, namespace, name)
        meta = obj["metadata"]
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != meta["uid"]:
            raise conflict(
                kind.plural,
                kind.group,
                name,
                f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: "
                f"{meta['uid']}",
            )
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
            raise stale(kind.plural, kind.group, name)
        # Validating admission sees a delete too (each item of a collection delete): no
        # object, the stored one as oldObject.
        self._admit(kind, "DELETE", namespace, None, obj, dry_run=dry_run)
        orphan = options.get("propagationPolicy") == "Orphan" or bool(
            options.get("orphanDependents")
        )
        if meta.get("deletionTimestamp"):
            return copy.deepcopy(obj)
        if not meta.get("finalizers") and not self._is_namespace(kind):
            if dry_run:
                return self._deleted_reply(kind, obj)
            return self._deleted_reply(kind, self._remove(kind, obj, orphan=orphan))
        marked = copy.deepcopy(obj)
        marked["metadata"]["deletionTimestamp"] = now()
        marked["metadata"]["deletionGracePeriodSeconds"] = 0
        if self._is_namespace(kind):
            marked["status"] = {**(marked.get("status") or {}), "phase": "Terminating"}
        if dry_run:
            return marked
        if orphan:
            self._orphaning.add(meta["uid"])
        self._commit("MODIFIED", kind, marked, obj)
        if self._is_namespace(kind):
            for content_kind in self.kinds:
                if content_kind.namespaced:
                    for item in self.select(content_kind, name):
                        if item["metadata"].get("deletionTimestamp") is None:
                            self._delete_quietly(content_kind, name, item["metadata"]["name"])
            self._finish_namespace(name)
        return self._current_or(kind, namespace, name, marked)

    def compact(self) -> None:
        """Forget the history: resuming a watch from any older resourceVersion gets 410."""
        self.history.clear()
        self.compacted_rv = self._rv

    # -- watches --------------------------------------------------------------------------

    def open_watch(self, since: int | None) -> tuple[list[Change], asyncio.Queue[Change | Signal]]:
        """The changes after ``since`` and a queue of every later one (atomically)."""
        if since is not None and since < self.compacted_rv:
            raise expired(f"too old resource version: {since} ({self.compacted_rv})")
        backlog = [c for c in self.history if since is not None and c.rv > since]
        queue: asyncio.Queue[Change | Signal] = asyncio.Queue()
        self._watchers.add(queue)
        return backlog, queue

    @property
    def open_watches(self) -> int:
        return len(self._watchers)

    def close_watch(self, queue: asyncio.Queue[Change | Signal]) -> None:
        self._watchers.discard(queue)

    def signal_watches(self, signal: Signal) -> int:
        for queue in self._watchers:
            queue.put_nowait(signal)
        return len(self._watchers)

    # -- internals ------------------------------------------------------------------------

    def _admit(
        self,
        kind: Kind,
        operation: str,
        namespace: str,
        obj: Obj | None,
        old: Obj | None,
        *,
        sub: str = "",
        dry_run: bool = False,
    ) -> None:
        """Judge a write by the stored ValidatingAdmissionPolicies; a denial is the answer."""
        if self._policies is None or self._bindings is None:
            return
        policies = self._bucket(self._policies)
        if not policies or kind.group == "admissionregistration.k8s.io":
            return
        request = review_request(kind, operation, namespace, obj, old, sub=sub, dry_run=dry_run)
        ns = self._bucket(self._namespaces).get(("", namespace)) if kind.namespaced else None
        denial = admit(policies.values(), self._bucket(self._bindings).values(), request, ns)
        if denial is not None:
            # kube-apiserver's wording: admission.NewForbidden, then the validation's reason
            # and code, with the policy's message repeated as the one cause.
            resource = f"{kind.plural}.{kind.group}" if kind.group else kind.plural
            name = str(((obj or old or {}).get("metadata") or {}).get("name", ""))
            details: Obj = {
                "name": name,
                "kind": kind.plural,
                "causes": [{"message": denial.text()}],
            }
            if kind.group:
                details["group"] = kind.group
            raise ApiError(
                denial.code,
                f'{resource} "{name}" is forbidden: {denial.text()}',
                denial.reason,
                details,
            )

    def _bucket(self, kind: Kind) -> dict[tuple[str, str], Obj]:
        return self._objects.setdefault((kind.group, kind.plural), {})

    def _get(self, kind: Kind, namespace: str, name: str) -> Obj:
        if kind.namespaced and (("", namespace) not in self._bucket(self._namespaces)):
            raise not_found("namespaces", "", namespace)
        obj = self._bucket(kind).get((namespace if kind.namespaced else "", name))
        if obj is None:
            raise not_found(kind.plural, kind.group, name)
        return obj

    def _check_namespace_open(self, namespace: str, kind: Kind, name: str) -> None:
        """The NamespaceLifecycle admission: no new content in a namespace being deleted,
        refused with the ``NamespaceTerminating`` cause a client can recognise it by."""
        ns = self._bucket(self._namespaces).get(("", namespace))
        if ns is None:
            raise not_found("namespaces", "", namespace)
        if ns["metadata"].get("deletionTimestamp"):
            resource = f"{kind.plural}.{kind.group}" if kind.group else kind.plural
            details: Obj = {
                "name": name,
                "kind": kind.plural,
                "causes": [
                    {
                        "reason": "NamespaceTerminating",
                        "message": f"namespace {namespace} is being terminated",
                        "field": "metadata.namespace",
                    }
                ],
            }
            if kind.group:
                details["group"] = kind.group
            raise ApiError(
                403,
                f'{resource} "{name}" is forbidden: unable to create new content in namespace '
                f"{namespace} because it is being terminated",
                "Forbidden",
                details,
            )

    def _name_for(self, kind: Kind, namespace: str, meta: Obj) -> str:
        if meta.get("name"):
            check_name(kind, str(meta["name"]))
            return str(meta["name"])
        prefix = meta.get("generateName")
        if not prefix:
            raise invalid(
                kind.kind, "", "metadata.name", "Required value: name or generateName is required"
            )
        while True:
            name = str(prefix) + "".join(random.choices(_SUFFIX_ALPHABET, k=5))
            if (namespace if kind.namespaced else "", name) not in self._bucket(kind):
                check_name(kind, name)
                return name

    def _update(
        self, kind: Kind, old: Obj, new: Obj, *, status: bool, ephemeral: bool, dry_run: bool
    ) -> Obj:
        if ephemeral:
            result = ephemeral_update(old, new)
        else:
            result = structural(kind, merged_update(kind, old, new, status=status))
        check_labels(kind, result)
        sub = "status" if status else "ephemeralcontainers" if ephemeral else ""
        namespace = old["metadata"].get("namespace", "")
        # Admission sees no-op updates too (kube-apiserver calls webhooks for them).
        self._admit(kind, "UPDATE", namespace, result, old, sub=sub, dry_run=dry_run)
        if is_no_op(old, result):
            return copy.deepcopy(old)
        name, old_meta = old["metadata"]["name"], old["metadata"]
        if dry_run:
            return result
        rmeta = result["metadata"]
        released = rmeta.get("deletionTimestamp") and not rmeta.get("finalizers")
        if released and not (self._is_namespace(kind) and self._namespace_has_content(name)):
            orphan = old_meta["uid"] in self._orphaning
            return self._remove(kind, result, orphan=orphan, previous=old)
        return self._commit("MODIFIED", kind, result, old)

    def _remove(self, kind: Kind, obj: Obj, *, orphan: bool, previous: Obj | None = None) -> Obj:
        meta = obj["metadata"]
        gone = self._commit("DELETED", kind, obj, previous or obj)
        self._orphaning.discard(meta["uid"])
        self._collect_dependents(meta["uid"], orphan=orphan)
        if kind.namespaced:
            self._finish_namespace(meta["namespace"])
        return gone

    def _collect_dependents(self, owner_uid: str, *, orphan: bool) -> None:
        """The garbage collector: drop refs to the gone owner, delete orphans-to-be."""
        for storage, key in sorted(self._dependents.get(owner_uid, ())):
            kind = self._storage[storage]
            found = self._objects.get(storage, {}).get(key)
            if found is None:
                continue
            dependent: Obj = found
            refs = dependent["metadata"].get("ownerReferences") or []
            remaining = [r for r in refs if r.get("uid") != owner_uid]
            live = [r for r in remaining if self._uid_exists(str(r.get("uid")))]
            meta = dependent["metadata"]
            ns = meta.get("namespace", "")
            if not orphan and not live:
                if not meta.get("deletionTimestamp"):
                    self._delete_quietly(kind, ns, meta["name"])
                continue
            updated = copy.deepcopy(dependent)
            updated["metadata"]["ownerReferences"] = remaining
            if not remaining:
                del updated["metadata"]["ownerReferences"]
            self._commit("MODIFIED", kind, updated, dependent)

    def _finish_namespace(self, namespace: str) -> None:
        ns = self._bucket(self._namespaces).get(("", namespace))
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return
        if ns["metadata"].get("finalizers") or self._namespace_has_content(namespace):
            return
        self._remove(self._namespaces, ns, orphan=False)

    def _namespace_has_content(self, namespace: str) -> bool:
        return self._per_namespace.get(namespace, 0) > 0

    def _uid_exists(self, uid: str) -> bool:
        return uid in self._by_uid

    def _delete_quietly(self, kind: Kind, namespace: str, name: str) -> None:
        """Delete if still there: the garbage collector may have got there first."""
        try:
            self.delete(kind, namespace, name, {})
        except ApiError as err:
            if err.code != 404:
                raise

    def _current_or(self, kind: Kind, namespace: str, name: str, fallback: Obj) -> Obj:
        current = self._bucket(kind).get((namespace if kind.namespaced else "", name))
        return copy.deepcopy(current if current is not None else fallback)

    def _deleted_reply(self, kind: Kind, obj: Obj) -> Obj:
        if kind.returns_deleted:
            return copy.deepcopy(obj)
        meta = obj["metadata"]
        return success(kind.plural, kind.group, meta["name"], meta["uid"])

    def _index(self, kind: Kind, key: tuple[str, str], obj: Obj, delta: int) -> None:
        """Add (+1) or drop (-1) ``obj`` from the indexes."""
        storage = (kind.group, kind.plural)
        meta = obj["metadata"]
        if delta > 0:
            self._by_uid[meta["uid"]] = (storage, key)
        else:
            self._by_uid.pop(meta["uid"], None)
        for ref in meta.get("ownerReferences") or []:
            owner = str(ref.get("uid"))
            dependents = self._dependents.setdefault(owner, set())
            if delta > 0:
                dependents.add((storage, key))
            else:
                dependents.discard((storage, key))
                if not dependents:
                    del self._dependents[owner]
        if kind.namespaced:
            ns = key[0]
            count = self._per_namespace.get(ns, 0) + delta
            if count:
                self._per_namespace[ns] = count
            else:
                self._per_namespace.pop(ns, None)

    @staticmethod
    def _is_namespace(kind: Kind) -> bool:
        return kind.plural == "namespaces" and not kind.group

    def _commit(self, type_: str, kind: Kind, obj: Obj, old: Obj | None) -> Obj:
        self._rv += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self._rv)
        key = (stored["metadata"].get("namespace", ""), stored["metadata"]["name"])
        previous = self._bucket(kind).get(key)
        if previous is not None:
            self._index(kind, key, previous, -1)
        if type_ == "DELETED":
            self._bucket(kind).pop(key, None)
        else:
            self._bucket(kind)[key] = stored
            self._index(kind, key, stored, +1)
        change = Change(self._rv, type_, kind, stored, old)
        self.history.append(change)
        while len(self.history) > self.history_limit:
            self.compacted_rv = self.history.popleft().rv
        for queue in self._watchers:
            queue.put_nowait(change)
        return copy.deepcopy(stored)
