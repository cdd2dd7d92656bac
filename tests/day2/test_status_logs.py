"""`inferstack status` and `inferstack logs` against moto's AWS, on resources made the way the components make them.

Each deployment here is the stack's own preview (the Pulumi program under mocks) recreated in moto: every Auto
Scaling group, target group, load balancer, listener, launch template, server and log group with the names, tags,
sizes and weights the program registered. A change to how the components name or tag what they create fails these
tests, as it would leave `status` finding nothing on a real account.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from moto import mock_aws

import inferstack.day2 as day2
from inferstack.cli import main
from inferstack.errors import InferstackError
from inferstack.pin import pin_stack, pinned_path, read_pin
from inferstack.plan import DeploymentPlan
from inferstack.preview import PreviewResult, RegisteredResource, preview_deployment

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
PRODUCTION = {"name": "chat", "model": "llama-3.1-8b", "precision": "bf16", "traffic": {"requests_per_s": 20},
              "canary": {"precision": "fp8", "weight": 10}}
VALIDATION = {"name": "chat-dev", "model": "llama-3.1-8b", "precision": "bf16",
              "traffic": {"concurrent_users": 4, "prompt_tokens": {"mean": 800, "p95": 2000},
                          "output_tokens": {"mean": 300, "p95": 800}}}
HOURS_RUN = 10


#### A project with stacks, and their deployments in moto ####


def _stack(project: Path, name: str, stage: str, workload: dict[str, Any], **extra: Any) -> Path:
    """A stack file (and its pin) in `project`, as `pulumi stack init` and `inferstack pin` leave them."""
    path = project / "stacks" / f"Pulumi.{name}.yaml"
    config = {"aws:region": REGION, "inferstack:cloud": "aws", "inferstack:stage": stage,
              "inferstack:workload": workload, **extra}
    path.write_text(yaml.safe_dump({"config": config}), encoding="utf-8")
    pin_stack(path)
    return path


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("project")
    (folder / "Pulumi.yaml").write_text("name: inferstack\nruntime: python\nstackConfigDir: stacks\n")
    (folder / "stacks").mkdir()
    _stack(folder, "chat-prod", "production", PRODUCTION, **{"inferstack:apiDomain": "api.example.com"})
    _stack(folder, "chat-dev", "validation", VALIDATION)
    return folder


def _plan(stack_file: Path) -> DeploymentPlan:
    return read_pin(pinned_path(stack_file), stack_file=str(stack_file)).chosen()


def _preview(stack_file: Path) -> PreviewResult:
    """What the project's program registers for the stack (its name and project are the stack's)."""
    config = yaml.safe_load(stack_file.read_text())["config"]
    extra = {key: value for key, value in config.items() if key == "inferstack:apiDomain"}
    return preview_deployment(_plan(stack_file), extra, stack=stack_file.name.split(".")[1])


@pytest.fixture(scope="module")
def previews(project: Path) -> dict[str, PreviewResult]:
    return {name: _preview(project / "stacks" / f"Pulumi.{name}.yaml") for name in ("chat-prod", "chat-dev")}


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """moto's AWS, with the credentials boto3 reads from the environment; the clients the tests build with."""
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        yield {service: boto3.client(service, region_name=REGION)
               for service in ("ec2", "autoscaling", "elbv2", "logs")}


def _of_type(preview: PreviewResult, resource_type: str) -> list[RegisteredResource]:
    return [r for r in preview.resources if r.type == resource_type]


def _tag_list(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": key, "Value": value} for key, value in tags.items()]


def _network(aws: dict[str, Any]) -> tuple[str, list[str]]:
    vpc = aws["ec2"].create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [aws["ec2"].create_subnet(VpcId=vpc, CidrBlock=f"10.0.{n}.0/24", AvailabilityZone=f"{REGION}{zone}")
               ["Subnet"]["SubnetId"] for n, zone in enumerate("ab")]
    return vpc, subnets


def _image(aws: dict[str, Any]) -> str:
    return str(aws["ec2"].describe_images(Owners=["amazon"])["Images"][0]["ImageId"])


def deploy_fleet(aws: dict[str, Any], preview: PreviewResult) -> dict[str, str]:
    """The preview's fleet in moto: target groups, load balancer, listeners, launch templates, groups at their floor,
    the log group. Returns each group's name in AWS by its resource name (server-group, server-canary-group)."""
    vpc, subnets = _network(aws)
    elbv2, arns = aws["elbv2"], {}
    for index, target_group in enumerate(_of_type(preview, "aws:lb/targetGroup:TargetGroup")):
        inputs = target_group.inputs
        arns[target_group.outputs["arn"]] = elbv2.create_target_group(
            Name=f"{inputs['namePrefix']}{index}", Protocol="HTTP", Port=int(inputs["port"]), VpcId=vpc,
            TargetType="instance", Tags=_tag_list(inputs["tags"]))["TargetGroups"][0]["TargetGroupArn"]
    (balancer,) = _of_type(preview, "aws:lb/loadBalancer:LoadBalancer")
    balancer_arn = elbv2.create_load_balancer(Name=f"{balancer.inputs['namePrefix']}lb", Subnets=subnets,
                                              Tags=_tag_list(balancer.inputs["tags"]))["LoadBalancers"][0][
        "LoadBalancerArn"]
    for listener in _of_type(preview, "aws:lb/listener:Listener"):
        actions = [_action(action, arns) for action in listener.inputs["defaultActions"]]
        elbv2.create_listener(LoadBalancerArn=balancer_arn, Protocol="HTTP", Port=int(listener.inputs["port"]),
                              DefaultActions=actions)
    templates = {}
    for template in _of_type(preview, "aws:ec2/launchTemplate:LaunchTemplate"):
        data = {"ImageId": _image(aws), "InstanceType": template.inputs["instanceType"]}
        templates[template.id] = aws["ec2"].create_launch_template(
            LaunchTemplateName=template.name, LaunchTemplateData=data)["LaunchTemplate"]["LaunchTemplateId"]
    names = {}
    for group in _of_type(preview, "aws:autoscaling/group:Group"):
        inputs = group.inputs
        aws["autoscaling"].create_auto_scaling_group(
            AutoScalingGroupName=group.id, MinSize=int(inputs["minSize"]), MaxSize=int(inputs["maxSize"]),
            DesiredCapacity=int(inputs["minSize"]), VPCZoneIdentifier=",".join(subnets), HealthCheckType="ELB",
            LaunchTemplate={"LaunchTemplateId": templates[inputs["launchTemplate"]["id"]], "Version": "1"},
            TargetGroupARNs=[arns[arn] for arn in inputs["targetGroupArns"]],
            Tags=[{"Key": tag["key"], "Value": tag["value"], "PropagateAtLaunch": False} for tag in inputs["tags"]])
        names[group.name] = group.id
    _log_group(aws, preview)
    return names


def _action(action: dict[str, Any], arns: dict[str, str]) -> dict[str, Any]:
    if action["type"] != "forward":
        redirect = action["redirect"]
        return {"Type": "redirect", "RedirectConfig": {"Protocol": redirect["protocol"], "Port": redirect["port"],
                                                       "StatusCode": redirect["statusCode"]}}
    return {"Type": "forward", "ForwardConfig": {"TargetGroups": [
        {"TargetGroupArn": arns[target["arn"]], "Weight": int(target["weight"])}
        for target in action["forward"]["targetGroups"]]}}


def _log_group(aws: dict[str, Any], preview: PreviewResult) -> str:
    (group,) = _of_type(preview, "aws:cloudwatch/logGroup:LogGroup")
    aws["logs"].create_log_group(logGroupName=group.inputs["name"], tags=group.inputs["tags"])
    return str(group.inputs["name"])


def deploy_servers(aws: dict[str, Any], preview: PreviewResult) -> list[str]:
    """The preview's loose servers in moto, with their tags (and its log group); their instance ids."""
    _, subnets = _network(aws)
    ids = []
    for server in _of_type(preview, "aws:ec2/instance:Instance"):
        (instance,) = aws["ec2"].run_instances(
            ImageId=_image(aws), InstanceType=server.inputs["instanceType"], MinCount=1, MaxCount=1,
            SubnetId=subnets[0], TagSpecifications=[{"ResourceType": "instance",
                                                     "Tags": _tag_list(server.inputs["tags"])}])["Instances"]
        ids.append(instance["InstanceId"])
    _log_group(aws, preview)
    return ids


def _launched(aws: dict[str, Any]) -> datetime.datetime:
    """The latest launch time of moto's instances (moto launches them at the real time)."""
    reservations = aws["ec2"].describe_instances()["Reservations"]
    return max(i["LaunchTime"] for r in reservations for i in r["Instances"]).astimezone(datetime.timezone.utc)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


#### status ####


def test_status_of_a_fleet_with_a_canary_shows_each_group_beside_its_plan_and_the_hours_it_ran(
        project, previews, aws, capsys, monkeypatch):
    stack_file = project / "stacks" / "Pulumi.chat-prod.yaml"
    names = deploy_fleet(aws, previews["chat-prod"])
    monkeypatch.setattr(day2, "utc_now", lambda: _launched(aws) + datetime.timedelta(hours=HOURS_RUN))
    code, out, err = _run(capsys, "status", str(stack_file), "--json")
    assert code == 0, err
    report, plan = json.loads(out), _plan(stack_file)
    assert plan.canary is not None and plan.fleet is not None and plan.canary.plan.fleet is not None
    main_group, canary_group = report["groups"]
    assert (main_group["role"], main_group["name"]) == ("main", names["server-group"])
    assert (canary_group["role"], canary_group["name"]) == ("canary", names["server-canary-group"])
    floors = {"main": plan.fleet.min_replicas, "canary": plan.canary.plan.fleet.min_replicas}
    for group, fleet in ((main_group, plan.fleet), (canary_group, plan.canary.plan.fleet)):
        floor = floors[group["role"]]
        assert (group["desired"], group["in_service"], group["healthy"]) == (floor, floor, floor)
        assert (group["min_size"], group["max_size"]) == (group["planned_min"], group["planned_max"]) == (
            fleet.min_replicas, fleet.max_replicas)
        assert group["template"] == {"main": "server-template", "canary": "server-canary-template"}[group["role"]]
        assert (group["revision"], group["on_other_revision"]) == ("1", 0)
        assert group["server_hours_this_month"] == pytest.approx(floor * HOURS_RUN, abs=0.01)
    hourly = plan.price.hourly_per_instance
    canary_hourly = plan.canary.plan.price.hourly_per_instance
    assert hourly is not None and canary_hourly is not None
    assert main_group["cost_this_month"] == {"amount": pytest.approx(floors["main"] * HOURS_RUN * hourly.amount,
                                                                     abs=0.01), "currency": hourly.currency}
    assert report["server_hours_this_month"] == pytest.approx((floors["main"] + floors["canary"]) * HOURS_RUN)
    assert report["cost_this_month"]["amount"] == pytest.approx(
        HOURS_RUN * (floors["main"] * hourly.amount + floors["canary"] * canary_hourly.amount), abs=0.02)
    assert plan.price.monthly is not None and plan.canary.plan.price.monthly is not None
    assert report["monthly_cost"]["amount"] == pytest.approx(
        plan.price.monthly.amount + plan.canary.plan.price.monthly.amount, abs=0.01)
    balancer = report["load_balancer"]
    assert balancer["state"] == "active"
    assert [(t["role"], t["states"]) for t in balancer["targets"]] == [
        ("main", {"healthy": floors["main"]}), ("canary", {"healthy": floors["canary"]})]
    assert balancer["canary_weight_percent"] == report["planned_canary_weight_percent"] == plan.canary.weight == 10
    assert report["notes"] == []
    assert report["plan_source"] == "pinned in Pulumi.chat-prod.plan.json"


def test_status_says_where_the_fleet_differs_from_its_plan(project, previews, aws, capsys):
    """A weight changed by hand, a group resized outside Pulumi, a new template version not yet on the servers, and a
    server its health check failed: each is a note, and the table shows them."""
    names = deploy_fleet(aws, previews["chat-prod"])
    elbv2, autoscaling = aws["elbv2"], aws["autoscaling"]
    (balancer,) = elbv2.describe_load_balancers()["LoadBalancers"]
    https = next(listener for listener in elbv2.describe_listeners(LoadBalancerArn=balancer["LoadBalancerArn"])[
        "Listeners"] if listener["DefaultActions"][0]["Type"] == "forward")
    targets = https["DefaultActions"][0]["ForwardConfig"]["TargetGroups"]
    elbv2.modify_listener(ListenerArn=https["ListenerArn"], DefaultActions=[{"Type": "forward", "ForwardConfig": {
        "TargetGroups": [{**targets[0], "Weight": 75}, {**targets[1], "Weight": 25}]}}])
    main_name = names["server-group"]
    (group,) = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[main_name])["AutoScalingGroups"]
    template = group["LaunchTemplate"]["LaunchTemplateId"]
    aws["ec2"].create_launch_template_version(LaunchTemplateId=template,
                                              LaunchTemplateData={"InstanceType": "m5.large"})
    autoscaling.update_auto_scaling_group(AutoScalingGroupName=main_name, MaxSize=group["MaxSize"] + 3,
                                          LaunchTemplate={"LaunchTemplateId": template, "Version": "2"})
    autoscaling.set_instance_health(InstanceId=group["Instances"][0]["InstanceId"], HealthStatus="Unhealthy")

    code, out, err = _run(capsys, "status", str(project / "stacks" / "Pulumi.chat-prod.yaml"), "--json")
    assert code == 0, err
    report = json.loads(out)
    main_group = report["groups"][0]
    servers = main_group["desired"]
    assert (main_group["revision"], main_group["on_other_revision"]) == ("2", servers)
    assert (main_group["in_service"], main_group["healthy"]) == (servers, servers - 1)
    assert report["load_balancer"]["canary_weight_percent"] == 25
    notes = "\n".join(report["notes"])
    assert f"the group's size is {group['MinSize']}..{group['MaxSize'] + 3} servers, the plan's " \
           f"{group['MinSize']}..{group['MaxSize']}" in notes
    assert "1 server(s) in service are not healthy" in notes
    assert f"{servers} of {servers} servers run another template version than the group's (2)" in notes
    assert "the load balancer sends 25 % of requests to the canary, the plan 10 %" in notes

    code, out, _ = _run(capsys, "status", str(project / "stacks" / "Pulumi.chat-prod.yaml"))
    text = " ".join(out.split())
    assert code == 0
    assert f"main {main_name}: {servers} desired, {servers} in service, {servers - 1} healthy" in text
    assert f"launches from server-template version 2 (0 servers on it, {servers} on another)" in text
    assert "canary weight: 25 % (plan: 10 %)" in text and "Differences from the plan:" in text


def test_hours_this_month_count_from_the_months_start_for_servers_launched_before_it(project, previews, aws):
    deploy_fleet(aws, previews["chat-prod"])
    launched = _launched(aws)
    next_month = (launched.replace(day=1) + datetime.timedelta(days=32)).replace(day=1, hour=3, minute=0, second=0,
                                                                                   microsecond=0)
    report = day2.status(project / "stacks" / "Pulumi.chat-prod.yaml", now=next_month)
    assert [group.server_hours_this_month for group in report.groups] == [
        pytest.approx(len(group.servers) * 3, abs=0.01) for group in report.groups]


def test_status_of_loose_servers_reads_their_status_checks_and_bills_only_running_ones(
        project, previews, aws, capsys, monkeypatch):
    ids = deploy_servers(aws, previews["chat-dev"])
    stack_file = project / "stacks" / "Pulumi.chat-dev.yaml"
    plan = _plan(stack_file)
    assert len(ids) == plan.instance_count >= 1 and plan.fleet is None
    aws["ec2"].run_instances(ImageId=_image(aws), InstanceType="t3.micro", MinCount=1, MaxCount=1, TagSpecifications=[
        {"ResourceType": "instance", "Tags": _tag_list({"project": "inferstack", "stack": "chat-other",
                                                        "managed-by": "inferstack", "Name": "server-server-0"})}])
    monkeypatch.setattr(day2, "utc_now", lambda: _launched(aws) + datetime.timedelta(hours=HOURS_RUN))
    code, out, err = _run(capsys, "status", str(stack_file), "--json")
    assert code == 0, err
    report = json.loads(out)
    (group,) = report["groups"]
    assert (group["role"], group["desired"], group["in_service"], group["healthy"]) == (
        "servers", plan.instance_count, plan.instance_count, plan.instance_count)
    assert [server["id"] for server in group["servers"]] == ids  # not the other stack's server
    assert group["server_hours_this_month"] == pytest.approx(plan.instance_count * HOURS_RUN, abs=0.01)
    assert report["load_balancer"] is None and report["notes"] == []

    aws["ec2"].stop_instances(InstanceIds=ids[:1])
    report = day2.status(stack_file, now=_launched(aws) + datetime.timedelta(hours=HOURS_RUN))
    (group,) = report.groups
    assert (group.in_service, group.server_hours_this_month) == (
        plan.instance_count - 1, pytest.approx((plan.instance_count - 1) * HOURS_RUN, abs=0.01))
    assert f"servers: {plan.instance_count - 1} of {plan.instance_count} servers in service" in report.notes[0]


def test_status_of_a_stack_with_nothing_deployed_says_so_in_one_line_with_the_fix(project, aws, capsys):
    code, out, err = _run(capsys, "status", str(project / "stacks" / "Pulumi.chat-prod.yaml"))
    assert (code, out) == (2, "")
    assert err == ("error: found no Auto Scaling group or EC2 server of stack chat-prod in aws us-east-1: nothing "
                   "tagged project=inferstack, stack=chat-prod, managed-by=inferstack. Fix: check that your "
                   "credentials reach the stack's account and region (AWS_PROFILE, aws:region), or deploy it: pulumi "
                   "up\n")


def test_status_follows_tags_the_stack_overrides(project, previews, aws, tmp_path):
    """A stack's inferstack:tags are merged over the defaults (naming.resource_tags): `stack` set there is the tag."""
    deploy_fleet(aws, previews["chat-prod"])
    renamed = project / "stacks" / "Pulumi.chat-renamed.yaml"
    config = yaml.safe_load((project / "stacks" / "Pulumi.chat-prod.yaml").read_text())["config"]
    renamed.write_text(yaml.safe_dump({"config": {**config, "inferstack:tags": {"stack": "chat-prod"}}}))
    pinned_path(renamed).write_bytes(pinned_path(project / "stacks" / "Pulumi.chat-prod.yaml").read_bytes())
    try:
        report = day2.status(renamed)
    finally:
        renamed.unlink()
        pinned_path(renamed).unlink()
    assert report.stack == "chat-renamed" and [group.role for group in report.groups] == ["main", "canary"]


def test_status_without_credentials_names_where_boto3_looks(project, capsys, monkeypatch, tmp_path):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance role either
    code, _, err = _run(capsys, "status", str(project / "stacks" / "Pulumi.chat-prod.yaml"))
    assert code == 2
    assert "credentials: no usable AWS credentials. Fix: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in err


@pytest.mark.parametrize(("code", "message"), [
    ("ExpiredToken", "credentials: no usable AWS credentials (DescribeAutoScalingGroups answered ExpiredToken). "
                     "Fix: set AWS_ACCESS_KEY_ID"),
    ("AccessDenied", "AWS refused DescribeAutoScalingGroups (AccessDenied). Fix: grant the identity the read-only "
                     "permissions status and logs need: autoscaling:DescribeAutoScalingGroups, ec2:DescribeInstances"),
])
def test_a_refused_call_says_which_credentials_or_permissions_to_fix(project, aws, code, message):
    from botocore.stub import Stubber

    from inferstack.day2 import aws as day2_aws
    from inferstack.day2.stack import read_deployed_stack

    clients = day2_aws.connect(REGION)
    with Stubber(clients.autoscaling) as stub:
        stub.add_client_error("describe_auto_scaling_groups", service_error_code=code, http_status_code=403)
        with pytest.raises(InferstackError) as raised:
            day2_aws.observe(clients, read_deployed_stack(project / "stacks" / "Pulumi.chat-prod.yaml"))
    assert message in str(raised.value) and raised.value.exit_code == 2


def test_logs_of_a_log_group_gone_since_the_tagging_api_listed_it_say_so(aws):
    """The Resource Groups Tagging API also lists resources deleted a short while ago."""
    from botocore.stub import Stubber

    from inferstack.day2 import aws as day2_aws

    clients = day2_aws.connect(REGION)
    now = datetime.datetime.now(datetime.timezone.utc)
    with Stubber(clients.logs) as stub:
        stub.add_client_error("filter_log_events", service_error_code="ResourceNotFoundException",
                              service_message="The specified log group does not exist.")
        with pytest.raises(InferstackError) as raised:
            day2_aws.log_lines(clients, "inferstack/inferstack/chat-prod/server", now - datetime.timedelta(hours=1),
                               now, 10)
    assert str(raised.value) == ("AWS FilterLogEvents: The specified log group does not exist: the stack's resource "
                                 "is gone (destroyed?). Fix: deploy the stack (pulumi up), or check the region")


def test_status_of_a_cloud_it_cannot_ask_yet_says_why_and_where_to_look(capsys):
    code, out, err = _run(capsys, "status", str(ROOT / "stacks" / "Pulumi.gcp-dev.yaml"))
    assert (code, out) == (2, "")
    assert err.startswith("error: inferstack status cannot ask Google Cloud yet: the Compute Engine and Cloud Logging "
                          "client libraries (google-cloud-compute, google-cloud-logging) are in no extra")
    assert err.count("\n") == 1


def test_status_without_the_aws_sdk_names_the_extra_to_install():
    code = ("import sys; sys.modules['boto3'] = None\nfrom inferstack.cli import main\n"
            "raise SystemExit(main(['status', 'stacks/Pulumi.aws-prod.yaml']))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 2
    assert result.stderr == ("error: inferstack status and logs on AWS needs the AWS SDK (boto3 is not installed). "
                             "Fix: pip install 'inferstack[day2]'\n")


#### logs ####


def _put(aws: dict[str, Any], group: str, stream: str, events: list[tuple[datetime.datetime, str]]) -> None:
    aws["logs"].create_log_stream(logGroupName=group, logStreamName=stream)
    aws["logs"].put_log_events(logGroupName=group, logStreamName=stream, logEvents=[
        {"timestamp": int(moment.timestamp() * 1000), "message": message} for moment, message in events])


def test_logs_prints_the_newest_lines_of_the_stacks_log_group_newest_last(project, previews, aws, capsys,
                                                                          monkeypatch):
    names = deploy_fleet(aws, previews["chat-prod"])
    (group,) = aws["autoscaling"].describe_auto_scaling_groups(AutoScalingGroupNames=[names["server-group"]])[
        "AutoScalingGroups"]
    first, second = (member["InstanceId"] for member in group["Instances"][:2])
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    (log_group,) = (r.inputs["name"] for r in _of_type(previews["chat-prod"], "aws:cloudwatch/logGroup:LogGroup"))
    minutes = datetime.timedelta(minutes=1)
    _put(aws, log_group, f"{first}/boot.log", [(now - 90 * minutes, "too old"), (now - 50 * minutes, "boot a"),
                                               (now - 2 * minutes, "boot b")])
    _put(aws, log_group, f"{second}/inferstack-runtime", [(now - 40 * minutes, "runtime a"),
                                                          (now - 1 * minutes, "runtime b")])
    aws["logs"].create_log_group(logGroupName="inferstack/inferstack/other-stack/server",
                                 tags={"project": "inferstack", "stack": "other-stack", "managed-by": "inferstack"})
    monkeypatch.setattr(day2, "utc_now", lambda: now)

    stack_file = str(project / "stacks" / "Pulumi.chat-prod.yaml")
    code, out, err = _run(capsys, "logs", stack_file, "--since", "1h", "--limit", "3")
    assert code == 0, err
    assert [line.split(" ", 2)[1:] for line in out.splitlines()] == [
        [f"{second}/inferstack-runtime", "runtime a"], [f"{first}/boot.log", "boot b"],
        [f"{second}/inferstack-runtime", "runtime b"]]
    assert out.splitlines()[-1].startswith((now - minutes).strftime("%Y-%m-%dT%H:%M:%S.000Z"))
    assert err.startswith(f"# 3 lines of {log_group} from ") and "older lines of the window were left out" in err

    code, out, _ = _run(capsys, "logs", stack_file, "--since", "1h", "--json")
    report = json.loads(out)
    assert [line["message"] for line in report["lines"]] == ["boot a", "runtime a", "boot b", "runtime b"]
    assert (report["log_group"], report["more_before"]) == (log_group, False)


@pytest.mark.parametrize(("args", "message"), [
    (["--since", "1 hour"], "argument --since: must be a number and a unit, s, m, h or d (30m, 1h, 7d), got '1 hour'"),
    (["--limit", "0"], "argument --limit: must be at least 1, got 0"),
])
def test_logs_refuses_a_window_or_limit_it_cannot_read(args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["logs", "stacks/Pulumi.aws-prod.yaml", *args])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_logs_refuses_more_lines_than_one_page_before_asking_the_cloud(capsys):
    code, _, err = _run(capsys, "logs", str(ROOT / "stacks" / "Pulumi.aws-prod.yaml"), "--limit", "10001")
    assert code == 2 and "--limit: must be 1 to 10000 (got 10001). Fix: narrow --since" in err


#### What status reads agrees with what the components create ####


def test_the_deployment_name_and_managed_by_tag_are_the_programs():
    from inferstack.components.naming import MANAGED_BY
    from inferstack.components.program import SERVER_NAME
    from inferstack.day2.stack import DEPLOYMENT_NAME
    from inferstack.day2.stack import MANAGED_BY as STATUS_MANAGED_BY

    assert (DEPLOYMENT_NAME, STATUS_MANAGED_BY) == (SERVER_NAME, MANAGED_BY)


def test_a_stack_without_a_pin_is_compared_with_its_workload_sized_now(project, previews, aws):
    deploy_servers(aws, previews["chat-dev"])
    unpinned = project / "stacks" / "Pulumi.chat-unpinned.yaml"
    config = yaml.safe_load((project / "stacks" / "Pulumi.chat-dev.yaml").read_text())["config"]
    unpinned.write_text(yaml.safe_dump({"config": {**config, "inferstack:tags": {"stack": "chat-dev"}}}))
    try:
        report = day2.status(unpinned)
    finally:
        unpinned.unlink()
    assert report.plan_source.startswith("sized now from the stack's workload (it has no pin)")
    assert report.plan_summary == _plan(project / "stacks" / "Pulumi.chat-dev.yaml").summary()
