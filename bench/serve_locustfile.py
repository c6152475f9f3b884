"""locust's user for bench/serve_load.py --soak: one row a request to `shrinkbert serve`, each user at a fixed
rate (SERVE_LOAD_RATE requests/s), the rows from SERVE_LOAD_TEXTS (JSON), the route from SERVE_LOAD_KIND.

Run by bench/serve_load.py with locust from its own venv; not imported by the kit.
"""
import itertools
import json
import os

from locust import HttpUser, constant_throughput, task

KIND = os.environ.get("SERVE_LOAD_KIND", "sequence")
TEXTS = json.loads(os.environ.get("SERVE_LOAD_TEXTS", '["a short review of a film"]'))
ROWS = itertools.cycle(TEXTS)


class Client(HttpUser):
    wait_time = constant_throughput(float(os.environ.get("SERVE_LOAD_RATE", "1")))

    @task
    def one_row(self):
        text = next(ROWS)
        if KIND == "embedding":
            self.client.post("/embed", json={"inputs": text, "truncate": True})
        elif KIND == "qa":
            self.client.post("/predict", json={"inputs": {"question": "What is it about?", "context": text}})
        else:
            self.client.post("/predict", json={"inputs": text, "truncate": True})
