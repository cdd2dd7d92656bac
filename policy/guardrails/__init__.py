"""inferstack guardrails: the security invariants of an inferstack deployment, as plain functions over resources.

One rule set, two users:

- the policy pack (`inferstack_policies.py`, next to this folder) wraps each rule into a Pulumi policy, which the
  engine runs on what `pulumi preview` / `pulumi up` is about to deploy;
- the components' security-invariant matrix (`tests/components/test_security_invariants.py`) runs `evaluate` over
  what inferstack registers under Pulumi mocks, on every cloud, plan shape, stage and exposure.

So the components cannot build what the pack would refuse, and the two cannot drift apart.

The package imports neither `pulumi_policy` (it pins protobuf 5, which the main environment cannot install) nor
inferstack (the pack's own environment, `policy/.venv`, installs only `requirements.txt`): only the standard
library (tests/policy/test_pack_layout.py holds it to that). It lives in `policy/` because that folder is all the
pack ships; the analyzer and the tests put the folder on `sys.path`, so its modules import as `guardrails.<module>`.

By concern, each module importing only those above it:

- `resource_types`: the providers' type tokens, and what a cloud cannot express;
- `core`: how rules are called (what a rule sees, how it reports), values as the engine sends them, policy
  documents, and how a stack's resources refer to each other;
- `networks`: sources, openings and ports: what a firewall rule lets in, from where;
- `storage`: buckets (nothing public, public access blocks), encryption at rest, CDNs;
- `storage_grants`: identity policies grant no wildcard storage;
- `server_identity`: the servers' identity holds exactly what inferstack grants;
- `servers`: a fleet's servers have no public address; the metadata service wants session tokens;
- `load_balancers`: listeners (HTTPS only) and backends (the serving port), resource by resource;
- `fleet`: managed groups and the load balancers in front of them as a stack: zones, alarms, production;
- `exposure`: firewalls (admin ports, public ingress), the load balancer as the only public listener, the API key;
- `cache`: managed Redis, private, TLS and AUTH;
- `log_retention`: log stores keep logs for a set number of days;
- `ruleset`: `RESOURCE_RULES`, `STACK_RULES` and `evaluate`.

**Inputs** are what the engine sends: camelCase keys, numbers as floats, nested values as mappings and sequences.
A resource rule sees one resource's inputs (`ResourceInput`); a stack rule sees every resource with its outputs and
property dependencies (`Stack`). Each rule reports `(message, urn=None)` through a callback and raises
`NotApplicable(reason)` where a cloud cannot express the setting.

**Fail closed.** A source, protocol, port, policy document, policy attachment or firewall resource type that a
rule cannot read is a violation whose message names what could not be read; it never passes.

**Unknown values.** During a preview, reading a value that comes from a resource not yet created raises the
engine's own error (the pack's property proxy raises it, not this package); it propagates, and the engine reports
"can't run policy during preview" (advisory) and runs the policy for real at `pulumi up`. Stack rules relate
resources by property dependency, which a preview knows; only where they read a value to relate two resources do
they treat an unknown as "not this one" (`Stack.known`, given the engine's error types).
"""
