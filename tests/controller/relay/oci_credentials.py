"""The OCI API key the driver tests sign with: the tenancy, user and fingerprint it belongs to,
and the credentials Secret's data for it."""

from __future__ import annotations

TENANCY = "ocid1.tenancy.oc1..aaaa"
USER = "ocid1.user.oc1..bbbb"
FINGERPRINT = "12:34:56:78:90:ab:cd:ef:12:34:56:78:90:ab:cd:ef"


def credential_data(pem: str, **extra: str) -> dict[str, str]:
    """An ``oci-credentials`` Secret's data (decoded) for the API key ``pem``."""
    return {"tenancy": TENANCY, "user": USER, "fingerprint": FINGERPRINT, "key": pem} | extra
