"""The bootstrap of a plan with a cache: the gateway's caching path is shipped and configured, its Redis AUTH token
is fetched from the secret store into a root-only file at the gateway's start, never written anywhere else, and its
keys are scoped by the server's group and runtime build as well as the model."""

from __future__ import annotations

import json

import fetch_bundle
import pytest
from sample_plans import one_at_a_time, sample_plan

from inferstack.bootstrap import BootstrapOptions, gateway, render_bootstrap
from inferstack.errors import InputError
from inferstack.runtimes import LLAMACPP
from inferstack.spec import Cache

CA = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n"


def options(**extra: object) -> BootstrapOptions:
    return BootstrapOptions(model_bucket="acme-models", region="us-east-1", api_key_secret="/inferstack/k", **extra)


def bundle_files(plan: object, opts: BootstrapOptions) -> dict[str, str]:
    rendered = render_bootstrap(plan, "gcp", opts)  # type: ignore[arg-type]
    return {f["path"]: f["content"] for f in json.loads(rendered.bundle)["files"]}


def test_a_cached_plan_ships_the_lua_module_the_ca_and_fetches_the_token_at_the_gateways_start() -> None:
    plan = sample_plan("gcp", "gpu-llm").model_copy(update={"cache": Cache(ttl_seconds=900)})
    endpoint = gateway.CacheEndpoint(host="10.64.3.4", port=6378, auth_secret="inferstack-cache-auth",
                                     ca_certificate=CA)
    files = bundle_files(plan, options(cache=endpoint))
    assert files[f"{gateway.CACHE_LUA_DIR}/inferstack_cache.lua"].startswith("-- inferstack inference cache")
    assert files[gateway.CACHE_CA_FILE] == CA
    assert all(fetch_bundle.ALLOWED_PATH.fullmatch(path) for path in files)  # the server's loader installs them all
    config = files[gateway.CONFIG_PATH]
    assert 'host = "10.64.3.4", port = 6378' in config and "ttl_seconds = 900" in config
    assert f"lua_ssl_trusted_certificate {gateway.CACHE_CA_FILE};" in config and "verify = true" in config
    unit = files["/etc/systemd/system/inferstack-gateway.service"]
    assert (f"--secret REDIS_AUTH=inferstack-cache-auth --out {gateway.CACHE_AUTH_FILE} --format env"
            in unit)
    rendered = render_bootstrap(plan, "gcp", options(cache=endpoint))
    assert "GATEWAY_APT_PACKAGES=libnginx-mod-http-lua,lua-nginx-redis,lua-cjson" in rendered.user_data


def test_without_a_cache_nothing_of_it_is_rendered() -> None:
    files = bundle_files(sample_plan("gcp", "gpu-llm"), options())
    assert not any(path.endswith((".lua", ".pem")) for path in files) and "lua" not in files[gateway.CONFIG_PATH]
    assert "REDIS_AUTH" not in files["/etc/systemd/system/inferstack-gateway.service"]


def test_a_cache_endpoint_for_a_plan_without_a_cache_is_refused() -> None:
    endpoint = gateway.CacheEndpoint(host="10.64.3.4", port=6378, auth_secret="inferstack-cache-auth")
    with pytest.raises(InputError, match=r"options\.cache"):
        bundle_files(sample_plan("gcp", "gpu-llm"), options(cache=endpoint))


@pytest.mark.parametrize("host", ["redis.example.com;", "a b", "$(reboot)", "-x", "10.0.0.1\n"])
def test_a_cache_host_that_is_not_a_name_or_address_is_refused(host: str) -> None:
    with pytest.raises(ValueError, match="host"):
        gateway.CacheEndpoint(host=host, port=6379, auth_secret="s")


def test_the_canary_group_and_the_install_mode_render_their_own_cache_scope() -> None:
    plan = one_at_a_time(sample_plan("gcp", "cpu-llm")).model_copy(update={"cache": Cache(ttl_seconds=900)})
    endpoint = gateway.CacheEndpoint(host="10.64.3.4", port=6378, auth_secret="inferstack-cache-auth")
    configs = {(group, mode): bundle_files(plan, options(cache=endpoint, group=group, install_mode=mode))[
        gateway.CONFIG_PATH] for group in ("main", "canary") for mode in ("container", "native")}
    for (group, mode), config in configs.items():
        assert f'scope = "{gateway.cache_scope(plan, mode, group)}"' in config
        assert gateway.cache_scope(plan, mode, group).startswith(f"{group}:llama-3.1-8b:")
    assert len(set(configs.values())) == 4
    native = LLAMACPP.native
    assert native is not None and f"runtime={LLAMACPP.image_cpu}" in configs["main", "container"]
    assert f"runtime={native.pip_distribution}=={native.pip_version}" in configs["main", "native"]


def test_a_server_group_other_than_main_or_canary_is_refused() -> None:
    with pytest.raises(ValueError, match="group"):
        options(group="blue")


def test_an_image_models_answers_are_never_cacheable_while_an_encoders_are() -> None:
    # A diffusion model samples noise: the same request draws another image, so no route of it is deterministic.
    encoder = sample_plan("aws", "gpu-encoder").model_copy(update={"cache": Cache(ttl_seconds=600)})
    images = encoder.model_copy(update={"model": encoder.model.model_copy(update={"kind": "image_generation"})})
    endpoint = gateway.CacheEndpoint(host="10.0.0.5", port=6379, auth_secret="cache-auth")
    assert 'paths = {"/v2/models/"}' in gateway.gateway_config(encoder, api_key=True, mode="container", group="main",
                                                              cache=endpoint)
    assert "paths = {}" in gateway.gateway_config(images, api_key=True, mode="container", group="main", cache=endpoint)
