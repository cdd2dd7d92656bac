"""Unit-test your own Pulumi program that uses inferstack's components, the way Pulumi documents unit tests.

    import runpy

    import pulumi
    from inferstack.testing import Mocks

    pulumi.runtime.set_mocks(Mocks(), preview=False)   # Mocks(fallback=YourMocks()) to keep your own answers
    program = {}
    pulumi.runtime.test(lambda: program.update(runpy.run_path("__main__.py")))()   # returns once all is registered

    @pulumi.runtime.test
    def test_the_endpoint_is_inside_my_vpc():
        def check(url):
            assert url.startswith("http://10.20.")
        return program["inference"].endpoint_url.apply(check)   # outputs are checked in an apply

examples/existing-repo/tests has a complete pair of test files (these mocks, and generic ones).

`Mocks` answers as the cloud would, offline, with the offline preview's answers (`inferstack preview`): a resource
of a type the preview computes outputs for (an instance's addresses, a bucket's ARN, a VPC's id) gets a realistic id
and those outputs on top of its inputs, and a lookup the components make gets a realistic answer (zones, images, the
account, the region of your stack config). A lookup of a resource your program creates itself is answered from that
resource: your VPC's `cidr_block`, not a placeholder. Everything else (other types, lookups no component makes, or
one asked with other arguments than they send) goes to `fallback`, your own mocks, or gets Pulumi's generic answers:
`<name>_id` and the inputs back, and no lookup answer.

The components also run under plain generic mocks (`call` answering `{}`): a value only the cloud knows then stays
unknown, as in `pulumi preview`, and every resource is still registered with the inputs your program and the plan
give it. Use `Mocks` to see those values.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.runtime import MockCallArgs, MockResourceArgs

from inferstack.preview import ProgramAnswers

__all__ = ["Mocks"]


class Mocks(pulumi.runtime.Mocks):
    """Pulumi mocks that answer for inferstack's components; `fallback` (your own mocks) answers everything else."""

    def __init__(self, fallback: pulumi.runtime.Mocks | None = None) -> None:
        self.fallback = fallback
        self.answers = ProgramAnswers(strict=False)

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        inputs = dict(args.inputs)
        answer = self.answers.resource(args.typ, args.name, inputs, bool(args.custom))
        if answer is not None:
            return answer
        if self.fallback is not None:
            resource_id, outputs = self.fallback.new_resource(args)
            return resource_id, dict(outputs)
        return f"{args.name}_id", inputs

    def call(self, args: MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]]]:
        answer = self.answers.lookup(args.token, dict(args.args))
        if answer is None and self.fallback is not None:
            fallback = self.fallback.call(args)
            answer, failures = fallback if isinstance(fallback, tuple) else (fallback, [])
            return dict(answer), list(failures or [])
        return answer or {}, []  # never (dict, None): the SDK crashes on it
