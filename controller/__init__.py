"""The wspin controller process: Workspace and InferenceRelay reconcilers, relay staging,
the orphan detector, and the runtime that drives them (watches, work queue, leader election).

Never imports ``webhook``; shared code lives in ``wspin``.

Settings: one frozen ``ControllerSettings`` tree (``controller.settings``), parsed once from
flags; every part reads its own branch of it (the manager ``settings.runtime``, the leader
elector ``settings.runtime.leader_election``), never a copy of its fields.

Metrics follow the pattern in ``webhook``'s package docstring: one registry per process (the
manager's ``manager.registry``), one metrics object per part taking it in its constructor,
nothing created at import time and nothing on ``prometheus_client.REGISTRY``.
"""
