"""A stage that trains nothing: it adds a number to its parent's, for testing the recipe runner."""
import os
import sys
import time
from dataclasses import dataclass

from shrinkbert.core.artifacts import atomic_artifact, write_manifest
from shrinkbert.core.config import field, stage_main, to_dict


@dataclass
class Config:
    output_dir: str = field("runs/fake")
    parent: str = field("", "a parent artifact directory")
    value: int = field(1, "added to the parent's total")
    sleep: float = field(0.0, "seconds to sleep while writing (to be killed in)")
    seed: int = field(0)
    fail: bool = field(False, "raise instead of writing (to test how a failed stage is reported)")


def run(cfg: Config):
    if cfg.fail:
        raise RuntimeError("fake stage asked to fail")
    total = cfg.value
    if cfg.parent:
        total += int(open(os.path.join(cfg.parent, "total.txt")).read())
    if os.environ.get("FAKE_STAGE_LOG"):
        with open(os.environ["FAKE_STAGE_LOG"], "a") as log:
            log.write(os.path.basename(cfg.output_dir) + "\n")
    with atomic_artifact(cfg.output_dir) as tmp:
        (tmp / "total.txt").write_text(str(total))
        time.sleep(cfg.sleep)
        write_manifest(tmp, stage="fake", parents=[cfg.parent] if cfg.parent else [], config=to_dict(cfg))
    return cfg.output_dir


def main(argv=None):
    return stage_main(Config, run, "fake stage", argv)


if __name__ == "__main__":
    sys.exit(main())
