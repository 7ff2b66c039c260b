"""Certificates for the webhook's TLS: generation, sources the server asks for its current
certificate, the self-managed authority with rotation, and the caBundle patcher.

The webhook only consumes a ``CertificateSource``; nothing here imports the webhook.
"""
