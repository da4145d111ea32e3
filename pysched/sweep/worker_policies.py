"""Policy files on Dask workers: a worker plugin that loads the client's ``--policy-file``
texts into each worker process's registry.

A worker is a process of its own (a local cluster spawns them; a remote one may be another
machine), so the policies a command loaded from files are not in its registry. The plugin
carries the files' texts, not their paths, and the scheduler hands it to every worker, also
to one a nanny restarts after a crash.
"""
from __future__ import annotations

from distributed.diagnostics.plugin import WorkerPlugin

#: The plugin's name on the scheduler (registering again replaces it).
NAME = "pysched-policy-files"


class PolicyFiles(WorkerPlugin):
    """Loads policy files' texts on every worker when it starts.

    Parameters
    ----------
    sources : list of (str, str)
        ``(path, text)`` of each file, in load order
        (:func:`pysched.policies.files.loaded_sources`).
    """

    def __init__(self, sources: list[tuple[str, str]]) -> None:
        self.sources = list(sources)

    def setup(self, worker) -> None:
        from pysched.policies.files import load_policy_source
        for path, text in self.sources:
            load_policy_source(path, text)


def register(client, sources: list[tuple[str, str]]) -> None:
    """Give every worker of ``client``'s cluster the policy files ``sources`` (a failure to
    load one on a worker is raised here)."""
    client.register_plugin(PolicyFiles(sources), name=NAME)


__all__ = ["NAME", "PolicyFiles", "register"]
