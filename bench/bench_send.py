"""What one run's message costs its sender's CPU, by the Celery call that sends it (issue 46,
docs/benchmarks.md §24): Celery's `send_task` as the fleet called it, then with each option
that cut it (`declare=[]`, a held producer), then `send_run`, the fleet's send (Celery's
message API: `app.amqp.create_task_message` + `send_task_message`). Same messages to the same
queues, each way in turn, on a private redis-server.

    .venv/bin/python -m bench.bench_send            # 5 rounds of 4,000 sends to 1,000 queues
    .venv/bin/python -m bench.bench_send --quick
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from bench._fleet import machine, median
from scheduler.local.redis import LocalRedis
from workers.fleet.celery_app import make_celery
from workers.fleet.delivery import send_run
from workers.fleet.keys import RUN_TASK, device_queue
from workers.settings import Settings

Send = Callable[[str, str, Any], None]


def ways(app: Any) -> dict[str, Send]:  # noqa: ANN401 - Celery ships no type hints
    def send_task(run_id: str, device_id: str, **options: Any) -> None:  # noqa: ANN401
        app.send_task(
            RUN_TASK,
            args=[run_id],
            argsrepr=repr([run_id]),
            kwargsrepr="{}",
            queue=device_queue(device_id),
            task_id=run_id,
            ignore_result=True,
            **options,
        )

    return {
        "`send_task`": lambda r, d, _p: send_task(r, d),
        "`send_task`, `declare=[]`": lambda r, d, _p: send_task(r, d, declare=[]),
        "`send_task`, `declare=[]`, held producer": lambda r, d, p: send_task(
            r, d, declare=[], producer=p
        ),
        "`send_run` (message API, held producer)": lambda r, d, p: send_run(app, r, d, producer=p),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    sends, queues, rounds = (500, 100, 3) if args.quick else (4000, 1000, 5)
    devices = [f"d{i}" for i in range(queues)]
    spent: dict[str, list[float]] = {}
    with LocalRedis() as server:
        app = make_celery(Settings(redis_url=server.url, key_prefix="send"))
        try:
            with app.producer_or_acquire() as producer:
                each = ways(app)
                for send in each.values():  # warm: every queue object made, every path run
                    for d in devices:
                        send("warm", d, producer)
                for _ in range(rounds):
                    for name, send in each.items():
                        t0 = time.process_time()
                        for i in range(sends):
                            send(f"r{i}", devices[i % queues], producer)
                        spent.setdefault(name, []).append((time.process_time() - t0) * 1000 / sends)
        finally:
            app.close()
    print(f"# One run's message: the sender's CPU ({machine()})\n")
    print(f"{sends:,} sends to {queues:,} queues a round, {rounds} rounds, the ways in turn\n")
    print("| how | CPU per send (median) | vs `send_task` |")
    print("| --- | ---: | ---: |")
    base = median(spent["`send_task`"])
    for name, got in spent.items():
        print(f"| {name} | {median(got):.3f} ms | {median(got) / base:.2f} |")


if __name__ == "__main__":
    main()
