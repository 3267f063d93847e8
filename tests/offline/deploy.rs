//! `deploy/` checked offline (issue 19): the Kubernetes manifests against
//! Kubernetes' own schemas (`kubernetes-validate`, from PyPI, installed by
//! scripts/test.sh), what they mean against what the daemon needs (a parser
//! test over the YAML), the compose file and Prometheus config, and the
//! Dockerfile (statically here; `docker build` where a Docker engine runs).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The venv scripts/test.sh makes for the manifest check (PyYAML comes with it).
fn venv_bin(name: &str) -> PathBuf {
    let p = root().join(".idpool/kube-venv/bin").join(name);
    assert!(
        p.exists(),
        "{} is missing: run scripts/test.sh (it makes .idpool/kube-venv with kubernetes-validate)",
        p.display()
    );
    p
}

/// Every document of a YAML file, as JSON.
fn yaml(path: &Path) -> Vec<Value> {
    let out = Command::new(venv_bin("python"))
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))",
        ])
        .arg(path)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn validate(files: &[PathBuf]) -> (bool, String) {
    let out = Command::new(venv_bin("kubernetes-validate"))
        .arg("--strict")
        .args(files)
        .output()
        .expect("kubernetes-validate runs");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn manifests() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("deploy/k8s"))
        .expect("deploy/k8s")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    v.sort();
    v
}

#[test]
fn the_manifests_pass_kubernetes_schemas_and_a_broken_one_does_not() {
    let files = manifests();
    assert!(files.len() >= 2, "{files:?}");
    let (ok, out) = validate(&files);
    assert!(ok, "{out}");
    assert!(out.contains("statefulset/idpool"), "{out}");
    // The check has teeth: a field the schema does not know fails it.
    let dir = tempfile::tempdir().expect("tmp");
    let text = std::fs::read_to_string(root().join("deploy/k8s/idpool.yaml")).expect("read");
    let broken = dir.path().join("broken.yaml");
    std::fs::write(
        &broken,
        text.replace("serviceName: idpool", "serviceNam: idpool"),
    )
    .expect("write");
    let (ok, out) = validate(&[broken]);
    assert!(!ok, "a misspelt field passed: {out}");
}

fn kind<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind}/{name}"))
}

#[test]
fn the_manifests_give_the_daemon_what_it_needs() {
    let docs = yaml(&root().join("deploy/k8s/idpool.yaml"));
    // The ConfigMap is deploy/idpool.toml, and that is a valid config.
    let toml = std::fs::read_to_string(root().join("deploy/idpool.toml")).expect("idpool.toml");
    let cm = kind(&docs, "ConfigMap", "idpool-config");
    assert_eq!(
        cm["data"]["idpool.toml"].as_str(),
        Some(toml.as_str()),
        "the ConfigMap drifted from deploy/idpool.toml"
    );
    let cfg = idpool::config::Config::load_file(&root().join("deploy/idpool.toml"))
        .expect("deploy/idpool.toml loads");
    assert!(cfg.cluster.url().is_some() && cfg.cluster.adopt && !cfg.browser.sandbox);

    let sts = kind(&docs, "StatefulSet", "idpool");
    let pod = &sts["spec"]["template"];
    let c = &pod["spec"]["containers"][0];
    // Probes on the daemon's port, the paths it serves.
    let port = c["ports"][0]["containerPort"].as_u64().expect("port");
    assert_eq!(port, u64::from(cfg.server.listen.port()));
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    // The ordinal is the node name; the headless service gives it an address.
    let env: Vec<&Value> = c["env"].as_array().expect("env").iter().collect();
    let var = |n: &str| {
        env.iter()
            .find(|e| e["name"] == n)
            .copied()
            .unwrap_or(&Value::Null)
    };
    assert_eq!(
        var("IDPOOL_NODE")["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );
    assert!(
        var("IDPOOL_ADVERTISE")["value"]
            .as_str()
            .is_some_and(|v| v.contains(".idpool."))
    );
    let headless = kind(&docs, "Service", "idpool");
    assert_eq!(headless["spec"]["clusterIP"], "None");
    assert_eq!(sts["spec"]["serviceName"], "idpool");
    // Hardened as the systemd unit is.
    let sc = &c["securityContext"];
    assert_eq!(pod["spec"]["securityContext"]["runAsNonRoot"], true);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"][0], "ALL");
    // Every path the config names is mounted.
    let mounts: Vec<&str> = c["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .filter_map(|m| m["mountPath"].as_str())
        .collect();
    for path in [
        cfg.pool.data_dir.clone(),
        cfg.server
            .keys_file
            .parent()
            .expect("keys dir")
            .to_path_buf(),
        cfg.cluster
            .key_file
            .clone()
            .and_then(|k| k.parent().map(Path::to_path_buf))
            .expect("cluster key dir"),
    ] {
        assert!(
            mounts.contains(&path.to_str().expect("utf8")),
            "{} is not mounted: {mounts:?}",
            path.display()
        );
    }
    // Memory for every Chromium it may run (half a GiB each).
    let limit = c["resources"]["limits"]["memory"]
        .as_str()
        .expect("memory limit");
    let gib: f64 = limit.trim_end_matches("Gi").parse().expect("Gi");
    let browsers = cfg.slot_plan().len() + cfg.spare_plan().len();
    assert!(
        gib >= 0.5 * browsers as f64 + 1.0,
        "{limit} for {browsers} browsers"
    );
    // The PDB covers the pods.
    let pdb = kind(&docs, "PodDisruptionBudget", "idpool");
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"],
        pod["metadata"]["labels"]
    );
    let redis = yaml(&root().join("deploy/k8s/redis.yaml"));
    let svc = kind(&redis, "Service", "redis");
    assert!(cfg.cluster.url().is_some_and(|u| u.contains(&format!(
        "{}:{}",
        svc["metadata"]["name"].as_str().unwrap_or("?"),
        svc["spec"]["ports"][0]["port"]
    ))));
}

#[test]
fn compose_runs_two_daemons_valkey_and_prometheus_scraping_both() {
    let compose = &yaml(&root().join("deploy/docker-compose.yml"))[0];
    let services = compose["services"].as_object().expect("services");
    for s in ["idpool-a", "idpool-b", "redis", "prometheus"] {
        assert!(services.contains_key(s), "no service {s}");
    }
    let (a, b) = (&services["idpool-a"], &services["idpool-b"]);
    assert_ne!(
        a["environment"]["IDPOOL_NODE"],
        b["environment"]["IDPOOL_NODE"]
    );
    assert_eq!(a["read_only"], true);
    assert_eq!(a["cap_drop"][0], "ALL");
    let prom = &yaml(&root().join("deploy/prometheus/prometheus.yml"))[0];
    let targets = &prom["scrape_configs"][0]["static_configs"][0]["targets"];
    for t in ["idpool-a:7777", "idpool-b:7777"] {
        assert!(
            targets
                .as_array()
                .is_some_and(|v| v.contains(&Value::from(t))),
            "{t} not scraped"
        );
    }
}

#[test]
fn the_dockerfile_builds_a_non_root_image_whose_entrypoint_is_the_daemon() {
    let text = std::fs::read_to_string(root().join("deploy/Dockerfile")).expect("Dockerfile");
    let stages = text.lines().filter(|l| l.starts_with("FROM ")).count();
    assert!(stages >= 2, "not multi-stage");
    let last = &text[text.rfind("\nFROM ").expect("final stage")..];
    assert!(last.contains("chromium"), "no Chromium in the image");
    assert!(last.contains("USER 10001"), "the image runs as root");
    assert!(last.contains(r#"ENTRYPOINT ["/usr/local/bin/idpool", "serve"]"#));
    // Everything it copies from the build context exists.
    for line in text
        .lines()
        .filter(|l| l.starts_with("COPY ") && !l.contains("--from"))
    {
        let parts: Vec<&str> = line.split_whitespace().collect();
        for src in &parts[1..parts.len() - 1] {
            assert!(
                root().join(src).exists(),
                "COPY {src}: not in the repository"
            );
        }
    }
    // The build stage can load the workspace: every member is copied.
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml");
    let members = manifest
        .lines()
        .find_map(|l| l.strip_prefix("members = "))
        .expect("a workspace");
    let copied: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("COPY ") && !l.contains("--from"))
        .flat_map(|l| l.split_whitespace().skip(1))
        .collect();
    for m in members.split('"').skip(1).step_by(2).filter(|m| *m != ".") {
        assert!(
            copied
                .iter()
                .any(|c| m == *c || m.starts_with(&format!("{}/", c.trim_end_matches('/')))),
            "the Dockerfile does not copy the workspace member {m}"
        );
    }
    let engine = Command::new("docker")
        .arg("info")
        .output()
        .is_ok_and(|o| o.status.success());
    if !engine {
        println!("no Docker engine here: `docker build` is left to machines that have one");
        return;
    }
    let out = Command::new("docker")
        .args(["build", "-f", "deploy/Dockerfile", "-t", "idpool:test", "."])
        .current_dir(root())
        .output()
        .expect("docker build runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
