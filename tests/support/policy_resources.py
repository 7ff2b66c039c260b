"""ValidatingAdmissionPolicies and their bindings as a client addresses them: the chart installs
them and the tests that attack the API server create them; the product never reads either."""

from __future__ import annotations

from wspin.core.kinds import Resource

GROUP = "admissionregistration.k8s.io"
POLICIES = Resource(GROUP, "v1", "validatingadmissionpolicies", False, "ValidatingAdmissionPolicy")
BINDINGS = Resource(
    GROUP, "v1", "validatingadmissionpolicybindings", False, "ValidatingAdmissionPolicyBinding"
)
