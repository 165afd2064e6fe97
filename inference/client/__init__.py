"""The only door into the inference worker: the CLI, the GUI and the server all use this client.

``WorkerClient`` starts the worker (a ``spawn`` child), loads models in it and hands out ``RemoteEngine`` and
``RemoteStream`` objects that look like a local ``contract.Engine`` / ``Stream``. A supervisor thread restarts a
dead or hung worker and resumes its streams by replaying audio since their last commit (``inference.replay``);
each stream's ``BacklogPolicy`` bounds the audio not yet processed (docs/architecture.md §2.2, §4). Messages go
out through a writer thread, so a frozen worker with a full pipe blocks no caller.

Callbacks (``on_events``, progress) run on the client's reader thread: hand events to your own thread and never
block in them.

The parts: ``connection`` (the process, its pipe, reader and writer threads), ``dispatch`` (each incoming message
to its handler, by type), ``supervisor`` (death, hang, restart), ``streams``, ``engines``, ``requests`` (answers
awaited), ``policies`` and ``failures``; they see each other only through ``interfaces``.
"""

from inference.client.engines import RemoteEngine
from inference.client.failures import BacklogFull, describe_exit, died_of_itself, error_from_failure
from inference.client.policies import REPLAY_LIMIT_S, BacklogPolicy, WorkerPolicy
from inference.client.streams import EventsCallback, RemoteStream
from inference.client.worker_client import WorkerClient

__all__ = [
    "REPLAY_LIMIT_S",
    "BacklogFull",
    "BacklogPolicy",
    "EventsCallback",
    "RemoteEngine",
    "RemoteStream",
    "WorkerClient",
    "WorkerPolicy",
    "describe_exit",
    "died_of_itself",
    "error_from_failure",
]
