//! The deployment artefacts in `deploy/` set up cluster mode correctly, read as the tools
//! would read them (no Docker or Kubernetes needed): `deploy/compose.yaml` runs Redis and two
//! nodes with distinct ids that reach that Redis, are forwarded to at their own service
//! address, publish the UDP ports they advertise on the same numbers and are given longer than
//! their drain to stop; `deploy/k8s/duet.yaml` runs GPU pods named by their pod, probed on
//! `/ready` (never restarted for draining), given longer than preStop plus drain to
//! terminate, on their node's network with the node's address advertised for media, behind a
//! Service for HTTP, with a Redis of their own. Every `DUET_*` variable the artefacts name is
//! a real flag (`env = "…"` in `src/config.rs` or its flag groups, `src/config/groups.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::str::FromStr;

use yaml_rust2::{Yaml, YamlLoader};

const COMPOSE: &str = "deploy/compose.yaml";
const K8S: &str = "deploy/k8s/duet.yaml";
const DOCKERFILE: &str = "deploy/Dockerfile";

/// The variables every node of a cluster is given.
const CLUSTER_VARS: [&str; 4] = [
    "DUET_CLUSTER_REDIS",
    "DUET_NODE_ID",
    "DUET_NODE_URL",
    "DUET_PUBLIC_URL",
];

/// `--drain-secs` when not set.
const DEFAULT_DRAIN_SECS: u64 = 30;
/// After the drain's deadline the process takes at most this long to exit.
const EXIT_AFTER_DRAIN_SECS: u64 = 2;

fn read(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Every non-empty document of a YAML file.
fn documents(rel: &str) -> Vec<Yaml> {
    let docs = YamlLoader::load_from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// A scalar as text: a value may be written as a number where a string is meant.
fn scalar(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn parsed<T: FromStr>(y: &Yaml) -> Option<T> {
    scalar(y)?.parse().ok()
}

/// `host` and `port` of `scheme://host:port[/path]`.
fn host_port(url: &str) -> Option<(&str, u16)> {
    let authority = url.split_once("://")?.1.split('/').next()?;
    let (host, port) = authority.rsplit_once(':')?;
    Some((host, port.parse().ok()?))
}

/// Whether every label of a non-empty `selector` map is in `labels` with the same value.
fn selects(selector: &Yaml, labels: &Yaml) -> bool {
    selector.as_hash().is_some_and(|s| {
        !s.is_empty()
            && s.iter()
                .all(|(k, v)| k.as_str().is_some_and(|k| labels[k] == *v))
    })
}

// ---- Compose --------------------------------------------------------------------------

fn compose_services() -> BTreeMap<String, Yaml> {
    let doc = documents(COMPOSE)
        .into_iter()
        .next()
        .expect("deploy/compose.yaml is empty");
    let services = doc["services"]
        .as_hash()
        .expect("compose: `services` is a map");
    services
        .iter()
        .map(|(k, v)| (k.as_str().expect("a service name").to_owned(), v.clone()))
        .collect()
}

fn is_redis(service: &Yaml) -> bool {
    service["image"]
        .as_str()
        .is_some_and(|i| i.starts_with("redis"))
}

/// The Duet nodes: every service but Redis.
fn compose_nodes() -> BTreeMap<String, Yaml> {
    compose_services()
        .into_iter()
        .filter(|(_, s)| !is_redis(s))
        .collect()
}

/// A Compose service's environment: a map, or a list of `NAME=VALUE`.
fn compose_env(service: &Yaml) -> BTreeMap<String, String> {
    let env = &service["environment"];
    if let Some(list) = env.as_vec() {
        return list
            .iter()
            .filter_map(|e| e.as_str()?.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
    }
    let map = env
        .as_hash()
        .expect("compose: `environment` is a map or a list");
    map.iter()
        .map(|(k, v)| {
            (
                k.as_str().expect("a name").to_owned(),
                scalar(v).unwrap_or_default(),
            )
        })
        .collect()
}

fn var<'a>(env: &'a BTreeMap<String, String>, name: &str, node: &str) -> &'a str {
    env.get(name)
        .unwrap_or_else(|| panic!("compose: {node} has no {name}"))
}

fn depends_on(service: &Yaml) -> Vec<String> {
    let deps = &service["depends_on"];
    if let Some(list) = deps.as_vec() {
        return list
            .iter()
            .filter_map(|d| d.as_str().map(str::to_owned))
            .collect();
    }
    let map = deps.as_hash().into_iter().flatten();
    map.filter_map(|(k, _)| k.as_str().map(str::to_owned))
        .collect()
}

fn port_range(text: &str) -> Vec<u16> {
    let (first, last) = text.split_once('-').unwrap_or((text, text));
    let first: u16 = first
        .parse()
        .unwrap_or_else(|_| panic!("compose: port {text}"));
    let last: u16 = last
        .parse()
        .unwrap_or_else(|_| panic!("compose: port {text}"));
    (first..=last).collect()
}

/// `[IP:]HOST:CONTAINER[/PROTOCOL]`, ranges too, as (protocol, host port, container port).
fn short_port(spec: &str) -> Vec<(String, u16, u16)> {
    let (ports, protocol) = spec.split_once('/').unwrap_or((spec, "tcp"));
    let mut fields = ports.rsplit(':');
    let container = port_range(fields.next().expect("compose: a container port"));
    let host = fields.next().map_or_else(Vec::new, port_range);
    host.into_iter()
        .zip(container)
        .map(|(h, c)| (protocol.to_owned(), h, c))
        .collect()
}

/// A Compose service's published ports, short or long syntax.
fn compose_ports(service: &Yaml) -> Vec<(String, u16, u16)> {
    let mut out = Vec::new();
    for port in service["ports"].as_vec().into_iter().flatten() {
        if let Some(spec) = port.as_str() {
            out.extend(short_port(spec));
            continue;
        }
        let protocol = port["protocol"].as_str().unwrap_or("tcp").to_owned();
        let host: u16 =
            parsed(&port["published"]).expect("compose: long syntax without `published`");
        let target: u16 = parsed(&port["target"]).expect("compose: long syntax without `target`");
        out.push((protocol, host, target));
    }
    out
}

/// A Compose duration (`40s`, `1m30s`, `1h`, `500ms`) in seconds.
fn duration_secs(text: &str) -> Option<f64> {
    let (mut total, mut rest) = (0.0, text.trim());
    while !rest.is_empty() {
        let (value, tail) = rest.split_at(rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?);
        let (unit, next) = tail.split_at(
            tail.find(|c: char| c.is_ascii_digit())
                .unwrap_or(tail.len()),
        );
        let factor = match unit {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" => 1e-6,
            _ => return None,
        };
        total += value.parse::<f64>().ok()? * factor;
        rest = next;
    }
    Some(total)
}

/// What `--node-id` accepts: 1 to 32 of `a-z`, `0-9`, `-`.
fn is_node_id(id: &str) -> bool {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    (1..=32).contains(&id.len()) && id.chars().all(allowed)
}

#[test]
fn compose_runs_redis_and_two_nodes_with_distinct_ids() {
    let services = compose_services();
    let redis: Vec<&String> = services
        .iter()
        .filter(|(_, s)| is_redis(s))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(redis.len(), 1, "compose: one Redis service, got {redis:?}");
    let nodes = compose_nodes();
    assert_eq!(
        nodes.len(),
        2,
        "compose: two Duet nodes, got {:?}",
        nodes.keys()
    );
    let mut ids = BTreeSet::new();
    for (name, node) in &nodes {
        let env = compose_env(node);
        let id = var(&env, "DUET_NODE_ID", name);
        assert!(is_node_id(id), "compose: {name}: node id {id:?}");
        assert!(
            ids.insert(id.to_owned()),
            "compose: {name}: node id {id} taken"
        );
        assert_eq!(
            node["build"]["context"].as_str(),
            Some(".."),
            "{name}: context is the repo"
        );
        assert_eq!(
            node["build"]["dockerfile"].as_str(),
            Some(DOCKERFILE),
            "{name}: dockerfile"
        );
        assert!(
            depends_on(node).contains(redis[0]),
            "{name}: depends on {}",
            redis[0]
        );
    }
}

#[test]
fn compose_nodes_reach_redis_and_each_other() {
    let services = compose_services();
    for (name, node) in &compose_nodes() {
        let env = compose_env(node);
        for flag in CLUSTER_VARS {
            assert!(
                !var(&env, flag, name).is_empty(),
                "compose: {name}: {flag} is empty"
            );
        }
        let redis = var(&env, "DUET_CLUSTER_REDIS", name);
        let (host, _) = host_port(redis).unwrap_or_else(|| panic!("{name}: Redis URL {redis}"));
        assert!(
            redis.starts_with("redis://"),
            "compose: {name}: {redis} is not redis://"
        );
        assert!(
            services.get(host).is_some_and(is_redis),
            "{name}: {host} is not the Redis"
        );
        // Other nodes forward to DUET_NODE_URL: this service's name on the network.
        let port: u16 = env
            .get("DUET_PORT")
            .map_or(8080, |p| p.parse().expect("DUET_PORT"));
        let url = var(&env, "DUET_NODE_URL", name);
        assert_eq!(
            host_port(url),
            Some((name.as_str(), port)),
            "compose: {name}: node URL"
        );
        // DUET_PUBLIC_URL reaches this node's HTTP port through its published port.
        let public = var(&env, "DUET_PUBLIC_URL", name);
        let (_, public_port) = host_port(public).expect("DUET_PUBLIC_URL has host:port");
        let published = compose_ports(node).contains(&("tcp".to_owned(), public_port, port));
        assert!(
            published,
            "compose: {name}: {public} is not published to {port}"
        );
    }
}

#[test]
fn compose_nodes_publish_the_udp_ports_they_advertise() {
    let mut taken = BTreeSet::new();
    for (name, node) in &compose_nodes() {
        let env = compose_env(node);
        if var(&env, "DUET_UDP_HOST", name) == "0.0.0.0" {
            assert!(
                !var(&env, "DUET_PUBLIC_IP", name).is_empty(),
                "{name}: no public IP"
            );
        }
        let first: u16 = var(&env, "DUET_UDP_PORT", name)
            .parse()
            .expect("DUET_UDP_PORT");
        // One port per media thread: set so that the published ports are known.
        let threads: u16 = var(&env, "DUET_MEDIA_THREADS", name)
            .parse()
            .expect("threads");
        let same_number: BTreeSet<u16> = compose_ports(node)
            .into_iter()
            .filter(|(protocol, host, target)| protocol == "udp" && host == target)
            .map(|(_, host, _)| host)
            .collect();
        for port in first..first + threads {
            assert!(
                same_number.contains(&port),
                "compose: {name}: UDP {port} not published"
            );
            assert!(
                taken.insert(port),
                "compose: UDP {port} published by two nodes"
            );
        }
    }
}

#[test]
fn compose_nodes_outlast_their_drain() {
    for (name, node) in &compose_nodes() {
        let env = compose_env(node);
        let drain = env.get("DUET_DRAIN_SECS").map_or(DEFAULT_DRAIN_SECS, |d| {
            d.parse().expect("DUET_DRAIN_SECS is a number")
        });
        let grace = node["stop_grace_period"].as_str().and_then(duration_secs);
        let grace = grace.unwrap_or_else(|| panic!("compose: {name}: no stop_grace_period"));
        let needed = (drain + EXIT_AFTER_DRAIN_SECS) as f64;
        assert!(
            grace > needed,
            "compose: {name}: stop_grace_period {grace} s <= {needed} s"
        );
    }
}

// ---- Kubernetes -----------------------------------------------------------------------

fn of_kind<'a>(docs: &'a [Yaml], kind: &str) -> Vec<&'a Yaml> {
    docs.iter()
        .filter(|d| d["kind"].as_str() == Some(kind))
        .collect()
}

fn pod_spec(workload: &Yaml) -> &Yaml {
    &workload["spec"]["template"]["spec"]
}

fn pod_labels(workload: &Yaml) -> &Yaml {
    &workload["spec"]["template"]["metadata"]["labels"]
}

fn containers(workload: &Yaml) -> &[Yaml] {
    pod_spec(workload)["containers"]
        .as_vec()
        .expect("k8s: a workload without containers")
}

/// A container's `env` in order (a variable can only refer to the ones before it).
fn k8s_env(container: &Yaml) -> Vec<(String, &Yaml)> {
    let env = container["env"].as_vec().into_iter().flatten();
    env.map(|e| {
        (
            e["name"]
                .as_str()
                .expect("k8s: env without name")
                .to_owned(),
            e,
        )
    })
    .collect()
}

fn entry<'a>(env: &[(String, &'a Yaml)], name: &str) -> &'a Yaml {
    let found = env.iter().find(|(n, _)| n == name);
    found
        .unwrap_or_else(|| panic!("k8s: the Duet container has no {name}"))
        .1
}

fn field_ref(entry: &Yaml) -> Option<&str> {
    entry["valueFrom"]["fieldRef"]["fieldPath"].as_str()
}

/// The names `$(NAME)` in a value refers to.
fn references(value: &str) -> Vec<&str> {
    let parts = value.split("$(").skip(1);
    parts
        .filter_map(|p| p.split_once(')').map(|(name, _)| name))
        .collect()
}

/// The StatefulSet or Deployment running Duet (its container sets `DUET_*` variables), and
/// that container.
fn duet_workload(docs: &[Yaml]) -> (&Yaml, &Yaml) {
    let mut found = Vec::new();
    for workload in of_kind(docs, "StatefulSet")
        .into_iter()
        .chain(of_kind(docs, "Deployment"))
    {
        for container in containers(workload) {
            if k8s_env(container)
                .iter()
                .any(|(n, _)| n.starts_with("DUET_"))
            {
                found.push((workload, container));
            }
        }
    }
    assert_eq!(found.len(), 1, "k8s: one workload with a Duet container");
    found[0]
}

/// A probe's or target port as a number: a number, or a container port's name.
fn port_number(port: &Yaml, container: &Yaml) -> Option<u64> {
    if let Some(number) = parsed(port) {
        return Some(number);
    }
    let name = port.as_str()?;
    let ports = container["ports"].as_vec()?;
    let named = ports.iter().find(|p| p["name"].as_str() == Some(name))?;
    parsed(&named["containerPort"])
}

/// Seconds a preStop hook waits: `sleep: {seconds}`, or `sleep N` in its command.
fn prestop_secs(container: &Yaml) -> u64 {
    let hook = &container["lifecycle"]["preStop"];
    if let Some(seconds) = parsed(&hook["sleep"]["seconds"]) {
        return seconds;
    }
    let command = hook["exec"]["command"].as_vec().into_iter().flatten();
    let words: Vec<String> = command.filter_map(scalar).collect();
    let joined = words.join(" ");
    let mut after = joined
        .split_whitespace()
        .skip_while(|w| *w != "sleep")
        .skip(1);
    after.next().and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[test]
fn k8s_pods_take_a_gpu_and_are_probed_on_ready() {
    let docs = documents(K8S);
    let (_, container) = duet_workload(&docs);
    let gpus: Option<u64> = parsed(&container["resources"]["limits"]["nvidia.com/gpu"]);
    assert_eq!(
        gpus,
        Some(1),
        "k8s: the Duet container's limits take one nvidia.com/gpu"
    );
    let ready = &container["readinessProbe"]["httpGet"];
    assert_eq!(
        ready["path"].as_str(),
        Some("/ready"),
        "k8s: readinessProbe on /ready"
    );
    assert_eq!(
        port_number(&ready["port"], container),
        Some(8080),
        "k8s: readiness port"
    );
    // A draining node answers 503 on /ready: a liveness probe there would kill the drain.
    let live = container["livenessProbe"]["httpGet"]["path"].as_str();
    assert_ne!(
        live,
        Some("/ready"),
        "k8s: livenessProbe must not be /ready"
    );
}

#[test]
fn k8s_termination_outlasts_prestop_and_drain() {
    let docs = documents(K8S);
    let (workload, container) = duet_workload(&docs);
    let env = k8s_env(container);
    let drain = env
        .iter()
        .find(|(n, _)| n == "DUET_DRAIN_SECS")
        .map_or(DEFAULT_DRAIN_SECS, |e| {
            parsed(&e.1["value"]).expect("k8s: DUET_DRAIN_SECS is a number")
        });
    let grace: u64 = parsed(&pod_spec(workload)["terminationGracePeriodSeconds"])
        .expect("k8s: terminationGracePeriodSeconds is set");
    let needed = prestop_secs(container) + drain + EXIT_AFTER_DRAIN_SECS;
    assert!(
        grace > needed,
        "k8s: terminationGracePeriodSeconds {grace} <= {needed}"
    );
}

#[test]
fn k8s_env_gives_each_pod_its_own_cluster_identity() {
    let docs = documents(K8S);
    let (workload, container) = duet_workload(&docs);
    let replicas: u64 = parsed(&workload["spec"]["replicas"]).expect("k8s: replicas is set");
    assert!(replicas >= 2, "k8s: a cluster of one ({replicas} replicas)");
    let env = k8s_env(container);
    for flag in CLUSTER_VARS {
        let given = env.iter().any(|(n, _)| n == flag);
        assert!(given, "k8s: the Duet container has no {flag}");
    }
    assert_eq!(
        field_ref(entry(&env, "DUET_NODE_ID")),
        Some("metadata.name"),
        "k8s: node id"
    );
    // Kubernetes expands $(NAME) only for variables defined earlier in the list.
    for (i, (name, e)) in env.iter().enumerate() {
        for r in references(e["value"].as_str().unwrap_or_default()) {
            let earlier = env[..i].iter().any(|(n, _)| n == r);
            assert!(earlier, "k8s: {name} refers to $({r}) before it is defined");
        }
    }
    let node_url = entry(&env, "DUET_NODE_URL")["value"]
        .as_str()
        .expect("k8s: DUET_NODE_URL");
    let per_pod = references(node_url)
        .iter()
        .any(|r| field_ref(entry(&env, r)).is_some());
    assert!(
        per_pod,
        "k8s: DUET_NODE_URL {node_url} is not built from the pod's own address"
    );
    let key = &entry(&env, "DUET_API_KEY")["valueFrom"]["secretKeyRef"];
    let (secret, field) = (
        key["name"].as_str(),
        key["key"]
            .as_str()
            .expect("k8s: DUET_API_KEY from a Secret"),
    );
    for s in of_kind(&docs, "Secret")
        .into_iter()
        .filter(|s| s["metadata"]["name"].as_str() == secret)
    {
        let has = !s["stringData"][field].is_badvalue() || !s["data"][field].is_badvalue();
        assert!(has, "k8s: Secret {secret:?} has no {field}");
    }
}

#[test]
fn k8s_media_reaches_each_pod_on_its_node() {
    let docs = documents(K8S);
    let (workload, container) = duet_workload(&docs);
    let spec = pod_spec(workload);
    assert_eq!(
        spec["hostNetwork"].as_bool(),
        Some(true),
        "k8s: hostNetwork for UDP media"
    );
    // Without it a hostNetwork pod cannot resolve Service names (the Redis).
    let dns = spec["dnsPolicy"].as_str();
    assert_eq!(
        dns,
        Some("ClusterFirstWithHostNet"),
        "k8s: dnsPolicy with hostNetwork"
    );
    let env = k8s_env(container);
    let public_ip = field_ref(entry(&env, "DUET_PUBLIC_IP"));
    assert_eq!(
        public_ip,
        Some("status.hostIP"),
        "k8s: DUET_PUBLIC_IP is the node's address"
    );
    assert_eq!(
        entry(&env, "DUET_UDP_HOST")["value"].as_str(),
        Some("0.0.0.0"),
        "udp host"
    );
    let udp_port: Option<u16> = parsed(&entry(&env, "DUET_UDP_PORT")["value"]);
    assert!(
        udp_port.is_some_and(|p| p > 0),
        "k8s: a fixed DUET_UDP_PORT for the firewall"
    );
    // Two pods on one node would take the same ports: one pod per node.
    let anti =
        &spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    let one_per_node = anti.as_vec().into_iter().flatten().any(|term| {
        term["topologyKey"].as_str() == Some("kubernetes.io/hostname")
            && selects(&term["labelSelector"]["matchLabels"], pod_labels(workload))
    });
    assert!(
        one_per_node,
        "k8s: a required pod anti-affinity on kubernetes.io/hostname"
    );
}

/// Whether a Service sends TCP `port` to the pods of `workload`.
fn serves(service: &Yaml, workload: &Yaml, container: &Yaml, port: u64) -> bool {
    if !selects(&service["spec"]["selector"], pod_labels(workload)) {
        return false;
    }
    let mut ports = service["spec"]["ports"].as_vec().into_iter().flatten();
    ports.any(|p| {
        let tcp = p["protocol"].as_str().is_none_or(|proto| proto == "TCP");
        let target = if p["targetPort"].is_badvalue() {
            &p["port"]
        } else {
            &p["targetPort"]
        };
        tcp && port_number(target, container) == Some(port)
    })
}

#[test]
fn k8s_has_a_service_for_http_and_its_own_redis() {
    let docs = documents(K8S);
    let (workload, container) = duet_workload(&docs);
    let services = of_kind(&docs, "Service");
    let http = services.iter().any(|s| {
        s["spec"]["clusterIP"].as_str() != Some("None") && serves(s, workload, container, 8080)
    });
    assert!(
        http,
        "k8s: a (not headless) Service for TCP 8080 of the Duet pods"
    );
    let url = entry(&k8s_env(container), "DUET_CLUSTER_REDIS")["value"].as_str();
    let url = url.expect("k8s: DUET_CLUSTER_REDIS is a value");
    let (host, port) = host_port(url).unwrap_or_else(|| panic!("k8s: Redis URL {url}"));
    let redis_service = services
        .iter()
        .find(|s| s["metadata"]["name"].as_str() == Some(host));
    let redis_service = redis_service.unwrap_or_else(|| panic!("k8s: no Service {host}"));
    let redis = of_kind(&docs, "Deployment").into_iter().find(|d| {
        let image = containers(d).first().and_then(|c| c["image"].as_str());
        image.is_some_and(|i| i.starts_with("redis"))
            && selects(&redis_service["spec"]["selector"], pod_labels(d))
    });
    let redis = redis.unwrap_or_else(|| panic!("k8s: Service {host} selects no Redis Deployment"));
    let redis_container = &containers(redis)[0];
    assert!(
        serves(redis_service, redis, redis_container, 6379),
        "k8s: {host} serves 6379"
    );
    let mut exposed = redis_service["spec"]["ports"]
        .as_vec()
        .into_iter()
        .flatten();
    assert!(
        exposed.any(|p| parsed(&p["port"]) == Some(port)),
        "k8s: no port {port} on {host}"
    );
}

// ---- Flags ----------------------------------------------------------------------------

/// Every `DUET_NAME` in a text (comments included).
fn duet_variables(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (i, _) in text.match_indices("DUET_") {
        let tail = &text[i..];
        let end = tail.find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'));
        let name = tail[..end.unwrap_or(tail.len())].trim_end_matches('_');
        if name.len() > "DUET".len() {
            names.insert(name.to_owned());
        }
    }
    names
}

#[test]
fn every_duet_variable_in_the_artefacts_is_a_flag() {
    let config = read("src/config.rs") + &read("src/config/groups.rs");
    let mut names: BTreeSet<String> = CLUSTER_VARS.iter().map(|v| (*v).to_owned()).collect();
    for file in [COMPOSE, K8S, DOCKERFILE] {
        names.extend(duet_variables(&read(file)));
    }
    let unknown: Vec<&String> = names
        .iter()
        .filter(|n| !config.contains(&format!("env = \"{n}\"")))
        .collect();
    assert!(
        unknown.is_empty(),
        "not flags in src/config.rs or src/config/groups.rs: {unknown:?}"
    );
}
