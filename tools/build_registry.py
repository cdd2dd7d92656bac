"""Write inferstack/sizing/data/models.json from models.yaml (the maintained, commented source).

    python tools/build_registry.py

The package loads the JSON (parsing YAML costs ~30 ms of every `inferstack plan`); tests/sizing/test_registry_data.py
fails when the JSON does not match the YAML, so run this after every edit of models.yaml.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

DATA = Path(__file__).resolve().parents[1] / "inferstack" / "sizing" / "data"


def registry_json() -> str:
    entries = yaml.safe_load((DATA / "models.yaml").read_text(encoding="utf-8"))
    return json.dumps(entries, separators=(",", ":"), sort_keys=True) + "\n"


if __name__ == "__main__":
    (DATA / "models.json").write_text(registry_json(), encoding="utf-8")
    print(f"wrote {DATA / 'models.json'}")
