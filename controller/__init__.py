"""The wspin controller process: Workspace and InferenceRelay reconcilers, relay staging,
the orphan detector, and the runtime that drives them (watches, work queue, leader election).

Never imports ``webhook``; shared code lives in ``wspin``.
"""
