"""The monitoring suites start both processes; they reuse the controller suites' fixtures for
the fake relay router and the credential source (the kubeconfig is ``tests/conftest.py``'s)."""

from tests.controller.conftest import credentials, router

__all__ = ["credentials", "router"]
