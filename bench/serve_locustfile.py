"""locust's user for bench/serve_load.py --soak: one row a request to `shrinkbert serve`, each user at a fixed
rate (SERVE_LOAD_RATE requests/s), the rows from SERVE_LOAD_TEXTS (JSON), the route from SERVE_LOAD_KIND.

Run by bench/serve_load.py with locust from its own venv; not imported by the kit.
"""
import itertools
import json
import os

from locust import HttpUser, constant_throughput, task

TEXTS = json.loads(os.environ.get("SERVE_LOAD_TEXTS", '["a short review of a film"]'))
ROWS = itertools.cycle(TEXTS)
# (route, body) of one row, per kind of bundle (bench/serve_load.py's requests)
REQUESTS = {
    "sequence": lambda t: ("/predict", {"inputs": t, "truncate": True}),
    "token": lambda t: ("/predict", {"inputs": t, "truncate": True}),
    "qa": lambda t: ("/predict", {"inputs": {"question": "What is it about?", "context": t}}),
    "embedding": lambda t: ("/embed", {"inputs": t, "truncate": True}),
}
REQUEST = REQUESTS[os.environ.get("SERVE_LOAD_KIND", "sequence")]


class Client(HttpUser):
    wait_time = constant_throughput(float(os.environ.get("SERVE_LOAD_RATE", "1")))

    @task
    def one_row(self):
        route, body = REQUEST(next(ROWS))
        self.client.post(route, json=body)
