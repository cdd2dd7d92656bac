"""Boot-time configuration for an inference server: plan → cloud-init text (pure, no Pulumi).

`render_bootstrap(plan, cloud, options)` returns the user data that installs the GPU driver (when the image
lacks one), the runtime (vLLM, llama.cpp or Triton), syncs the model from the cloud's object storage,
and runs the server as a systemd service. It never contains a secret: secrets are fetched at service start
from the cloud's secret store by reference.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from inferstack.plan import DeploymentPlan
from inferstack.spec import Cloud

InstallMode = Literal["auto", "container", "native"]


class BootstrapOptions(BaseModel):
    """Deploy-time facts the plan does not know: where the model and the secrets live."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_bucket: str = Field(description="Bucket that holds the model files under plan.model.bucket_prefix.")
    region: str = Field(description="Cloud region of the bucket and the secret store.")
    api_key_secret: str | None = Field(
        default=None,
        description="Reference to the endpoint API key in the cloud's secret store (SSM parameter name, GCP secret id, "
                    "Alibaba KMS secret name, Huawei CSMS secret name); None serves without an API key.",
    )
    hub_token_secret: str | None = Field(
        default=None,
        description="Reference to a Hugging Face Hub token in the same store, fetched with the API key at each "
                    "service start and given to the runtime as HF_TOKEN (vLLM and llama.cpp use it for files they "
                    "download from the hub; Triton ignores it). None: no token.",
    )
    install_mode: InstallMode = Field(
        default="auto",
        description="container (Docker + NVIDIA Container Toolkit), native (distro packages / venv), or auto (per "
                    "runtime).",
    )
    storage_endpoint: str | None = Field(
        default=None,
        description="Object-storage endpoint override (private endpoints; the loopback server in tests).",
    )
    secret_endpoint: str | None = Field(
        default=None,
        description="Secret-store endpoint override (VPC endpoints; the loopback server in tests).",
    )
    metadata_endpoint: str | None = Field(
        default=None,
        description="Instance-metadata endpoint override (tests); None uses the cloud's link-local metadata "
                    "server.",
    )


def render_bootstrap(plan: DeploymentPlan, cloud: Cloud, options: BootstrapOptions) -> str:
    """Return the cloud-init user data (`#cloud-config`) for `plan` on `cloud`.

    Raises InputError, naming the field, when the plan or the options cannot be rendered (a runtime without an
    install for the requested mode, a cloud that differs from the plan's, unsafe characters in a name).
    """
    from inferstack.bootstrap.render import render_cloud_config

    return render_cloud_config(plan, cloud, options)
