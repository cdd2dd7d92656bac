"""The policy pack, as the Pulumi CLI runs it: `pulumi preview --policy-pack ./policy` (docs/policy.md).

Constructing the PolicyPack starts the analyzer's gRPC server and blocks until the engine stops it, so this file
does nothing else; the rules live in guardrails/ and their Pulumi wrappers in inferstack_policies.py, both importable
and testable.
"""

from inferstack_policies import POLICIES
from pulumi_policy import PolicyPack

PolicyPack(name="inferstack-guardrails", policies=POLICIES)
