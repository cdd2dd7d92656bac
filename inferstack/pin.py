"""Plans pinned per stack: `inferstack pin stacks/Pulumi.<stack>.yaml` writes the plan the stack deploys next to its
config (`Pulumi.<stack>.plan.json`), to be committed with it.

A stack that gives a workload is sized when `pulumi up` runs; without a pin, a catalog or price update could
change its servers with nothing in the pull request showing why. A pin records a plan and everything it was made
from: the workload's hash (cloud, stage and region included), the sha256 of the stack's calibration file
(inferstack:calibrationFile) and price-override file (inferstack:pricesFile), the date, the inferstack version,
and the catalog rows of the stack's cloud (instance types, prices, exchange rates, discounts).

A pin is a record, never a way around the planner: `pulumi up` plans the workload again from the pin's own catalog
rows, on the pin's date, and deploys the pinned plan only when that gives exactly the pinned report. A pin edited by
hand (a stage, a count, a fleet removed), or written by an inferstack that plans differently, is refused with the
fields that differ; a workload, calibration or price file changed since is refused too. A catalog or price update
alone changes nothing: the pin's rows are planned, not today's (`inferstack diff` shows what today's would change).
"""

from __future__ import annotations

import csv
import datetime
import hashlib
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from inferstack import __version__
from inferstack.clouds import Cloud
from inferstack.errors import InputError, input_error
from inferstack.fields import changed_paths, flatten
from inferstack.plan import DeploymentPlan, PlanReport
from inferstack.sizing.calibration import StackCalibration
from inferstack.sizing.catalog import CATALOG_REGIONS, Catalog, ExchangeRates, PriceBook, instance_rows, offer_of
from inferstack.spec import ModelSpec, WorkloadSpec, problems_from_validation

PINNED_SUFFIX = ".plan.json"
INSTANCE_COLUMNS_LEFT_OUT = ("notes",)  # prose for people: the planner never reads it
PRICE_COLUMNS = ("cloud", "region", "instance_type", "currency", "price_per_hour", "source", "source_date",
                 "from_override_file")
"""What the planner reads of a price row (PriceBook)."""
SPOT_PRICE_COLUMNS = ("cloud", "region", "instance_type", "currency", "price_per_hour", "source", "source_date")
DIFFERENCES_SHOWN = 12
# The fields a reviewer reads first when a pin does not match: what runs, how many, where, how exposed, the cost.
KEY_FIELDS = ("stage", "cloud", "region", "instance_type", "instance_count", "replicas", "zones", "fleet", "serving",
              "accelerator", "spot", "spot_above_floor", "price")


class PinnedCatalog(BaseModel):
    """The catalog rows a pinned plan was made from, for its stack's cloud: instance types and prices as CSV lines
    (the header first), so that a changed price reads as one changed line in a pull request; the exchange rates and
    discounts that applied."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instances: list[str] = Field(description="instances.csv rows of the cloud (without notes), header first.")
    prices: list[str] = Field(description="Price rows of the cloud, the override file merged in, header first.")
    exchange_rates: dict[str, float] = Field(description="USD per unit of each currency.")
    exchange_rates_source: str
    discounts: dict[str, float] = Field(description="Percent off list price, from the override file.")
    spot_prices: list[str] = Field(
        default=[], description="Spot price rows of the cloud's region, header first, when the plan shows one (spot "
                                "capacity above a production floor); empty otherwise.")

    @classmethod
    def of(cls, cloud: Cloud, prices: PriceBook, spot_regions: Sequence[str] = (),
           regions: Sequence[str] | None = None) -> PinnedCatalog:
        """The packaged instance types of `cloud` and the prices in `prices` its plan for `regions` can read (all of
        the cloud's when None); its spot prices in `spot_regions`, the regions of a plan that shows them."""
        instances = [row for row in instance_rows() if row["cloud"] == cloud]
        columns = [c for c in instances[0] if c not in INSTANCE_COLUMNS_LEFT_OUT] if instances else []
        spot = [row for row in prices.spot_rows if row["cloud"] == cloud and row["region"] in spot_regions]
        rows = [row for row in prices.rows if row["cloud"] == cloud]
        return cls(instances=_csv_lines(columns, instances),
                   prices=_csv_lines(list(PRICE_COLUMNS), rows if regions is None else _read_by(cloud, rows, regions)),
                   exchange_rates=prices.rates.usd_per_unit, exchange_rates_source=prices.rates.source,
                   discounts={c: p for c, p in prices.discounts.items() if c == cloud},
                   spot_prices=_csv_lines(list(SPOT_PRICE_COLUMNS), spot) if spot else [])

    def catalog(self, today: datetime.date) -> Catalog:
        """These rows as the planner reads a catalog, prices aged against `today`."""
        prices = PriceBook(_csv_rows(self.prices), ExchangeRates(dict(self.exchange_rates), self.exchange_rates_source),
                           dict(self.discounts), tuple(_csv_rows(self.spot_prices)))
        return Catalog(tuple(offer_of(row) for row in _csv_rows(self.instances)), prices, today)


def _read_by(cloud: Cloud, rows: list[dict[str, str]], regions: Sequence[str]) -> list[dict[str, str]]:
    """The price rows a plan for `regions` reads, in their order: every row of those regions and of the catalog region
    (its price, where a region has none), the user's own, and each type's cheapest packaged row elsewhere (with the
    user's own, the price borrowed where neither region has one, compared as `PriceBook.lookup` compares them; and what
    tells the planner a price list knows the type: `PriceBook.not_sold_in`)."""
    kept = {*regions, CATALOG_REGIONS[cloud]}
    cheapest: dict[str, dict[str, str]] = {}
    for row in rows:
        if row.get("from_override_file") == "yes":  # kept whole below; a packaged row must say the type is known
            continue
        best = cheapest.get(row["instance_type"])
        if best is None or float(row["price_per_hour"]) < float(best["price_per_hour"]):
            cheapest[row["instance_type"]] = row
    chosen = {id(row) for row in cheapest.values()}
    return [row for row in rows
            if row["region"] in kept or row.get("from_override_file") == "yes" or id(row) in chosen]


def _csv_lines(columns: list[str], rows: list[dict[str, str]]) -> list[str]:
    lines = []
    for values in [columns, *([row.get(column, "") for column in columns] for row in rows)]:
        out = io.StringIO()
        csv.writer(out, lineterminator="").writerow(values)
        lines.append(out.getvalue())
    return lines


def _csv_rows(lines: list[str]) -> list[dict[str, str]]:
    return list(csv.DictReader(lines))


class PinnedPlan(BaseModel):
    """What `inferstack pin` writes for a stack."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    inferstack_version: str = Field(description="The inferstack that made the plan.")
    written_on: datetime.date = Field(description="The run date the plan was made on (prices are aged against it).")
    workload_sha256: str = Field(description="Hash of the workload as the stack sizes it (workload_sha256).")
    calibration_sha256: str | None = Field(default=None, description="sha256 of the stack's calibration file "
                                           "(inferstack:calibrationFile) the plan was sized with; None: none.")
    prices_file_sha256: str | None = Field(description="sha256 of the stack's price-override file "
                                           "(inferstack:pricesFile); None: none.")
    catalog: PinnedCatalog = Field(description="The catalog rows the plan was made from.")
    report: PlanReport = Field(description="The plan report for the stack's cloud; its chosen plan is deployed.")

    def written_for(self, workload: WorkloadSpec, calibration_sha256: str | None = None) -> bool:
        """Whether this pin was written for `workload` as the stack sizes it now, with that calibration file."""
        return self.workload_sha256 == workload_sha256(workload) and self.calibration_sha256 == calibration_sha256

    def chosen(self) -> DeploymentPlan:
        (outcome,) = self.report.clouds
        assert outcome.chosen is not None  # pin_stack writes feasible plans only; check_pin refuses others
        return outcome.chosen

    def replanned(self, workload: WorkloadSpec, calibration: StackCalibration | None) -> PlanReport:
        """The report the pin's inputs give: `workload` planned from the pin's catalog rows, on its date."""
        from inferstack.sizing.planner import plan_workload  # sizing is loaded only where a pin is checked

        (cloud,) = workload.placement.clouds
        return plan_workload(workload, clouds=[cloud], catalog=self.catalog.catalog(self.written_on),
                             calibration=calibration.calibration if calibration else None)

    def differences(self, replanned: PlanReport) -> list[str]:
        """How the pinned report differs from `replanned`, field by field, the fields a reviewer reads first first
        (empty: they are the same)."""
        pinned, planned = self.report.model_dump(mode="json"), replanned.model_dump(mode="json")
        if pinned == planned:
            return []
        before, after = _chosen_json(pinned), _chosen_json(planned)
        changed = changed_paths(before, after)
        # A section present on one side only ("fleet": null) is one difference, not one per field inside it.
        whole = {path for path in changed if path not in flatten(before) or path not in flatten(after)}
        paths = sorted((p for p in changed if not any(p.startswith(f"{w}.") for w in whole)), key=_reading_order)
        lines = [f"{path}: pinned {_shown(before, path)}, planned {_shown(after, path)}" for path in paths]
        if not lines:  # the chosen plans agree: the rest of the report was changed
            lines = [f"report.{key}: differs" for key in planned if planned[key] != pinned.get(key)]
        more = len(lines) - DIFFERENCES_SHOWN
        return lines[:DIFFERENCES_SHOWN] + ([f"... and {more} more"] if more > 0 else [])


def _chosen_json(report: dict[str, Any]) -> dict[str, Any]:
    outcomes = report.get("clouds") or [{}]
    return outcomes[0].get("chosen") or {}


def _shown(plan: dict[str, Any], path: str) -> str:
    value: Any = plan
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def _reading_order(path: str) -> tuple[int, str]:
    head = path.split(".")[0]
    return (KEY_FIELDS.index(head) if head in KEY_FIELDS else len(KEY_FIELDS), path)


def pinned_path(stack_file: Path) -> Path:
    """`stacks/Pulumi.aws-prod.yaml` → `stacks/Pulumi.aws-prod.plan.json`."""
    return stack_file.with_name(stack_file.stem + PINNED_SUFFIX)


def workload_sha256(workload: WorkloadSpec) -> str:
    """The workload's identity for a pin: its canonical JSON, a model config file by its content (not its path,
    which differs between checkouts)."""
    data: dict[str, Any] = workload.model_dump(mode="json")
    if isinstance(workload.model, ModelSpec) and workload.model.config is not None:
        config = Path(workload.model.config)
        data["model"]["config"] = hashlib.sha256(config.read_bytes()).hexdigest() if config.is_file() else None
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def file_sha256(path: Path | None) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path is not None and path.is_file() else None


def pin_stack(stack_file: Path) -> tuple[Path, PinnedPlan]:
    """Plan the stack's workload for its cloud, stage and region, and write the pin next to the stack file."""
    from inferstack.sizing.catalog import load_catalog
    from inferstack.sizing.planner import plan_workload
    from inferstack.stack_file import read_stack_calibration_of, read_stack_workload

    workload, prices_file = read_stack_workload(stack_file)
    measured = read_stack_calibration_of(stack_file)
    (cloud,) = workload.placement.clouds
    catalog = load_catalog(prices_file)
    report = plan_workload(workload, clouds=[cloud], catalog=catalog,
                           calibration=measured.calibration if measured else None)
    outcome = report.outcome(cloud)
    chosen = outcome.require_chosen(str(stack_file), after="; nothing was written")
    spot_read = any(plan.spot_above_floor for plan in (chosen, *outcome.alternatives))
    pinned = PinnedPlan(inferstack_version=__version__, written_on=catalog.today,
                        workload_sha256=workload_sha256(workload),
                        calibration_sha256=measured.sha256 if measured else None,
                        prices_file_sha256=file_sha256(prices_file),
                        catalog=PinnedCatalog.of(cloud, catalog.prices, outcome.regions if spot_read else (),
                                                 outcome.regions),
                        report=report)
    # The rows kept are the ones its plan reads (`_read_by`): the pin must plan to itself, or it is never written.
    if pinned.replanned(workload, measured).model_dump_json() != report.model_dump_json():
        raise input_error(str(stack_file), "its pin's own catalog rows would not plan to its report, so nothing was "
                          "written (a defect of inferstack's pin)", fix="report it with the stack and workload files")
    path = pinned_path(stack_file)
    path.write_text(pinned.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return path, pinned


def earlier_pin(stack_file: Path) -> str | None:
    """What the stack's current pin deploys (its summary), before `pin_stack` rewrites it; None without a readable
    one."""
    path = pinned_path(stack_file)
    try:
        return PinnedPlan.model_validate_json(path.read_text(encoding="utf-8")).chosen().summary()
    except (OSError, ValidationError):
        return None


def read_pin(path: Path, *, stack_file: str) -> PinnedPlan:
    """The pin at `path`, or an InputError naming it and the command that rewrites it."""
    fix = f"rewrite it: inferstack pin {stack_file}"
    try:
        return PinnedPlan.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as error:
        if any(e["type"] == "missing" and e["loc"] in (("catalog",), ("prices_file_sha256",)) for e in error.errors()):
            raise input_error(path.name, "was written by an inferstack whose pins did not record their catalog and "
                              "price file, so its plan cannot be checked", fix=fix) from None
        raise InputError(problems_from_validation(error, prefix=path.name), source=f"{path} ({fix})") from None


def check_pin(pinned: PinnedPlan, workload: WorkloadSpec, *, pin_name: str, stack_file: str,
              calibration: StackCalibration | None = None, prices_file: Path | None = None) -> DeploymentPlan:
    """The pinned plan, when the pin was written for the workload (and calibration and price files) the stack gives
    now, and its inputs plan to exactly its report; else an InputError saying what differs and how to re-plan."""
    re_plan = (f"re-plan with `inferstack pin {stack_file}`, review the new plan (inferstack diff) and commit "
               f"{pin_name} with the change")
    when = f"changed since its plan was pinned in {pin_name} on {pinned.written_on}"
    if pinned.calibration_sha256 != (calibration.sha256 if calibration else None):
        raise input_error("inferstack:calibrationFile", f"{when} (the calibration file's content, or whether the "
                          "stack names one)", fix=re_plan)
    if pinned.prices_file_sha256 != file_sha256(prices_file):
        raise input_error("inferstack:pricesFile", f"{when} (the price-override file's content, or whether the stack "
                          "names one)", fix=re_plan)
    if pinned.workload_sha256 != workload_sha256(workload):
        raise input_error("inferstack:workload", f"{when} (the workload, or the stack's cloud, stage or region)",
                          fix=re_plan)
    differences = pinned.differences(pinned.replanned(workload, calibration))
    if differences:
        made_by = (f"written by inferstack {pinned.inferstack_version}, and inferstack {__version__} plans its inputs "
                   "differently" if pinned.inferstack_version != __version__ else
                   "edited by hand, or written by another build of this version: a pin records a plan, it never "
                   "replaces one")
        raise input_error(pin_name, f"is not the plan its workload and its own catalog rows give ({made_by}): "
                          + "; ".join(differences), fix=re_plan)
    return pinned.chosen()


def read_pinned(path: Path, workload: WorkloadSpec, *, stack_file: str, calibration: StackCalibration | None = None,
                prices_file: Path | None = None) -> DeploymentPlan:
    """The plan pinned at `path`, checked against the workload, calibration and price files the stack gives now
    (`check_pin`)."""
    return check_pin(read_pin(path, stack_file=stack_file), workload, pin_name=path.name, stack_file=stack_file,
                     calibration=calibration, prices_file=prices_file)
