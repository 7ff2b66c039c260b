"""What an informer's cache stores instead of the decoded JSON: compacted, shared, read-only.

Every watch event and list item is decoded on its own, so without compaction each cached pod
carries private copies of everything it has in common with the others. ``Compactor`` (the
informer's default transform) brings that down in three steps:
- ``metadata.managedFields`` is dropped: server-side-apply bookkeeping nothing here reads,
  often the largest part of an object (about 45% of a workspace pod's JSON);
- keys and short strings are interned, so every pod shares one "mountPath", one image
  reference and so on;
- equal subtrees are shared: a dict or list equal to one the compactor met recently (a
  container's ``securityContext``, a volume mount, an env entry, a probe, a PVC's
  ``accessModes``) becomes that one instance. Workspace pods are mostly such subtrees: of the
  120-odd dicts and lists in one, about twenty hold something of that pod's own (its name,
  uid, token, claim) and the rest are shared. Measured on the pod, PVC and Workspace the
  Workspace reconciler writes: 23.5 KB a Workspace interned only, 6.1 KB shared as well, at
  the same compaction time (about 160 µs a pod).

Sharing is only safe when nobody writes, so the cache's dicts and lists are ``CachedDict``
and ``CachedList``: a dict and a list in every way a reader can tell (``isinstance``,
equality, JSON encoding, iteration), whose writes raise ``TypeError``. Code that wants to
change a cached object changes a copy (``copy.deepcopy``, ``dict(...)``, ``.copy()``, all
of which give ordinary dicts and lists), as it always had to: the cache is what every
reconciler reads.

The compactor remembers the subtrees it met last (``SHARED_SUBTREES``, least recently met
forgotten first), so its own memory is bounded whatever the objects are; a subtree every
object has is met on every object and stays. Keys of the table are the subtree's keys and
its children's identities: a child is already shared when its parent is looked up, and an
entry keeps its children alive, so an identity in a key never names another object.
"""

from __future__ import annotations

import copy
import sys
from collections import OrderedDict
from typing import Any, Final, NoReturn

from wspin.core.objects import Obj

SHARED_SUBTREES: Final = 2048
"""Distinct subtrees each compactor remembers: about 100 are common to every workspace pod of
one runtime and about 20 are each pod's own, so a few hundred would do; an entry costs about
300 bytes, 0.6 MB for a full table."""

INTERN_MAX: Final = 128
"""Strings up to this length are interned: keys, enums, image references, names. Longer ones
(certificates, scripts) are rarely repeated. Interned strings are mortal: freed with their
last reference."""

_READ_ONLY: Final = (
    "a cached object is shared and read-only: change a copy (copy.deepcopy) and write that"
)


class CachedDict(dict[str, Any]):
    """A dict of an informer's cache: reads as a dict, refuses every write."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(_READ_ONLY)

    __setitem__ = __delitem__ = _refuse
    setdefault = pop = popitem = clear = update = _refuse
    __ior__ = _refuse

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {key: copy.deepcopy(value, memo) for key, value in self.items()}


class CachedList(list[Any]):
    """A list of an informer's cache: reads as a list, refuses every write."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(_READ_ONLY)

    __setitem__ = __delitem__ = _refuse
    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __iadd__ = __imul__ = _refuse

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(value, memo) for value in self]


def strip_managed_fields(obj: Obj) -> Obj:
    """Drop ``metadata.managedFields``."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


class Compactor:
    """Compacts the objects of one cache (see the module docstring); ``compactor(obj)`` is
    the compacted, read-only object."""

    def __init__(self, limit: int = SHARED_SUBTREES) -> None:
        self.limit = limit
        self._seen: OrderedDict[tuple[Any, ...], CachedDict | CachedList] = OrderedDict()
        self.shared = 0
        """Subtrees replaced by one met before (a figure for tests and benchmarks)."""

    def __call__(self, obj: Obj) -> Obj:
        compacted, _ = self._compact(strip_managed_fields(obj))
        assert isinstance(compacted, CachedDict)
        return compacted

    def __len__(self) -> int:
        return len(self._seen)

    def _compact(self, root: Any) -> tuple[Any, Any]:
        """The shared form of ``root`` and what identifies it inside a parent's key.

        A loop over an explicit stack, not recursion: a Workspace's spec keeps fields it does
        not declare, so a tenant decides how deep an object goes (up to the 1,024 levels the
        JSON decoders allow), and Python 3.12 refuses that many nested calls."""
        if type(root) is not dict and type(root) is not list:
            return _leaf(root)
        # A frame: the container's children still to visit, its compacted content, its key,
        # and the name under which the child being compacted goes (None in a list).
        stack: list[list[Any]] = [_frame(root)]
        while True:
            frame = stack[-1]
            children, content, key = frame[0], frame[1], frame[2]
            descend = None
            if type(content) is dict:
                for name, value in children:
                    name = sys.intern(name)
                    kind = type(value)
                    if kind is dict or kind is list:
                        frame[3], descend = name, value
                        break
                    content[name], part = _leaf(value)
                    key += (name, part)
            else:
                for value in children:
                    kind = type(value)
                    if kind is dict or kind is list:
                        descend = value
                        break
                    shared, part = _leaf(value)
                    content.append(shared)
                    key.append(part)
            if descend is not None:
                stack.append(_frame(descend))
                continue
            stack.pop()
            made = self._share(tuple(key), type(content) is dict, content)
            if not stack:
                return made
            parent = stack[-1]
            name = parent[3]
            if name is None:
                parent[1].append(made[0])
                parent[2].append(made[1])
            else:
                parent[1][name] = made[0]
                parent[2] += (name, made[1])

    def _share(self, key: tuple[Any, ...], is_dict: bool, content: Any) -> tuple[Any, int]:
        seen = self._seen
        found = seen.get(key)
        if found is not None:
            seen.move_to_end(key)
            self.shared += 1
            return found, id(found)
        made = CachedDict(content) if is_dict else CachedList(content)
        seen[key] = made
        if len(seen) > self.limit:
            seen.popitem(last=False)
        return made, id(made)


def _frame(container: dict[str, Any] | list[Any]) -> list[Any]:
    if type(container) is dict:
        return [iter(container.items()), {}, ["d"], None]
    return [iter(container), [], ["l"], None]


def _leaf(value: Any) -> tuple[Any, Any]:
    """A string, number, boolean or null as stored, and as it stands in a parent's key."""
    if type(value) is str:
        text = sys.intern(value) if len(value) <= INTERN_MAX else value
        return text, text
    # Numbers, booleans and null: tagged with their type, as True == 1 == 1.0.
    return value, (type(value), value)
