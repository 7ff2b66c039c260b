"""SubjectAccessReview answered by RBAC over the stored Roles, ClusterRoles and bindings.

What kube-apiserver's RBAC authorizer decides for a review: a binding applies when one of its
subjects is the user, one of its groups, or (for ``system:serviceaccount:<ns>:<name>``) that
ServiceAccount; a RoleBinding grants only in its own namespace; a rule matches on API group,
resource (``resource/subresource`` for a subresource), verb and, when it lists any,
resourceNames. ``*`` matches everything. Aggregated ClusterRoles and non-resource URLs are
not emulated (the chart uses neither). The server does not authenticate, so every caller may
create reviews, as cluster-admin may.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from wspin.core.objects import Obj

Lookup = Callable[[str, str, str], Obj | None]
"""(plural, namespace, name) → the stored RBAC object, or None."""

_SA_PREFIX = "system:serviceaccount:"


def _subject_matches(subject: Obj, user: str, groups: Iterable[str]) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return bool(name == user)
    if kind == "Group":
        return name in set(groups)
    if kind == "ServiceAccount":
        return user == f"{_SA_PREFIX}{subject.get('namespace', '')}:{name}"
    return False


def _rule_allows(rule: Obj, attrs: Obj) -> bool:
    def listed(field: str, value: str) -> bool:
        values = rule.get(field) or []
        return value in values or "*" in values

    resource = attrs.get("resource", "")
    if attrs.get("subresource"):
        resource = f"{resource}/{attrs['subresource']}"
    names = rule.get("resourceNames") or []
    return (
        listed("apiGroups", attrs.get("group", ""))
        and listed("resources", resource)
        and listed("verbs", attrs.get("verb", ""))
        and (not names or attrs.get("name", "") in names)
    )


def review(spec: Obj, bindings: list[tuple[str, Obj]], lookup: Lookup) -> Obj:
    """The ``status`` of a SubjectAccessReview with ``spec``.

    ``bindings`` are (plural, object) for every ClusterRoleBinding and RoleBinding.
    """
    attrs = spec.get("resourceAttributes") or {}
    user = str(spec.get("user", ""))
    groups = list(spec.get("groups") or [])
    if user.startswith(_SA_PREFIX):
        namespace = user[len(_SA_PREFIX) :].split(":", 1)[0]
        groups += ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
    groups.append("system:authenticated")
    wanted_ns = attrs.get("namespace", "")
    for plural, binding in bindings:
        meta = binding["metadata"]
        if plural == "rolebindings" and meta.get("namespace") != wanted_ns:
            continue
        if not any(_subject_matches(s, user, groups) for s in binding.get("subjects") or []):
            continue
        ref = binding.get("roleRef") or {}
        if ref.get("kind") == "ClusterRole":
            role = lookup("clusterroles", "", ref.get("name", ""))
        else:
            role = lookup("roles", meta.get("namespace", ""), ref.get("name", ""))
        if role is None:
            continue
        if any(_rule_allows(rule, attrs) for rule in role.get("rules") or []):
            kind = "ClusterRoleBinding" if plural == "clusterrolebindings" else "RoleBinding"
            return {
                "allowed": True,
                "reason": f'RBAC: allowed by {kind} "{meta["name"]}" of '
                f'{ref.get("kind")} "{ref.get("name")}" to {user}',
            }
    return {"allowed": False, "reason": ""}
