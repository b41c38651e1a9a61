"""django-q2 1.11.1, ORM broker: an expired delivery still acknowledges, and a failed save
is acknowledged too.

    pip install django-q2==1.11.1 "psycopg[binary]"
    python repro.py DSN          # an empty PostgreSQL database you may write to

Without DSN it starts an embedded PostgreSQL (leasecheck.dbfixtures, if installed).
Each delivery is run the way a qcluster runs it, with django-q2's own functions in this
one process: one turn of `pusher()` (its broker's `dequeue`), then `worker()` and
`monitor()` on the package it queued. Two pushers stand for two clusters; "A stalls
past retry" is a sleep between the two dequeues (A's package waiting in its task queue
behind busy workers, or A's monitor stuck, are the same thing to the broker).
"""

import multiprocessing
import sys
import time

DSN = sys.argv[1] if len(sys.argv) > 1 else None
RETRY = 2


def configure(dsn: str) -> None:
    import django
    from django.conf import settings
    from psycopg.conninfo import conninfo_to_dict

    params = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    name = params.pop("dbname")
    params["options"] = "-c lock_timeout=200"  # a common production setting
    settings.configure(
        DATABASES={
            "default": {"ENGINE": "django.db.backends.postgresql", "NAME": name, "OPTIONS": params}
        },
        INSTALLED_APPS=["django_q"],
        USE_TZ=True,
        SECRET_KEY="repro",
        Q_CLUSTER={
            "name": "repro",
            "orm": "default",
            "retry": RETRY,
            "timeout": 1,
            "max_attempts": 2,
            "poll": 0.05,
        },
    )
    django.setup()
    from django.core.management import call_command

    call_command("migrate", "django_q", verbosity=0)


def dequeue():
    """One turn of a cluster's pusher: the package it dequeued (or None)."""
    from django_q.pusher import pusher

    tasks, stop = multiprocessing.Queue(), multiprocessing.Event()
    stop.set()  # the pusher loop ends after one dequeue
    pusher(tasks, stop)
    time.sleep(0.1)
    return None if tasks.empty() else tasks.get()


def finish(package) -> None:
    """The cluster's worker runs the package, its monitor saves and acknowledges it."""
    from django_q.monitor import monitor
    from django_q.worker import worker

    tasks, results = multiprocessing.Queue(), multiprocessing.Queue()
    tasks.put(package)
    tasks.put("STOP")
    worker(tasks, results, multiprocessing.Value("f", -1))
    results.put("STOP")
    monitor(results)


def rows() -> str:
    from django_q.models import OrmQ

    return f"{OrmQ.objects.count()} queue row(s)"


def saved(task_id: str) -> str:
    from django_q.tasks import fetch

    t = fetch(task_id)
    return (
        "no result"
        if t is None
        else f"success={t.success} attempts={t.attempt_count} result={t.result!r:.40}"
    )


def part1() -> bool:
    from django_q.tasks import async_task

    print(
        "1. an expired delivery's acknowledgement deletes the live one; the live result is dropped"
    )
    tid = async_task("time.time")
    a = dequeue()
    time.sleep(RETRY + 0.2)  # cluster A stalls past retry
    b = dequeue()
    print(f"   A and B each dequeued task {tid}: {a is not None and b is not None}")
    finish(a)
    gone = rows()
    print(f"   A finishes: {saved(tid)}; {gone}, while B still holds its delivery")
    finish(b)
    print(f"   B finishes (its monitor logs 'Processed'): {saved(tid)}; B's result is not saved")
    return a is not None and b is not None and gone.startswith("0 ")


def part2() -> bool:
    from django_q.tasks import async_task

    print(
        "2. a failure of an expired delivery counts toward max_attempts (2) and ends the live one"
    )
    tid = async_task("math.sqrt", -1)
    finish(dequeue())
    print(f"   delivery 1 fails: {saved(tid)}; {rows()} (retried once its lock runs out)")
    time.sleep(RETRY + 0.2)
    a = dequeue()
    time.sleep(RETRY + 0.2)  # A stalls past retry
    b = dequeue()
    finish(a)
    gone = rows()
    print(f"   delivery 2 (A, expired) fails: {saved(tid)}; {gone}, while B still holds delivery 3")
    return a is not None and b is not None and gone.startswith("0 ")


def part3(success_id: str) -> bool:
    import psycopg
    from django_q.tasks import async_task

    print(
        "3. a success whose save fails (a lock timeout) is acknowledged anyway: no result, no row"
    )
    tid = async_task("time.time")
    package = dequeue()
    holder = psycopg.connect(DSN)  # another monitor's pruning holds the saved successes
    holder.execute("select 1 from django_q_task where id = %s for update", [success_id])
    finish(package)  # the monitor logs "Could not save task result", then "Processed"
    holder.rollback()
    holder.close()
    lost = saved(tid) == "no result" and rows().startswith("0 ")
    print(f"   the task ran: {saved(tid)}; {rows()}")
    return lost


def main() -> int:
    from django_q.models import Task

    ok1 = part1()
    ok2 = part2()
    ok3 = part3(Task.objects.filter(success=True).first().id)
    print(
        "REPRODUCED" if ok1 and ok2 and ok3 else "NOT REPRODUCED", f"(1: {ok1}, 2: {ok2}, 3: {ok3})"
    )
    return 0 if ok1 and ok2 and ok3 else 1


if __name__ == "__main__":
    server = None
    if DSN is None:
        from leasecheck.dbfixtures import embedded

        server = embedded.start()
        DSN = server.dsn
    try:
        configure(DSN)
        code = main()
    finally:
        if server is not None:
            server.stop()
    sys.exit(code)
