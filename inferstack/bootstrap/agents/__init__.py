"""Each cloud's monitoring agent, one module per cloud (`aws`, `gcp`, `alibaba`, `huawei`).

A module gives `agent_files(plan, sources, target) -> list[(path, content, mode)]`: the install script at
`telemetry.AGENT_SCRIPT` (a copy of `files/agent_<cloud>.sh`, run by `inferstack-agent.service` as root) and the
agent's configuration, which ships what `sources` lists to `target` (`inferstack.bootstrap.telemetry`). The script
installs a pinned agent from the vendor's repository, checked by the vendor's signature or a pinned checksum (Huawei:
installs nothing, it starts inferstack's own request-rate reporter), and is idempotent: a second run on a
configured server changes nothing.
"""
