"""Per-Workspace egress: the NetworkPolicy a workspace pod is held to.

``policy`` builds it (pure), ``addresses`` picks the resolved addresses a declared domain may
open (pure), ``dns`` resolves declared domains with their TTL, and ``sync`` keeps each
Workspace's policy in line, writing only a difference.
"""
