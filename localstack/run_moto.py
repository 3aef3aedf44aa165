"""Runs moto's server as `moto_server` does, less three costs it pays on every
request, which made the local stack's queues, not the worker, the slowest
part of an invalidation (bench/README.md, "The soak"; docs/local-stack.md):

- it lists moto's package directory (a stat of each of its hundreds of
  entries) to recognise a service, under a lock every request shares;
- it writes an access-log line;
- its queues read the clock through datetime arithmetic, once or twice per
  message for every send and receive (a send computes every attribute of
  its queue, counts included), so a backlog of hundreds made each send and
  receive slow, where SQS's cost does not grow with the backlog.

Behaviour is unchanged — the same answers, the same times — but for one
fix, where moto differs from SQS: a message older than its queue's
MessageRetentionPeriod is never received, as SQS deletes it; moto leaves it
in the queue and stops each receive at it, so that a queue holding one expired
message answers every receive with nothing (the worker's failover window,
which keeps messages 60 s, would seem empty a minute after its first).

    python3 localstack/run_moto.py -H 127.0.0.1 -p 4566
"""

import logging
import sys
import time

import moto.backends
import moto.sqs.models
from moto.server import main

# The modules do not change while the server runs: list them once.
if callable(getattr(moto.backends, "list_of_moto_modules", None)):
    _modules = frozenset(moto.backends.list_of_moto_modules())
    moto.backends.list_of_moto_modules = lambda: _modules

# Errors still reach the log; one line per request does not.
logging.getLogger("werkzeug").setLevel(logging.WARNING)


def _clock(slow, scale):
    """The current time as moto's unix_time(_millis) gives it, from time.time()."""

    def now(dt=None):
        return slow(dt) if dt is not None else time.time() * scale

    return now


for _name, _scale in (("unix_time", 1.0), ("unix_time_millis", 1000.0)):
    if callable(getattr(moto.sqs.models, _name, None)):
        setattr(moto.sqs.models, _name, _clock(getattr(moto.sqs.models, _name), _scale))

_visible = moto.sqs.models.Queue.messages.fget


def _unexpired(queue):
    """The queue's visible messages, but those older than its retention.

    A filter, not a delete: the queue's list is rebuilt without a lock by
    moto's own deletes, and rebuilding it here too lost and repeated
    messages under load.
    """
    oldest = (time.time() - int(queue.message_retention_period)) * 1000
    return [m for m in _visible(queue) if m.sent_timestamp is None or m.sent_timestamp > oldest]


moto.sqs.models.Queue.messages = property(_unexpired)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
