"""A worker stops listening for commands at once when it exits.

RQ unsubscribes its command listener and then stops it. With redis-py 8.2, whose ``stop()``
joins the listening thread, a listener that handled Redis's reply to the unsubscribe before
the stop went back to sleep for a minute, and the worker's exit waited for it (seen as a
burst worker taking 60 s, by which time the results of the jobs it had run had expired).
The test puts the main thread where the scheduler sometimes put it: descheduled between
sending the unsubscribe and stopping the listener, until the listener has had the reply.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import django_rq

from whatsblast.rq import SimpleWorker

EXIT_BOUND_S = 10.0  # the hang lasts the listener's sleep time, 60 s


def test_a_worker_whose_listener_had_the_unsubscribe_reply_first_still_exits_at_once() -> None:
    worker = django_rq.get_worker("transactional", worker_class=SimpleWorker)
    worker.subscribe()
    listener = worker.pubsub_thread
    pubsub = worker.pubsub
    assert listener.is_alive()
    deadline = time.monotonic() + EXIT_BOUND_S
    while not pubsub.subscribed:  # the subscription confirmed before the exit starts
        assert time.monotonic() < deadline
        time.sleep(0.01)

    unsubscribe = pubsub.unsubscribe

    def unsubscribe_then_wait_for_the_listener(*args: Any, **kwargs: Any) -> Any:
        sent = unsubscribe(*args, **kwargs)
        # The listener reads the reply and drops the subscription before this thread runs on.
        while pubsub.subscribed and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # and has looped back, if its flag let it
        return sent

    pubsub.unsubscribe = unsubscribe_then_wait_for_the_listener
    exiting = threading.Thread(target=worker.unsubscribe, daemon=True)
    exiting.start()
    exiting.join(EXIT_BOUND_S)

    assert not exiting.is_alive(), "the worker's exit waits for its command listener"
    assert not listener.is_alive()
    assert not pubsub.subscribed
