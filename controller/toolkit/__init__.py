"""What every reconciler does the same way: conditions, finalizers, status merge patches,
Events with one Event per episode (``episodes`` decides whether an episode is new), and
ConfigMap/Secret data upserts.

Reconcilers import these instead of writing their own, so a condition, an Event or a
timestamp looks the same whichever controller wrote it (times come from
``wspin.core.clock``). Nothing here knows a kind's schema beyond ``metadata`` and
``status.conditions``.
"""
