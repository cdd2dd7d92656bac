"""The Pulumi program (`pulumi up` runs this): stack config → workload → plan → InferenceServer → outputs.

All the logic lives in `inferstack.components.program`, which `inferstack preview` runs under mocks.
"""

import pulumi

from inferstack.components.program import deploy, read_stack_config
from inferstack.errors import InferstackError

try:
    deployment = deploy(read_stack_config())
except InferstackError as error:
    # RunError ends the program with the message alone: a config mistake needs no Python traceback.
    raise pulumi.RunError(str(error)) from None

for key, value in deployment.exports.items():
    pulumi.export(key, value)
