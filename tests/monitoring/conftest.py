"""The monitoring suites start both processes; they reuse the controller suites' fixtures for
the fake relay router, the credential source and the test API server's kubeconfig."""

from tests.controller.conftest import credentials, kubeconfig, router

__all__ = ["credentials", "kubeconfig", "router"]
