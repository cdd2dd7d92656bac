"""Fixtures for the Pulumi package tests: the provider the plugin's host builds, its schema, and `construct` driven
the way the engine drives it.

`pulumi package add` runs provider/__main__.py, asks the plugin for its schema and generates an SDK from it; a
TypeScript, Go or YAML program then creates a component through the engine, which calls the plugin's `construct`
with the program's inputs as a protobuf Struct. No Pulumi CLI exists here, so the tests run each piece the CLI and the
engine would: the host's own provider object (captured from running provider/ as the language host runs it), and
`construct` fed wire-format inputs through the SDK's own input decoding, with what it registers recorded under mocks.
"""

from __future__ import annotations

import asyncio
import json
import runpy
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import struct_pb2
from pulumi.provider.experimental import host
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.provider.server import ComponentInitError, ProviderServicer
from pulumi.runtime import proto

# The repository root, so that `tests.sample_plans` imports under plain `pytest` as under `python -m pytest`.
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from inferstack.preview import Recording, record  # noqa: E402

PLUGIN = REPO / "provider"
STACK_CONFIG = {"aws:region": "us-east-1"}  # the region of the aws sample plans and of examples/aws-existing-vpc


@pytest.fixture(scope="session")
def hosted() -> Iterator[ComponentProvider]:
    """The provider `component_provider_host` builds when Pulumi runs the plugin (`python provider/ ENGINE`): the
    folder runs for real; only the host's last step, serving the provider over gRPC, is replaced by a capture."""
    captured: dict[str, Any] = {}
    with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        patch.setattr(host, "is_hosting", False)
        patch.setattr(host, "main", lambda provider, args: captured.update(provider=provider, args=args))
        patch.setattr(sys, "argv", [str(PLUGIN), "127.0.0.1:1"])
        runpy.run_path(str(PLUGIN), run_name="__main__")
    dropped = [str(w.message) for w in caught if "component_provider_host" in str(w.message)]
    assert not dropped, f"components dropped from the schema: {dropped}"
    assert captured["args"] == ["127.0.0.1:1"]
    yield captured["provider"]


@pytest.fixture(scope="session")
def schema(hosted: ComponentProvider) -> dict[str, Any]:
    assert hosted.schema is not None
    loaded: dict[str, Any] = json.loads(hosted.schema)
    return loaded


Construct = Callable[..., Recording]


@pytest.fixture
def construct(hosted: ComponentProvider) -> Construct:
    """`construct(component, inputs, name="chat", dependencies=None)`: ProviderServicer.Construct's own three steps
    (decode the wire inputs, construct, encode the state) under mocks. The recording's value is the
    ConstructResponse, or the ComponentInitError the engine would report. `inputs` use the schema's names and are
    sent as a protobuf Struct; `dependencies` maps an input to the URNs it depends on (it then arrives as an Output).
    """
    servicer = ProviderServicer(hosted, [], engine_address="")

    def _construct(component: str, inputs: dict[str, Any], name: str = "chat",
                   dependencies: dict[str, list[str]] | None = None) -> Recording:
        wire = struct_pb2.Struct()
        wire.update(inputs)
        deps = {key: proto.ConstructRequest.PropertyDependencies(urns=urns)
                for key, urns in (dependencies or {}).items()}

        async def over_the_wire() -> Any:
            decoded = await servicer._construct_inputs(wire, deps)
            try:
                result = hosted.construct(name, f"inferstack:index:{component}", decoded, None)
            except ComponentInitError as error:
                return error
            return await servicer._construct_response(result)

        return record(lambda: asyncio.ensure_future(over_the_wire()), config=STACK_CONFIG, stack="test")

    return _construct
