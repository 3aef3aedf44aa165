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

Behaviour is unchanged — the same answers, the same times — but for three
fixes, where moto differs from SQS: a retried request gets its first
answer (below), deletes, sends and receives at once all take, each
once (below), and a
message older than its queue's MessageRetentionPeriod is deleted, as SQS
deletes it; moto leaves it
in the queue and stops each receive at it, so that a queue holding one expired
message answers every receive with nothing (the worker's failover window,
which keeps messages 60 s, would seem empty a minute after its first).

    python3 localstack/run_moto.py -H 127.0.0.1 -p 4566
"""

import collections
import logging
import sys
import threading
import time

import moto.backends
import moto.sqs.models
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
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

_delete = moto.sqs.models.Queue.delete_message


def _delete_locked(queue, receipt_handle):
    """moto's delete, under the lock its sends append with.

    moto rebuilds the queue's list without it: a send appended meanwhile was
    lost, and of two deletes at once one came undone — its message hidden
    until its visibility timeout, then received again (a soak's drain held
    60 s by two such messages of the delay queue).
    """
    with queue._messages_lock:
        return _delete(queue, receipt_handle)


moto.sqs.models.Queue.delete_message = _delete_locked

_receive = moto.sqs.models.SQSBackend.receive_message


def _receive_locked(backend, queue_name, *args, **kwargs):
    """moto's receive, its picking under the same lock (its long poll's
    waits let go of it): two receives at once no longer both take a
    message, which SQS gives to one. The messages past the queue's
    retention are deleted first, as SQS deletes them: moto keeps them, and
    its receive costs grow with them (the failover window, which keeps
    messages 60 s and is never consumed, held every message a run sent it,
    and its receives took seconds)."""
    queue = backend.get_queue(queue_name)
    with queue._messages_lock:
        oldest = (time.time() - int(queue.message_retention_period)) * 1000
        kept = [m for m in queue._messages if m.sent_timestamp is None or m.sent_timestamp > oldest]
        if len(kept) < len(queue._messages):
            queue.pending_messages.difference_update(set(queue._messages) - set(kept))
            queue._messages = kept
        return _receive(backend, queue_name, *args, **kwargs)


def _within_retention(backend, queue_name, message):
    """moto's check of a received message's age, without computing every
    attribute of its queue (each count a walk of its messages) per message
    received."""
    retention = int(backend.get_queue(queue_name).message_retention_period)
    return message.sent_timestamp is None or message.sent_timestamp / 1000 + retention > time.time()


moto.sqs.models.SQSBackend.is_message_valid_based_on_retention_period = _within_retention


moto.sqs.models.SQSBackend.receive_message = _receive_locked

# moto's server (werkzeug's) closes every connection after its response,
# and under load the client's transport sometimes closes it before it read a
# 200's body ("use of closed network connection"): the SDK sends the request
# again, and moto does it again — a message sent twice, a receive whose
# messages stay hidden. SQS answers over kept-alive connections and does not
# lose answers so. A request the SDK sends again carries the invocation ID
# of its first attempt: the answer moto gave that attempt is given again.
_answers = collections.OrderedDict()
_answers_lock = threading.Lock()
_KEEP_ANSWERS = 4096


_call = DomainDispatcherApplication.__call__


def _answer_once(self, environ, start_response):
    """DomainDispatcherApplication's call, its answer given again to a retry."""
    invocation = environ.get("HTTP_AMZ_SDK_INVOCATION_ID")
    if not invocation:
        return _call(self, environ, start_response)
    with _answers_lock:
        given = _answers.get(invocation)
    if given is not None:
        start_response(given[0], given[1])
        return [given[2]]
    started = []

    def keep(status, headers, exc_info=None):
        started[:] = [status, headers]
        return start_response(status, headers, exc_info)

    body = b"".join(_call(self, environ, keep))
    if started and started[0].startswith("2"):
        with _answers_lock:
            _answers[invocation] = (started[0], started[1], body)
            while len(_answers) > _KEEP_ANSWERS:
                _answers.popitem(last=False)
    return [body]


DomainDispatcherApplication.__call__ = _answer_once

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
