"""What a Workspace owns, built and written: the pod, its volume, its credentials.

Pure: ``builder`` assembles the pod from ``containers``, ``volumes``, ``probes``, ``compute``
and ``packages``; ``names`` gives every owned object its name, labels and owner, and
``ownership`` tells ours from a foreign object at our name; ``storage`` is the PVC,
``credentials`` the derived values and their Secret; ``facts`` reads a pod's status once, and
``phase`` turns those facts into the Workspace phase; ``refusals`` reads an admission refusal;
``recycle`` says why a pod is replaced (one reason for its staleness and its drain metrics).
I/O: ``credential_keys`` (the controller's key, read at start) and ``writes`` (create, replace
and delete of owned objects). Nothing here reads a Workspace's status or decides recovery.
"""
