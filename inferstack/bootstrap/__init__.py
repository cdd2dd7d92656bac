"""Boot-time configuration for an inference server: plan → cloud-init user data + a bundle (pure, no Pulumi).

`render_bootstrap(plan, cloud, options)` returns the user data and the bundle it fetches from the model bucket,
which together install the GPU driver (when the image lacks one), the runtime (vLLM, llama.cpp or Triton) and
the gateway in front of it (nginx), sync the model from the cloud's object storage, and run both as systemd
services. Neither contains a secret: secrets are fetched at service start from the cloud's secret store by
reference.
"""

from __future__ import annotations

from inferstack.bootstrap.options import BootstrapOptions, bucket_problem
from inferstack.bootstrap.render import RenderedBootstrap, render
from inferstack.clouds import Cloud
from inferstack.plan import DeploymentPlan

# The bootstrap's face: a plan rendered with its options, and a brought bucket's name checked before a deploy.
__all__ = ["BootstrapOptions", "RenderedBootstrap", "bucket_problem", "render_bootstrap"]


def render_bootstrap(plan: DeploymentPlan, cloud: Cloud, options: BootstrapOptions) -> RenderedBootstrap:
    """The cloud-init user data (`#cloud-config`) for `plan` on `cloud`, and the bundle it fetches.

    Store `bundle` in the model bucket at `bundle_key` (the components do); the user data checks its sha256.
    Raises InputError, naming the field, when the plan or the options cannot be rendered (a runtime without an
    install for the requested mode, a cloud that differs from the plan's, a bucket name the cloud refuses).
    """
    return render(plan, cloud, options)
