"""The `inferstack` command line: plan, estimate, models, gpus, catalog, preview, diff, pin, loadtest, calibrate,
manifest, status, logs, rollout.

Tables for people (rich), `--json` for machines. Errors a user can fix are printed as such, without a
traceback, and exit non-zero: 2 for bad input, 3 when no deployment is feasible.
"""

from __future__ import annotations

import _thread
import argparse
import dataclasses
import gc
import importlib.util
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

# This process loads no pydantic plugins; looking for them scans every installed distribution (~50 ms of
# start-up). Set PYDANTIC_DISABLE_PLUGINS yourself to change that.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

# Start-up builds tens of thousands of objects that live until exit (modules, classes, pydantic's schemas) and
# little garbage. The cyclic collector is paused while the imports below run, and what they built is then frozen
# out of every later collection, the one at exit included (gc.freeze; `plan` freezes its own imports too): plan
# --json -4 % instructions. The collector is switched back on afterwards (when it was on).
_COLLECTOR_WAS_ENABLED = gc.isenabled()
gc.disable()


def _import_on_first_use(name: str) -> None:
    """Register module `name` without running it: its code runs when one of its attributes is first read.

    `import name` then finds it in sys.modules and reads only `__spec__`, which it has; any other attribute
    goes through the module's `__getattr__` (PEP 562), which runs the module once, other threads waiting.
    """
    spec = importlib.util.find_spec(name)
    if name in sys.modules or spec is None or spec.loader is None:
        return
    module, loader, lock = importlib.util.module_from_spec(spec), spec.loader, _thread.RLock()
    ran: list[bool] = []

    def run_then_get(attribute: str) -> Any:
        with lock:
            if not ran:
                ran.append(True)
                loader.exec_module(module)
                if vars(module).get("__getattr__") is run_then_get:
                    del module.__getattr__
        if attribute in vars(module):
            return vars(module)[attribute]
        raise AttributeError(f"module {name!r} has no attribute {attribute!r}")

    module.__getattr__ = run_then_get  # type: ignore[method-assign]
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)


# pydantic imports importlib.metadata, and with it email, zipfile and importlib.resources, only to look for those
# plugins: 4 % of a `plan --json` run (60 of 1,440 M instructions).
if os.environ["PYDANTIC_DISABLE_PLUGINS"] in ("__all__", "1", "true"):
    _import_on_first_use("importlib.metadata")

from inferstack.cli_values import (  # noqa: E402  (after the start-up settings above)
    concurrency,
    config_entry,
    duration,
    enum_option,
    fraction,
    non_negative_int,
    plot_path,
    positive_float,
    positive_int,
    region,
)
from inferstack.errors import (  # noqa: E402  (after the start-up settings above, before pydantic loads)
    InfeasibleError,
    InferstackError,
    InputError,
    MissingExtraError,
    Problem,
    input_error,
)
from inferstack.spec import CLOUDS, MODEL_NAME_PATTERN, Engine, KvCacheDtype, Precision  # noqa: E402

gc.freeze()
if _COLLECTOR_WAS_ENABLED:
    gc.enable()

if TYPE_CHECKING:
    from inferstack.plan import PlanReport
    from inferstack.sizing.calibration import Calibration
    from inferstack.sizing.models import ResolvedModel
    from inferstack.spec import WorkloadSpec

Handler = Callable[[argparse.Namespace], int]


def _progress(args: argparse.Namespace, message: str) -> AbstractContextManager[object]:
    """A spinner on stderr while a long step runs: only for a person at a terminal, never with --json, in a pipe
    or in CI (rich is loaded only then)."""
    at_terminal = sys.stdout.isatty() and sys.stderr.isatty() and not os.environ.get("CI")
    if getattr(args, "json", False) or not at_terminal:
        return nullcontext()
    from rich.console import Console

    return Console(stderr=True).status(message)


def _print_json(data: Any) -> None:
    """A pydantic model as pydantic writes it (fast, in Rust), anything else through json."""
    text = (
        data.model_dump_json(indent=2) if hasattr(data, "model_dump_json") else json.dumps(data, indent=2, default=str)
    )
    sys.stdout.write(text + "\n")


# ---- plan ----------------------------------------------------------------------------------------------


def _cmd_plan(args: argparse.Namespace) -> int:
    from inferstack.sizing.planner import ALTERNATIVES_SHOWN, plan_workload
    from inferstack.spec import load_workload

    gc.freeze()  # the planner's modules, like the start-up's (see the top of this module)
    write_plot = _plot_writer() if args.plot else None  # before planning: a missing extra fails at once
    spec = load_workload(args.workload)
    report = plan_workload(spec, clouds=args.cloud, region=args.region, prices_file=args.prices,
                           alternatives=None if write_plot else ALTERNATIVES_SHOWN,
                           calibration=_calibration(args))
    if write_plot:
        with _progress(args, f"Drawing {args.plot}…"):
            write_plot(report, args.plot)
        sys.stderr.write(f"wrote {args.plot}\n")
        report = _shortlisted(report, ALTERNATIVES_SHOWN)
    feasible = any(o.chosen for o in report.clouds)
    simulated = _simulate_plans(spec, report) if args.simulate else None
    if args.json:
        _print_json(report if simulated is None else {**report.model_dump(mode="json"), "simulated": simulated})
    else:
        from inferstack.report import print_plan_report, print_simulated

        print_plan_report(report)
        if simulated is not None:
            print_simulated(simulated)
    if not feasible:
        over_budget = report.over_budget_message()
        raise InfeasibleError(
            f"{over_budget}; offers without a known price cannot be shown to meet a budget" if over_budget else
            "no feasible deployment: see the reasons per cloud and the nearest feasible changes above"
        )
    return 0


def _simulate_plans(spec: WorkloadSpec, report: PlanReport) -> dict[str, dict[str, float]]:
    """Each cloud's chosen LLM plan, one replica simulated at its planned rate (simpy is loaded here only)."""
    from inferstack.sizing.simulate import simulate_plan

    return {
        outcome.cloud: simulate_plan(spec, outcome.chosen)
        for outcome in report.clouds
        if outcome.chosen is not None and outcome.chosen.serving.max_num_seqs is not None
    }


def _plot_writer() -> Callable[[PlanReport, Path], Path]:
    """`plot.write_plot`, or the one-line error that names the extra to install when matplotlib is missing."""
    try:
        from inferstack.plot import write_plot
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] != "matplotlib":
            raise
        raise MissingExtraError("inferstack plan --plot", "matplotlib", "matplotlib", ["plot"]) from None
    return write_plot


def _shortlisted(report: PlanReport, alternatives: int) -> PlanReport:
    """The report as `plan` prints it without --plot, which keeps every feasible plan for the picture."""
    clouds = [o.model_copy(update={"alternatives": o.alternatives[:alternatives]}) for o in report.clouds]
    return report.model_copy(update={"clouds": clouds})


# ---- estimate ------------------------------------------------------------------------------------------


def _model_from_config(path: Path) -> ResolvedModel:
    """`--model-config`: the model, named after a config.json's folder or after any other config file
    (llama-tiny.json: llama-tiny), and shown under that name as written; custom-model when it is no valid name."""

    from pydantic import ValidationError

    from inferstack.sizing.models import resolve
    from inferstack.spec import ModelSpec, problems_from_validation

    config = path.absolute()
    named_after = config.parent.name if config.name == "config.json" else config.stem
    name = named_after.lower() if re.fullmatch(MODEL_NAME_PATTERN, named_after.lower()) else "custom-model"
    try:
        spec = ModelSpec(config=config, name=name)
    except ValidationError as error:
        problems = problems_from_validation(error, model=ModelSpec)
        raise InputError(Problem("--model-config", p.message, value=str(path), fix=p.fix) for p in problems) from None
    model = resolve(spec)
    return model._replace(display_name=named_after) if name != "custom-model" else model


def _cmd_estimate(args: argparse.Namespace) -> int:
    from inferstack.sizing.estimate import estimate
    from inferstack.sizing.hardware import CpuSpec, gpu_spec
    from inferstack.sizing.models import lookup

    model = _model_from_config(args.model_config) if args.model_config else lookup(args.model, field_name="--model")
    gpu = cpu = None
    if args.gpu:
        gpu = gpu_spec(args.gpu)
    else:
        missing = [
            flag
            for flag, value in (("--cpu-cores", args.cpu_cores), ("--cpu-mem-bw-gbps", args.cpu_mem_bw_gbps))
            if value is None
        ]
        if missing:
            raise input_error(
                "hardware",
                f"CPU estimates need {' and '.join(missing)}",
                fix="pass --gpu ID [--gpus N], or --cpu-cores N --cpu-mem-bw-gbps B --cpu-isa ISA",
            )
        cpu = CpuSpec(
            cores=args.cpu_cores,
            memory_bandwidth_gbps=args.cpu_mem_bw_gbps,
            isa=args.cpu_isa,
            ghz=args.cpu_ghz,
            description="command line",
            numa_nodes=args.cpu_numa_nodes,
        )
    precision = args.precision or (Precision.BF16 if model.is_llm else (Precision.FP16 if gpu else Precision.FP32))
    engine = (
        args.engine if args.engine is not Engine.AUTO else _default_engine(model.is_llm, gpu is not None, precision)
    )
    result = estimate(
        model,
        precision=precision,
        kv_dtype=args.kv_dtype,
        engine=engine,
        gpu=gpu,
        gpus=args.gpus,
        cpu=cpu,
        ram_gib=args.ram_gib,
        concurrency=args.concurrency,
        input_tokens=args.input_tokens,
        output_tokens=args.output_tokens,
        gpu_memory_utilization=args.gpu_memory_utilization,
        calibration=_calibration(args),
        processes=args.processes,
    )
    if args.json:
        _print_json(result)
    else:
        from inferstack.report import print_estimate

        print_estimate(result)
    return 3 if result.fits is False else 0  # as `plan` exits when nothing fits: a script sees it


def _default_engine(llm: bool, on_gpu: bool, precision: Precision) -> Engine:
    if not llm:
        return Engine.ONNXRUNTIME
    if not on_gpu or precision.is_gguf:
        return Engine.LLAMACPP
    return Engine.VLLM


# ---- models, gpus, catalog -------------------------------------------------------------------------------


def _cmd_models(args: argparse.Namespace) -> int:
    from inferstack.report import models_rows, print_models

    rows = models_rows()
    _print_json(rows) if args.json else print_models(rows)
    return 0


def _cmd_gpus(args: argparse.Namespace) -> int:
    from inferstack.report import gpus_rows, print_gpus

    rows = gpus_rows()
    _print_json(rows) if args.json else print_gpus(rows)
    return 0


def _cmd_catalog(args: argparse.Namespace) -> int:
    from inferstack.report import catalog_rows, coverage_rows, print_catalog, print_coverage

    if args.coverage:
        coverage = coverage_rows(args.cloud, args.prices)
        _print_json(coverage) if args.json else print_coverage(coverage)
        return 0
    rows = catalog_rows(args.cloud, args.prices, regions=args.filter_region, gpus=args.filter_gpu)
    _print_json(rows) if args.json else print_catalog(rows)
    return 0


def _cmd_catalog_refresh(args: argparse.Namespace) -> int:
    from inferstack.sizing.refresh import refresh_prices

    where = args.region or "every catalog region"
    with _progress(args, f"Asking {args.cloud}'s pricing API for prices in {where}…"):
        result = refresh_prices(args.cloud, region=args.region, output=args.output, all_types=args.all_types)
    _print_json(result) if args.json else print(result.summary())
    return 0


# ---- preview -------------------------------------------------------------------------------------------


def _cmd_preview(args: argparse.Namespace) -> int:
    from inferstack.extras import require_cloud

    if args.program is not None:
        return _preview_program(args)
    if args.workload is None or args.cloud is None:
        raise input_error("preview", "needs a workload file and --cloud, or --program and --stack", fix="inferstack "
                          "preview WORKLOAD --cloud aws, or inferstack preview --program DIR --stack dev")
    require_cloud(args.cloud, f"inferstack preview --cloud {args.cloud}")
    with _progress(args, f"Running the {args.cloud} deployment program under Pulumi mocks…"):
        from inferstack.preview import preview_workload

        result = preview_workload(
            args.workload,
            cloud=args.cloud,
            prices_file=args.prices,
            config=dict(args.config),
            assets_domain=args.assets_domain,
            assets_certificate=args.assets_certificate,
            api_domain=args.api_domain,
            api_certificate=args.api_certificate,
        )
    if args.json:
        _print_json(result.to_json())
    else:
        from inferstack.report import print_preview

        print_preview(result)
    return 0


_WORKLOAD_OPTIONS = ("workload", "cloud", "prices", "assets_domain", "assets_certificate", "api_domain",
                     "api_certificate")


def _preview_program(args: argparse.Namespace) -> int:
    """`preview --program DIR --stack NAME`: your own Pulumi program, run in this process under mocks."""
    from inferstack.extras import require_pulumi

    given = [name for name in _WORKLOAD_OPTIONS if getattr(args, name) is not None]
    if given:
        raise input_error("--program", "previews your program as it is: the program and its stack config decide "
                          "the cloud, the plan and the domains", value=given,
                          fix="leave those out (give stack config with --config KEY=VALUE)")
    if args.stack is None:
        raise input_error("--stack", "is required with --program", fix="name the stack whose Pulumi.<stack>.yaml "
                          "to read, e.g. --stack dev")
    require_pulumi("inferstack preview --program")
    with _progress(args, f"Running {args.program} under Pulumi mocks…"):
        from inferstack.preview import preview_program

        result = preview_program(args.program, args.stack, config=dict(args.config))
    if args.json:
        _print_json(result.to_json())
    else:
        from inferstack.report import print_preview

        print_preview(result)
    return 0


# ---- diff ----------------------------------------------------------------------------------------------


def _cmd_diff(args: argparse.Namespace) -> int:
    from inferstack.diff import diff_workload_files, render_markdown

    diff = diff_workload_files(args.workloads, base_ref=args.base_ref, clouds=args.cloud, prices_file=args.prices)
    if args.json:
        _print_json(diff)
    else:
        sys.stdout.write(render_markdown(diff))
    # A diff reports; an infeasible head is shown in it. A stack whose pin `pulumi up` refuses fails the check too.
    return 2 if diff.pin_status in ("out_of_date", "refused") else 0


# ---- pin -----------------------------------------------------------------------------------------------


def _cmd_pin(args: argparse.Namespace) -> int:
    from inferstack.pin import earlier_pin, pin_stack

    before = earlier_pin(args.stack)
    path, pinned = pin_stack(args.stack)
    if args.json:
        _print_json(pinned)
        return 0
    now = pinned.chosen().summary()
    if before is not None and before != now:
        print(f"{path}: was {before}")
        print(f"{' ' * len(str(path))}  now {now}")
    elif before is not None:
        print(f"{path}: {now} (the same deployment as before)")
    else:
        print(f"{path}: {now}")
    print("Commit it with the stack: `pulumi up` deploys this plan")
    return 0


# ---- loadtest ------------------------------------------------------------------------------------------


def _cmd_loadtest(args: argparse.Namespace) -> int:
    try:
        from inferstack.loadtest import run_from_args
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] != "aiohttp":
            raise
        raise MissingExtraError("inferstack loadtest", "aiohttp", "aiohttp", ["loadtest"]) from None
    return run_from_args(args)


# ---- calibrate -----------------------------------------------------------------------------------------


def _calibration(args: argparse.Namespace) -> Calibration | None:
    """`--calibration FILE` of plan and estimate, read (None without the flag: calibration.py is not even loaded)."""
    if not args.calibration:
        return None
    from inferstack.sizing.calibration import load_calibration

    return load_calibration(args.calibration)


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from inferstack.sizing.calibrate import calibrate

    text = calibrate(args.results, force=args.force).model_dump_json(indent=2) + "\n"
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text)
        sys.stderr.write(f"wrote {args.output}: use it with `inferstack plan WORKLOAD --calibration {args.output}`\n")
    return 0


# ---- manifest ------------------------------------------------------------------------------------------


def _cmd_manifest(args: argparse.Namespace) -> int:
    from inferstack.bootstrap.manifest import write_manifest

    print(write_manifest(args.model_dir, args.revision))
    return 0


# ---- status, logs --------------------------------------------------------------------------------------


def _cmd_status(args: argparse.Namespace) -> int:
    from inferstack.day2 import status

    with _progress(args, f"Asking the cloud what {args.stack} runs…"):
        report = status(args.stack)
    if args.json:
        _print_json(report)
    else:
        from inferstack.day2.render import print_status

        print_status(report)
    return 0


def _cmd_logs(args: argparse.Namespace) -> int:
    from inferstack.day2 import logs

    with _progress(args, f"Reading the logs of {args.stack}…"):
        report = logs(args.stack, since=args.since, limit=args.limit)
    if args.json:
        _print_json(report)
    else:
        from inferstack.day2.render import print_logs

        print_logs(report)
    return 0


def _cmd_rollout(args: argparse.Namespace) -> int:
    from inferstack.day2 import rollout

    progress = sys.stderr if args.json else sys.stdout  # --json: stdout holds the JSON alone
    results = rollout(args.stack, timeout_s=args.timeout.total_seconds() if args.timeout else None,
                      say=lambda line: print(line, file=progress, flush=True))
    if args.json:
        _print_json([dataclasses.asdict(result) for result in results])
    elif results:
        print("; ".join(f"{r.group}: {r.replaced} server(s) replaced in {len(r.batches)} batch(es), all on "
                        f"configuration {r.configuration}" for r in results))
    return 0


# ---- parser --------------------------------------------------------------------------------------------


class _VersionAction(argparse.Action):
    """`--version`: the installed package's version, looked up only when asked (no start-up cost)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("inferstack")
        except PackageNotFoundError:
            found = "unknown (not installed: pip install -e .)"
        sys.stdout.write(f"inferstack {found}\n")
        parser.exit()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with `command`, a subcommand's name, only that subcommand's. argparse builds a parser
    per subcommand, and building every one adds about 1 % to a `plan --json` run: `main` builds the one its command
    line names, and all of them for `--help`, `--version` or a name none has. A new subcommand is an `_add_…`
    function and its entry in `_SUBCOMMANDS`."""
    parser = argparse.ArgumentParser(prog="inferstack", description="Size, price and provision AI inference servers.")
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    known = any(command in names for names, _ in _SUBCOMMANDS)
    for names, add_subcommand in _SUBCOMMANDS:
        if not known or command in names:
            add_subcommand(commands)
    return parser


if TYPE_CHECKING:
    _Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]  # what add_subparsers returns


def _add_plan(commands: _Subparsers) -> None:
    plan = commands.add_parser("plan", help="the cheapest feasible deployment per cloud for a workload file")
    plan.add_argument("workload", type=Path, help="workload file (YAML or JSON), see examples/workloads/")
    plan.add_argument("--cloud", action="append", choices=CLOUDS, help="only this cloud (repeatable)")
    plan.add_argument("--region", type=region, help="only this region")
    plan.add_argument("--prices", type=Path, help="price-override file (prices, discounts, exchange rates)")
    plan.add_argument("--json", action="store_true", help="machine-readable output")
    plan.add_argument(
        "--simulate",
        action="store_true",
        help="also simulate one replica of each chosen LLM plan at its planned rate (discrete-event, seeded) "
        "and print the simulated p95 TTFT/TPOT/end-to-end beside the predicted ones",
    )
    plan.add_argument(
        "--plot",
        type=plot_path,
        metavar="FILE",
        help="also draw monthly cost against p95 latency and headroom for every feasible offer, with the "
        "cost/latency frontier, the chosen plans and the targets, into FILE (.svg or .png; pip install "
        "'inferstack[plot]')",
    )
    plan.add_argument("--calibration", type=Path, metavar="FILE",
                      help="measured speeds (`inferstack calibrate`), used where model, engine and hardware match")
    plan.set_defaults(handler=_cmd_plan)


def _add_estimate(commands: _Subparsers) -> None:
    est = commands.add_parser("estimate", help="memory and speed of one model on given hardware")
    which = est.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help="built-in model name (`inferstack models`)")
    which.add_argument("--model-config", type=Path, help="path to a Hugging Face config.json")
    hardware = est.add_mutually_exclusive_group(required=True)
    hardware.add_argument("--gpu", help="accelerator id (`inferstack gpus`)")
    hardware.add_argument("--cpu-cores", type=positive_int, help="CPU cores (one runtime thread each)")
    est.add_argument("--gpus", type=positive_int, default=1, help="GPUs, tensor parallel (default 1)")
    est.add_argument("--cpu-mem-bw-gbps", type=positive_float, help="CPU memory bandwidth, GB/s")
    est.add_argument("--cpu-isa", choices=("avx2", "avx512", "amx", "neon"), default="avx512")
    est.add_argument("--cpu-ghz", type=positive_float, default=3.0, help="sustained all-core clock (default 3.0)")
    est.add_argument("--ram-gib", type=positive_float, help="CPU server memory, for the fits check")
    est.add_argument("--cpu-numa-nodes", type=positive_int, default=1,
                     help="NUMA nodes (sockets) the cores and bandwidth span; one process gets one node's bandwidth")
    est.add_argument("--processes", type=positive_int, default=1,
                     help="model processes on the server, each with its own weights and KV cache, on --gpus/N GPUs "
                     "or its share of the cores and RAM (default 1)")
    est.add_argument(
        "--precision",
        type=enum_option(Precision),
        metavar="PRECISION",
        help=f"weight precision (one; a workload may say auto or a list): {' '.join(p.value for p in Precision)}",
    )
    est.add_argument(
        "--kv-dtype",
        type=enum_option(KvCacheDtype),
        default=KvCacheDtype.AUTO,
        metavar="DTYPE",
        help=f"KV-cache type: {' '.join(k.value for k in KvCacheDtype)} (default auto)",
    )
    est.add_argument(
        "--engine",
        type=enum_option(Engine),
        default=Engine.AUTO,
        metavar="ENGINE",
        help=f"inference engine: {' '.join(e.value for e in Engine)} (default auto)",
    )
    est.add_argument(
        "--concurrency",
        type=concurrency,
        default=1,
        help="sequences (LLMs) or batch size (other models) at once, or 'max': the most that fit in memory",
    )
    est.add_argument("--input-tokens", type=positive_int, default=512)
    est.add_argument(
        "--output-tokens",
        type=non_negative_int,
        default=None,
        help="tokens generated per request (LLMs, default 128, at least 1); 0 or unset for encoders and other models",
    )
    est.add_argument("--gpu-memory-utilization", type=fraction, default=0.9)
    est.add_argument("--calibration", type=Path, metavar="FILE",
                     help="measured speeds (`inferstack calibrate`), used where model, engine and GPU match")
    est.add_argument("--json", action="store_true")
    est.set_defaults(handler=_cmd_estimate)


def _add_models_and_gpus(commands: _Subparsers) -> None:
    for name, help_text, handler in (
        ("models", "the built-in model registry", _cmd_models),
        ("gpus", "accelerator specs", _cmd_gpus),
    ):
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--json", action="store_true")
        sub.set_defaults(handler=handler)


def _add_catalog(commands: _Subparsers) -> None:
    catalog = commands.add_parser(
        "catalog", help="instance types with specs and prices; `catalog refresh` updates prices"
    )
    catalog.add_argument("--cloud", action="append", choices=CLOUDS, help="only this cloud (repeatable)")
    catalog.add_argument("--region", action="append", dest="filter_region", help="only this region (repeatable)")
    catalog.add_argument(
        "--gpu", action="append", dest="filter_gpu", help="only types with this accelerator: id or family (repeatable)"
    )
    catalog.add_argument("--prices", type=Path, help="price-override file")
    catalog.add_argument(
        "--coverage", action="store_true",
        help="how many types are priced in each region, in which currency, from which sources, how old",
    )
    catalog.add_argument("--json", action="store_true")
    catalog.set_defaults(handler=_cmd_catalog)
    catalog_commands = catalog.add_subparsers(dest="catalog_command", metavar="refresh")
    refresh = catalog_commands.add_parser(
        "refresh", help="pull prices from a cloud's pricing API (credentials from env)"
    )
    refresh.add_argument("--cloud", required=True, choices=CLOUDS, dest="cloud")
    refresh.add_argument("--region", help="region to price (default: the catalog's region)")
    refresh.add_argument("--output", type=Path, help="prices CSV to update (default: the packaged prices.csv)")
    refresh.add_argument("--all-types", action="store_true", help="price every type the API sells (AWS only)")
    refresh.add_argument("--json", action="store_true")
    refresh.set_defaults(handler=_cmd_catalog_refresh)


def _add_preview(commands: _Subparsers) -> None:
    preview = commands.add_parser("preview", help="the resources `pulumi up` would create, offline (Pulumi mocks)")
    preview.add_argument("workload", type=Path, nargs="?", help="workload file; with --cloud (or give --program)")
    preview.add_argument("--cloud", choices=CLOUDS)
    preview.add_argument("--prices", type=Path, help="price-override file")
    preview.add_argument(
        "--assets-domain",
        metavar="DOMAIN",
        help="domain of the static-assets CDN (needed on gcp, alibaba, huawei; without it they are "
        "left out of the preview)",
    )
    preview.add_argument(
        "--assets-certificate",
        metavar="ID",
        help="that domain's certificate where the cloud needs one (aws: ACM ARN; huawei: SCM id)",
    )
    preview.add_argument(
        "--api-domain",
        metavar="DOMAIN",
        help="domain of a fleet's HTTPS endpoint (production plans; without it the preview uses api.example.com)",
    )
    preview.add_argument(
        "--api-certificate",
        metavar="ID",
        help="that domain's certificate where the cloud needs one (docs/deploy-<cloud>.md)",
    )
    preview.add_argument(
        "--config",
        action="append",
        default=[],
        type=config_entry,
        metavar="KEY=VALUE",
        help="stack config, repeatable: inferstack:allowedCidrs='[\"10.0.0.0/8\"]', gcp:project=p",
    )
    preview.add_argument(
        "--program",
        type=Path,
        metavar="DIR",
        help="instead of a workload: your own Pulumi Python program (the folder of its Pulumi.yaml), run in this "
        "process under mocks; it executes your program's code",
    )
    preview.add_argument("--stack", metavar="NAME", help="with --program: the stack whose Pulumi.NAME.yaml to read")
    preview.add_argument("--json", action="store_true")
    preview.set_defaults(handler=_cmd_preview)


def _add_diff(commands: _Subparsers) -> None:
    diff = commands.add_parser("diff", help="what a workload change does to each cloud's plan (markdown for PRs)")
    diff.add_argument("workloads", nargs="+", type=Path, metavar="WORKLOAD", help="BASE HEAD, or HEAD with --base-ref")
    diff.add_argument("--base-ref", metavar="GIT_REF", help="base = HEAD's own path at this git commit (git show)")
    diff.add_argument("--cloud", action="append", choices=CLOUDS, help="only this cloud (repeatable)")
    diff.add_argument("--prices", type=Path, help="price-override file, used for both sides")
    diff.add_argument("--json", action="store_true", help="the structured diff")
    diff.set_defaults(handler=_cmd_diff)


def _add_pin(commands: _Subparsers) -> None:
    pin = commands.add_parser("pin", help="write the plan a stack deploys next to its config (commit it)")
    pin.add_argument("stack", type=Path, metavar="STACK_FILE",
                     help="the stack's config, e.g. stacks/Pulumi.aws-prod.yaml")
    pin.add_argument("--json", action="store_true", help="print the pinned plan")
    pin.set_defaults(handler=_cmd_pin)


def _add_loadtest(commands: _Subparsers) -> None:
    load = commands.add_parser("loadtest", help="drive an OpenAI-compatible endpoint; measure TTFT, TPOT, throughput")
    load.add_argument("url", help="the server's address, e.g. http://127.0.0.1:8000 (a trailing /v1 is fine)")
    load.add_argument("--workload", type=Path, help="send its traffic shape at its plan's rate; compare with the plan")
    load.add_argument("--cloud", choices=CLOUDS, help="with --workload: that cloud's plan (default: the cheapest)")
    load.add_argument("--fleet", action="store_true",
                      help="with --workload: URL is the load balancer; send the fleet's rate, not one server's share")
    load.add_argument("--model", help="model name to request (default: the first at URL/v1/models)")
    load.add_argument("--api", choices=("chat", "completions"), default="chat", help="endpoint (default chat)")
    load.add_argument("--requests", type=positive_int, default=100, help="requests to send (default 100)")
    shape = load.add_mutually_exclusive_group()
    shape.add_argument("--rate", type=positive_float, help="Poisson arrivals, requests per second")
    shape.add_argument("--concurrency", type=positive_int,
                       help="requests in flight (default 1 without --rate or --workload; --sweep's upper bound)")
    load.add_argument("--input-tokens", type=positive_int, help="prompt tokens (default 512, or the workload's)")
    load.add_argument("--output-tokens", type=positive_int, help="tokens to generate (default 128, or the workload's)")
    load.add_argument("--duration", type=positive_float, default=600.0,
                      help="seconds at most; requests in flight then are cut and counted as failed (default 600)")
    load.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the API key (Bearer)")
    load.add_argument("--sweep", action="store_true", help="concurrency 1, 2, 4 … until throughput stops rising")
    load.add_argument("--seed", type=non_negative_int, default=0, help="seed of arrivals and token counts")
    load.add_argument("--json", action="store_true")
    load.set_defaults(handler=_cmd_loadtest)


def _add_calibrate(commands: _Subparsers) -> None:
    cal = commands.add_parser("calibrate", help="turn `loadtest --workload --json` results into a calibration file")
    cal.add_argument("results", nargs="+", type=Path, metavar="RESULT", help="loadtest --json output files")
    cal.add_argument("--output", type=Path, metavar="FILE", help="write here (default: print)")
    cal.add_argument("--force", action="store_true",
                     help="take results whose server answered as another model or engine than the plan's")
    cal.set_defaults(handler=_cmd_calibrate)


def _add_manifest(commands: _Subparsers) -> None:
    manifest = commands.add_parser("manifest", help="write manifest.json (path, size, sha256) for a model folder")
    manifest.add_argument("model_dir", type=Path, help="the folder you upload under the plan's bucket prefix")
    manifest.add_argument("--revision", help="the workload's model.revision, which the server checks (a hub commit "
                          "or a label; the files go under the plan's bucket prefix, which ends in it)")
    manifest.set_defaults(handler=_cmd_manifest)


def _add_status_and_logs(commands: _Subparsers) -> None:
    stack_help = "the stack's config, e.g. stacks/Pulumi.aws-prod.yaml (its pin gives the plan to compare with)"
    status = commands.add_parser("status", help="what a deployed stack runs: servers, health, revision, canary "
                                 "weight, hours and cost this month (the cloud's API; docs/day2.md)")
    status.add_argument("stack", type=Path, metavar="STACK_FILE", help=stack_help)
    status.add_argument("--json", action="store_true")
    status.set_defaults(handler=_cmd_status)
    logs = commands.add_parser("logs", help="the newest lines its servers logged (the cloud's log service)")
    logs.add_argument("stack", type=Path, metavar="STACK_FILE", help=stack_help)
    logs.add_argument("--since", type=duration, default="1h", help="how far back: 90s, 30m, 1h, 7d (default 1h)")
    logs.add_argument("--limit", type=positive_int, default=200, help="lines at most, the newest (default 200)")
    logs.add_argument("--json", action="store_true")
    logs.set_defaults(handler=_cmd_logs)
    rollout = commands.add_parser("rollout", help="replace a fleet's servers that run an old configuration, in "
                                  "batches of the plan's surge, where the cloud's group does not (Huawei AS; "
                                  "docs/day2.md)")
    rollout.add_argument("stack", type=Path, metavar="STACK_FILE", help=stack_help)
    rollout.add_argument("--timeout", type=duration, default=None, help="how long a batch may take to serve, e.g. "
                         "20m (default: twice the plan's cold start)")
    rollout.add_argument("--json", action="store_true")
    rollout.set_defaults(handler=_cmd_rollout)


# Each subcommand's names (as the command line spells them) and what adds its parser, in the order --help lists them.
_SUBCOMMANDS: tuple[tuple[tuple[str, ...], Callable[[_Subparsers], None]], ...] = (
    (("plan",), _add_plan),
    (("estimate",), _add_estimate),
    (("models", "gpus"), _add_models_and_gpus),
    (("catalog",), _add_catalog),
    (("preview",), _add_preview),
    (("diff",), _add_diff),
    (("pin",), _add_pin),
    (("loadtest",), _add_loadtest),
    (("calibrate",), _add_calibrate),
    (("manifest",), _add_manifest),
    (("status", "logs", "rollout"), _add_status_and_logs),
)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    try:
        return int(args.handler(args))
    except InferstackError as error:
        sys.stderr.write(f"error: {error}\n")
        return error.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
