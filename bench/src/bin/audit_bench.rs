//! The audit benchmark (`bench/audit.sh`, BENCHMARKS.md): a real
//! kube-apiserver holding N PipelineRollouts across 100 namespaces, the
//! release webhook binary auditing them into PolicyReports. It measures the
//! webhook's RSS after the initial list and after the full audit, the time
//! from start to the first complete set of reports, the API requests the
//! audit made (from the API server's own `apiserver_request_total`) and
//! their peak rate, then the time from a policy file change to updated
//! reports. Prints one JSON line per size.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use envtest::{Assets, Cluster, ServeCommand, Served, User, repo_root};
use serde_json::{Value, json};

#[derive(Parser)]
struct Args {
    /// The webhook binary (release build).
    #[arg(long)]
    webhook: PathBuf,
    /// Numbers of PipelineRollouts, one run each.
    #[arg(long, value_delimiter = ',', default_value = "1000,3000,10000")]
    sizes: Vec<usize>,
    /// Namespaces the rollouts are spread across.
    #[arg(long, default_value_t = 100)]
    namespaces: usize,
    /// Parallel kubectl processes creating the rollouts.
    #[arg(long, default_value_t = 4)]
    writers: usize,
    /// More flags for `serve` (e.g. --audit-qps=5).
    #[arg(long, allow_hyphen_values = true)]
    serve_arg: Vec<String>,
    /// What a tenant may store in the fields the audit keeps: every even
    /// rollout carries this many bytes in the webhook's own
    /// force-promote-for annotation, every odd one as many split between
    /// `allow-data-loss` and a bookkeeping annotation of its child
    /// template (0: none).
    #[arg(long, default_value_t = 0)]
    bloat_bytes: usize,
    /// The first this many rollouts carry, instead, `--huge-bytes` in their
    /// pipeline spec (an environment variable of an extra vertex), which a
    /// namespace editor may store up to etcd's object limit.
    #[arg(long, default_value_t = 0)]
    huge: usize,
    /// The bytes each of the `--huge` rollouts carries in its pipeline spec.
    #[arg(long, default_value_t = 1_400 * 1024)]
    huge_bytes: usize,
}

const NAMESPACE_PREFIX: &str = "bench-audit-";

fn main() {
    let args = Args::parse();
    let assets = match Assets::find() {
        Ok(a) => a,
        Err(missing) => {
            eprintln!("audit_bench: {missing}");
            std::process::exit(2);
        }
    };
    for &size in &args.sizes {
        match run(&args, &assets, size) {
            Ok(line) => println!("{line}"),
            Err(why) => {
                eprintln!("audit_bench: {size} rollouts: {why}");
                std::process::exit(1);
            }
        }
    }
}

/// The sample rollout, with a drain timeout and, for `big`, a pipeline
/// spec grown to about 20 KB.
fn rollout(sample: &Value, namespace: &str, name: &str, timeout: i64, big: bool) -> Value {
    let mut object = sample.clone();
    object["metadata"] = json!({"name": name, "namespace": namespace});
    if let Some(spec) = object["spec"].as_object_mut() {
        spec.retain(|_, v| !v.is_null());
    }
    object["spec"]["pipeline"]["spec"]["lifecycle"] = json!({"pauseGracePeriodSeconds": timeout});
    if big {
        let env: Vec<Value> = (0..160)
            .map(|i| json!({"name": format!("SETTING_{i:03}"), "value": format!("{i:0>96}")}))
            .collect();
        let vertices = &mut object["spec"]["pipeline"]["spec"]["vertices"];
        if let Some(list) = vertices.as_array_mut() {
            list.push(json!({"name": "enrich", "udf": {"container": {"image": "quay.io/numaio/numaflow-go/map-cat:stable", "env": env}}}));
        }
    }
    object
}

/// Grows rollout `i`'s pipeline spec by `--huge-bytes` when it is one of
/// the first `--huge`, else fills its kept fields with `--bloat-bytes`.
fn bloat(object: &mut Value, i: usize, args: &Args) {
    if i < args.huge {
        let vertex = json!({"name": "huge", "udf": {"container": {"image": "quay.io/numaio/numaflow-go/map-cat:stable",
            "env": [{"name": "PAYLOAD", "value": "h".repeat(args.huge_bytes)}]}}});
        if let Some(list) = object["spec"]["pipeline"]["spec"]["vertices"].as_array_mut() {
            list.push(vertex);
        }
        return;
    }
    let bytes = args.bloat_bytes;
    if bytes == 0 {
        return;
    }
    if i.is_multiple_of(2) {
        object["metadata"]["annotations"] =
            json!({pipelinerollout_webhook::rollout::FORCE_PROMOTE_FOR: "f".repeat(bytes)});
    } else {
        object["metadata"]["annotations"] =
            json!({pipelinerollout_webhook::rollout::ALLOW_DATA_LOSS: "a".repeat(bytes / 2)});
        object["spec"]["pipeline"]["metadata"] = json!({"annotations": {
            pipelinerollout_webhook::kinds::BOOKKEEPING_ANNOTATIONS[0]: "b".repeat(bytes / 2)
        }});
    }
}

fn kubectl(cluster: &Cluster) -> envtest::Kubectl {
    cluster.kubectl(User::Admin)
}

fn create_rollouts(cluster: &Cluster, args: &Args, size: usize, dir: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(
        repo_root().join("tests/fixtures/numaplane-sample-pipelinerollout.yaml"),
    )
    .map_err(|e| format!("the sample: {e}"))?;
    let sample: Value = serde_saphyr::from_str(&text).map_err(|e| format!("the sample: {e}"))?;
    let namespaces: Vec<Value> = (0..args.namespaces)
        .map(|i| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("{NAMESPACE_PREFIX}{i:03}")}}))
        .collect();
    cluster.create_all(namespaces)?;
    let mut files = Vec::new();
    for w in 0..args.writers {
        let items: Vec<Value> = (0..size)
            .filter(|i| i % args.writers == w)
            .map(|i| {
                let namespace = format!("{NAMESPACE_PREFIX}{:03}", i % args.namespaces);
                // The k-th rollout of a namespace: every 20th (the first
                // included) out of policy (above the 1h maximum), every
                // 10th big, in every namespace.
                let k = i / args.namespaces;
                let timeout = if k.is_multiple_of(20) { 7200 } else { 300 };
                let mut object = rollout(
                    &sample,
                    &namespace,
                    &format!("rollout-{i:05}"),
                    timeout,
                    k % 10 == 3,
                );
                bloat(&mut object, i, args);
                object
            })
            .collect();
        let file = dir.join(format!("rollouts-{w}.json"));
        let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
        std::fs::write(&file, list.to_string()).map_err(|e| format!("{}: {e}", file.display()))?;
        files.push(file);
    }
    let started = Instant::now();
    let children: Vec<(PathBuf, Child)> = files
        .into_iter()
        .map(|file| {
            let child = Command::new(cluster.kubectl_binary())
                .arg("--kubeconfig")
                .arg(cluster.kubeconfig(User::Admin))
                .args(["create", "-o", "name", "-f"])
                .arg(&file)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("kubectl: {e}"))?;
            Ok((file, child))
        })
        .collect::<Result<_, String>>()?;
    for (file, child) in children {
        let out = child
            .wait_with_output()
            .map_err(|e| format!("kubectl: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "kubectl create -f {}: {}",
                file.display(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    eprintln!(
        "audit_bench: {size} rollouts created in {:.1?}",
        started.elapsed()
    );
    Ok(())
}

fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    Some(text)
}

fn metric(text: &str, line_start: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(line_start))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `VmRSS` and `VmHWM` of `pid`, in KiB.
fn rss(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The CPU time `pid` has used (user and system), in seconds: fields 14
/// and 15 of `/proc/PID/stat`, in clock ticks of 1/100 s (USER_HZ, which
/// Linux fixes at 100 for /proc).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name, which is in parentheses.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: u64 = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse::<u64>().ok())
        .sum();
    ticks as f64 / 100.0
}

/// The audit's requests as the API server counts them: every verb on
/// policyreports, and LIST and WATCH of pipelinerollouts (the benchmark
/// itself only creates those).
fn audit_requests(cluster: &Cluster) -> BTreeMap<String, f64> {
    let text = cluster.get_as_admin("/metrics").unwrap_or_default();
    let mut counts = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
    {
        let label = |name: &str| {
            let start = line.find(&format!("{name}=\""))? + name.len() + 2;
            let end = line[start..].find('"')? + start;
            Some(line[start..end].to_owned())
        };
        let (Some(resource), Some(verb)) = (label("resource"), label("verb")) else {
            continue;
        };
        let counted = resource == "policyreports"
            || (resource == "pipelinerollouts" && (verb == "LIST" || verb == "WATCH"));
        if counted && let Some(value) = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok())
        {
            *counts.entry(format!("{resource} {verb}")).or_insert(0.0) += value;
        }
    }
    // A watch is counted by apiserver_request_total only when it ends; the
    // open ones are in this gauge.
    for line in text.lines().filter(|l| {
        l.starts_with("apiserver_longrunning_requests{")
            && l.contains("resource=\"pipelinerollouts\"")
            && l.contains("verb=\"WATCH\"")
    }) {
        if let Some(value) = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) {
            *counts
                .entry("pipelinerollouts WATCH open".to_owned())
                .or_insert(0.0) += value;
        }
    }
    counts
}

fn delta(after: &BTreeMap<String, f64>, before: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v > 0.0)
        .collect()
}

fn policy(max: &str) -> String {
    format!(
        "mode: enforce\ndrainTimeout:\n  default: none\n  min: 30s\n  max: {max}\nforceReapply:\n  groups: [\"system:masters\"]\n"
    )
}

fn run(args: &Args, assets: &Assets, size: usize) -> Result<Value, String> {
    let cluster = Cluster::start(assets)?;
    let root = repo_root();
    cluster.install_crd(&root.join("tests/fixtures/numaplane-pipelinerollout-crd.yaml"))?;
    cluster.install_crd(&root.join("tests/fixtures/wgpolicyk8s.io_policyreports.yaml"))?;
    for file in ["manifests/base/rbac.yaml", "manifests/base/audit-rbac.yaml"] {
        let out = kubectl(&cluster).run(&["apply", "-f", &root.join(file).display().to_string()]);
        if !out.success {
            return Err(format!("apply {file}: {out}"));
        }
    }
    let dir = cluster.dir().join("audit-bench");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    create_rollouts(&cluster, args, size, &dir)?;
    let sample_ns = format!("{NAMESPACE_PREFIX}003");
    let listed =
        kubectl(&cluster).run(&["get", "pipelinerollouts", "-n", &sample_ns, "-o", "json"]);
    let items = listed.json()["items"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let stored_bytes: usize = items.iter().map(|o| o.to_string().len()).sum();
    let mean_stored = stored_bytes / items.len().max(1);
    let biggest = items.iter().map(|o| o.to_string().len()).max().unwrap_or(0);

    let policy_file = dir.join("policy.yaml");
    std::fs::write(&policy_file, policy("1h")).map_err(|e| e.to_string())?;
    let log_path = dir.join("webhook.log");
    let before = audit_requests(&cluster);
    let started = Instant::now();
    // Ports chosen by the kernel: the launcher reads them from the log.
    let mut command = ServeCommand::new(&args.webhook);
    command.args = vec![
        format!("--dev-certs-dir={}", dir.join("certs").display()),
        format!("--policy={}", policy_file.display()),
        format!(
            "--kubeconfig={}",
            cluster.kubeconfig(User::Webhook).display()
        ),
    ];
    command.args.extend(args.serve_arg.iter().cloned());
    let mut webhook = Served::start("webhook", &command, &log_path)?;
    let (pid, admin) = (webhook.pid(), webhook.bound().admin);
    let result = measure(
        &cluster,
        args,
        size,
        pid,
        admin,
        &log_path,
        &policy_file,
        started,
        &before,
    );
    webhook.stop();
    let mut result = result?;
    result["size"] = json!(size);
    result["stored_bytes_mean"] = json!(mean_stored);
    result["stored_bytes_max"] = json!(biggest);
    Ok(result)
}

#[allow(clippy::too_many_arguments)]
fn measure(
    cluster: &Cluster,
    args: &Args,
    size: usize,
    pid: u32,
    admin: SocketAddr,
    log_path: &Path,
    policy_file: &Path,
    started: Instant,
    before: &BTreeMap<String, f64>,
) -> Result<Value, String> {
    let namespaces = args.namespaces.min(size) as f64;
    let deadline = started + Duration::from_secs(300);
    let (mut listed, mut judged) = (None, None);
    let mut peak_rate = 0.0_f64;
    let mut last_writes = (Instant::now(), 0.0);
    let written = "pipelinerollout_webhook_audit_report_writes_total{result=\"written\"}";
    let reports_done;
    let reports_cpu;
    let mut judged_cpu = None;
    loop {
        if Instant::now() > deadline {
            return Err(format!(
                "no complete set of reports after 300 s; log:\n{}",
                std::fs::read_to_string(log_path).unwrap_or_default()
            ));
        }
        let log = std::fs::read_to_string(log_path).unwrap_or_default();
        if listed.is_none() && log.contains("first list complete") {
            listed = Some((started.elapsed(), rss(pid).0));
        }
        if judged.is_none() && log.contains("audit complete") {
            judged = Some((started.elapsed(), rss(pid).0));
            judged_cpu = Some(cpu_seconds(pid));
        }
        let metrics = http_get(admin, "/metrics").unwrap_or_default();
        let writes = metric(&metrics, written);
        let now = Instant::now();
        let span = now.duration_since(last_writes.0).as_secs_f64();
        if span >= 1.0 {
            peak_rate = peak_rate.max((writes - last_writes.1) / span);
            last_writes = (now, writes);
        }
        if writes >= namespaces {
            reports_done = (started.elapsed(), rss(pid).0);
            reports_cpu = cpu_seconds(pid);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // Read before the benchmark's own LIST of the reports.
    let after_first = audit_requests(cluster);
    let reports = kubectl(cluster).run(&["get", "policyreports", "-A", "-o", "json"]);
    let reports = reports.json();
    let items = reports["items"].as_array().cloned().unwrap_or_default();
    let results: usize = items
        .iter()
        .map(|r| r["results"].as_array().map_or(0, Vec::len))
        .sum();
    let fails: u64 = items
        .iter()
        .map(|r| r["summary"]["fail"].as_u64().unwrap_or(0))
        .sum();
    std::thread::sleep(Duration::from_secs(5));
    let (settled, peak) = rss(pid);

    // The policy change: the 7200 s rollouts come within a 3h maximum.
    let metrics = http_get(admin, "/metrics").unwrap_or_default();
    let writes_before = metric(&metrics, written);
    let changed = Instant::now();
    std::fs::write(policy_file, policy("3h")).map_err(|e| e.to_string())?;
    let change_deadline = changed + Duration::from_secs(120);
    let updated = loop {
        let metrics = http_get(admin, "/metrics").unwrap_or_default();
        if metric(&metrics, written) >= writes_before + namespaces {
            break changed.elapsed();
        }
        if Instant::now() > change_deadline {
            return Err(format!(
                "the reports did not follow the policy change within 120 s; log:\n{}",
                std::fs::read_to_string(log_path).unwrap_or_default()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let after_all = audit_requests(cluster);
    let reports = kubectl(cluster).run(&["get", "policyreports", "-A", "-o", "json"]);
    let fails_after: u64 = reports.json()["items"].as_array().map_or(0, |items| {
        items
            .iter()
            .map(|r| r["summary"]["fail"].as_u64().unwrap_or(0))
            .sum()
    });
    let (rss_after_change, peak_after_change) = rss(pid);
    let cpu_after_change = cpu_seconds(pid);
    let mib = |kib: u64| (kib as f64 / 1024.0 * 10.0).round() / 10.0;
    let secs = |d: Duration| (d.as_secs_f64() * 100.0).round() / 100.0;
    Ok(json!({
        "namespaces": args.namespaces,
        "first_list_s": listed.map(|(t, _)| secs(t)),
        "rss_after_list_mib": listed.map(|(_, r)| mib(r)),
        "audit_complete_s": judged.map(|(t, _)| secs(t)),
        "cpu_at_audit_complete_s": judged_cpu,
        "cpu_at_reports_complete_s": reports_cpu,
        "cpu_after_change_s": cpu_after_change,
        "rss_after_audit_mib": judged.map(|(_, r)| mib(r)),
        "reports_complete_s": secs(reports_done.0),
        "rss_at_reports_mib": mib(reports_done.1),
        "rss_settled_mib": mib(settled),
        "rss_peak_mib": mib(peak),
        "reports": items.len(),
        "results": results,
        "fail_results": fails,
        "peak_writes_per_s": (peak_rate * 10.0).round() / 10.0,
        "requests_first_set": delta(&after_first, before),
        "policy_change_to_reports_s": secs(updated),
        "fail_results_after_change": fails_after,
        "rss_after_change_mib": mib(rss_after_change),
        "rss_peak_after_change_mib": mib(peak_after_change),
        "requests_total": delta(&after_all, before),
        "size_check": size,
    }))
}
