"""The agent (agentd) in each Active workspace pod: read, reported, drained, metered.

``client`` is the one bounded GET to agentd's admin port; ``answers`` types what it says;
``view`` is what the controller knows of one agent; ``scheduler`` reads every Active pod's
agent for the fleet, its deadlines kept on the controller runtime's work queue; ``report`` is
the agent's part of the Workspace status; ``drain`` holds a recycle until busy sessions end.
Metrics: ``metrics`` (health, drains, automatic suspends), ``usage`` (gauges at scrape time)
and ``metering`` (billing meters).
"""
