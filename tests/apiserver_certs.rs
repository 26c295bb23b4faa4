//! Certificates the webhook manages itself (`serve --manage-certs`, the
//! overlay manifests/overlays/self-managed), through a real kube-apiserver:
//! the webhooks call a Service (an `ExternalName` Service naming the
//! replica's loopback address), so the API server checks the served
//! certificate for `pipelinerollout-webhook.pipelinerollout-webhook.svc`
//! against the caBundle the webhook wrote, as in a cluster. The harness
//! plays the kubelet (`envtest::SecretMirror`): it copies the Secret into
//! each replica's certificate directory whenever it changes. The webhook
//! acts as its own service account with the overlay's RBAC.
//!
//! Each test has a cluster of its own (they change the certificates), and
//! they run one at a time (`ONE_AT_A_TIME`): their certificates live
//! seconds, and several clusters at once on a small machine would stretch
//! every step. Without the binaries these tests print a skip line each, and
//! fail in CI.

mod apiserver_support;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use apiserver_support::rollout;
use base64::Engine as _;
use envtest::{
    Assets, Cluster, Installed, SecretMirror, User, Webhook, WebhookOptions, repo_root, require,
};
use serde_json::json;

/// The webhook binary the API server calls.
const WEBHOOK: &str = env!("CARGO_BIN_EXE_pipelinerollout-webhook");
/// The overlay under test.
const OVERLAY: &str = "manifests/overlays/self-managed";
/// The namespace, Service, Secret and webhook configurations the overlay names.
const NAMESPACE: &str = "pipelinerollout-webhook";
const SERVICE: &str = "pipelinerollout-webhook";
const SECRET: &str = "pipelinerollout-webhook-tls";
const CONFIGURATION: &str = "pipelinerollout-webhook";
/// Where the writers write.
const TEAM: &str = "certs-team";

/// Held by each test for its whole run.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One replica: the webhook and the kubelet's copy of the Secret it serves
/// (the webhook is declared first, so it stops first).
struct Replica {
    webhook: Webhook,
    _mirror: SecretMirror,
    ip: &'static str,
}

/// A cluster with the self-managed overlay and its replicas.
struct SelfManaged {
    replicas: Vec<Replica>,
    cluster: Cluster,
}

impl SelfManaged {
    /// A cluster with the CRD and the overlay, then one replica per `ip`
    /// (all on one port, as the Service has one), the first running the
    /// certificate controller and the others serving only; each started
    /// once the one before is ready, each with a kubelet stand-in that
    /// lags a little more than the one before (0.5 s, 1.5 s). `flags` go
    /// to every replica.
    fn start(assets: &Assets, ips: &[&'static str], flags: &[&str]) -> Result<Self, String> {
        let cluster = Cluster::start(assets)?;
        cluster.install_crd(&repo_root().join(envtest::CRD))?;
        let policy = cluster.dir().join("policy.yaml");
        std::fs::write(&policy, envtest::base_policy()?).map_err(|e| e.to_string())?;
        let port = envtest::free_port()?;
        let installed = cluster.install_self_managed(&repo_root().join(OVERLAY), port)?;
        check_installed(&installed)?;
        cluster.create_all(vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TEAM}}),
        ])?;
        let mut replicas = Vec::new();
        for (i, ip) in ips.iter().enumerate() {
            let name = format!("replica-{i}");
            let dir = cluster.dir().join(&name).join("tls");
            // The kubelets lag differently: 0.5 s, 1.5 s, ...
            let lag = Duration::from_millis(500 + 1000 * i as u64);
            let mirror = SecretMirror::start(&cluster, NAMESPACE, SECRET, &dir, lag)?;
            let mut extra_args: Vec<String> = flags.iter().map(|f| (*f).to_owned()).collect();
            if i > 0 {
                extra_args.push("--cert-controller=false".to_owned());
            }
            let options = WebhookOptions {
                binary: WEBHOOK.into(),
                name,
                policy: policy.clone(),
                extra_args,
            };
            let ip_addr: std::net::IpAddr = ip.parse().map_err(|e| format!("{ip}: {e}"))?;
            let webhook = Webhook::start_managed(
                &cluster,
                options,
                SocketAddr::new(ip_addr, port),
                &dir,
                NAMESPACE,
            )?;
            replicas.push(Replica {
                webhook,
                _mirror: mirror,
                ip,
            });
        }
        Ok(Self { replicas, cluster })
    }

    /// The replica the Service points at from now on.
    fn route_to(&self, replica: usize) -> Result<(), String> {
        self.cluster
            .point_service_at(NAMESPACE, SERVICE, self.replicas[replica].ip)
    }

    /// Creates one PipelineRollout through the webhooks.
    fn write(&self, name: &str) -> envtest::Output {
        self.cluster
            .kubectl(User::Admin)
            .create(&rollout(TEAM, name, None), &[])
    }

    /// Writes until one goes through (the webhooks answer), or fails after `timeout`.
    fn wait_for_a_write(&self, prefix: &str, timeout: Duration) -> Result<Duration, String> {
        let start = Instant::now();
        let mut i = 0;
        loop {
            i += 1;
            let out = self.write(&format!("{prefix}-{i}"));
            if out.success {
                return Ok(start.elapsed());
            }
            if start.elapsed() > timeout {
                return Err(format!("no write went through in {timeout:?}: {out}"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Starts one more replica at `ip`, serving only, with its own lagging
    /// mirror and `kubeconfig`, without waiting for readiness.
    fn spawn_follower(&self, ip: &'static str, kubeconfig: &Path) -> Result<Replica, String> {
        let name = format!("replica-{}", self.replicas.len());
        let dir = self.cluster.dir().join(&name).join("tls");
        let mirror = SecretMirror::start(
            &self.cluster,
            NAMESPACE,
            SECRET,
            &dir,
            Duration::from_millis(500),
        )?;
        // The mirror has the Secret's files before the replica starts, as
        // the kubelet has a volume's before the container starts.
        within(Duration::from_secs(10), || dir.join("tls.crt").exists())
            .ok_or("the mirror wrote no files")?;
        let port = self.replicas[0].webhook.base_url();
        let port: u16 = port
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or("the replicas' port")?;
        let options = WebhookOptions {
            binary: WEBHOOK.into(),
            name,
            policy: self.cluster.dir().join("policy.yaml"),
            extra_args: vec!["--cert-controller=false".to_owned()],
        };
        let ip_addr: std::net::IpAddr = ip.parse().map_err(|e| format!("{ip}: {e}"))?;
        let webhook = Webhook::spawn_managed(
            &self.cluster,
            options,
            SocketAddr::new(ip_addr, port),
            &dir,
            NAMESPACE,
            kubeconfig,
        )?;
        Ok(Replica {
            webhook,
            _mirror: mirror,
            ip,
        })
    }
}

/// A TCP forwarder to the API server that can be down (it then closes
/// every connection at once) or up.
struct Proxy {
    addr: SocketAddr,
    up: Arc<AtomicBool>,
}

impl Proxy {
    /// Forwards to `target`; down until [`Proxy::set_up`].
    fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address");
        let up = Arc::new(AtomicBool::new(false));
        let is_up = Arc::clone(&up);
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if !is_up.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(target) else {
                    continue;
                };
                for (mut from, mut to) in [
                    (client.try_clone(), server.try_clone()),
                    (server.try_clone(), client.try_clone()),
                ]
                .into_iter()
                .filter_map(|(a, b)| Some((a.ok()?, b.ok()?)))
                {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Write);
                    });
                }
            }
        });
        Self { addr, up }
    }

    fn set_up(&self) {
        self.up.store(true, Ordering::SeqCst);
    }

    /// A copy of `kubeconfig` whose server is this proxy.
    fn kubeconfig(&self, cluster: &Cluster, kubeconfig: &Path) -> std::path::PathBuf {
        let text = std::fs::read_to_string(kubeconfig).expect("read the kubeconfig");
        let proxied = text.replace(&cluster.server(), &format!("https://{}", self.addr));
        assert_ne!(text, proxied, "the kubeconfig names {}", cluster.server());
        let path = cluster.dir().join("webhook-through-proxy.kubeconfig");
        std::fs::write(&path, proxied).expect("write the kubeconfig");
        path
    }
}

fn check_installed(installed: &Installed) -> Result<(), String> {
    if installed.mutating.is_empty() || installed.validating.is_empty() {
        return Err(format!("the overlay installs no webhooks: {installed:?}"));
    }
    Ok(())
}

/// The decoded caBundle of every webhook of both configurations.
fn ca_bundles(cluster: &Cluster) -> Vec<String> {
    let admin = cluster.kubectl(User::Admin);
    let mut bundles = Vec::new();
    for kind in [
        "validatingwebhookconfiguration",
        "mutatingwebhookconfiguration",
    ] {
        let out = admin
            .run(&["get", kind, CONFIGURATION, "-o", "json"])
            .expect_success("read a webhook configuration");
        for webhook in out.json()["webhooks"].as_array().into_iter().flatten() {
            let bundle = webhook["clientConfig"]["caBundle"]
                .as_str()
                .unwrap_or_default();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(bundle)
                .unwrap_or_default();
            bundles.push(String::from_utf8_lossy(&bytes).into_owned());
        }
    }
    bundles
}

/// The Secret's data, decoded.
fn secret_data(cluster: &Cluster) -> std::collections::BTreeMap<String, String> {
    let secret = cluster
        .kubectl(User::Admin)
        .get("secret", NAMESPACE, SECRET)
        .expect("the webhook wrote its Secret");
    secret["data"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(v.as_str().unwrap_or_default())
                .unwrap_or_default();
            (k.clone(), String::from_utf8_lossy(&bytes).into_owned())
        })
        .collect()
}

/// The PEM blocks of a bundle, normalised.
fn pem_blocks(bundle: &str) -> Vec<String> {
    bundle
        .split("-----END CERTIFICATE-----")
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .map(|b| format!("{b}\n-----END CERTIFICATE-----"))
        .collect()
}

/// GET `path` from a replica's admin port: the status line and the body.
fn admin_get(addr: SocketAddr, path: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect(addr).map_err(|e| format!("{addr}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut text = String::new();
    stream
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    Ok(text)
}

/// The sum of a metric's samples whose line starts with `prefix`.
fn metric(replica: &Replica, prefix: &str) -> f64 {
    let text = admin_get(replica.webhook.admin_addr(), "/metrics").expect("metrics");
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next())
        .filter_map(|v| v.parse::<f64>().ok())
        .sum()
}

fn ready(replica: &Replica) -> bool {
    replica
        .webhook
        .readyz()
        .is_ok_and(|(status, _)| status == 200)
}

/// Polls `check` every 100 ms until it holds or `timeout` passes: how long it took.
fn within(timeout: Duration, mut check: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if check() {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

/// Writes PipelineRollouts one after another until `stop`: how many, and
/// the failures.
fn write_in_a_loop(cluster: &Cluster, stop: &AtomicBool, prefix: &str) -> (usize, Vec<String>) {
    let admin = cluster.kubectl(User::Admin);
    let (mut count, mut failures) = (0, Vec::new());
    while !stop.load(Ordering::SeqCst) {
        count += 1;
        let out = admin.create(&rollout(TEAM, &format!("{prefix}-{count}"), None), &[]);
        if !out.success {
            failures.push(format!("write {count}: {out}"));
        }
    }
    (count, failures)
}

#[test]
fn a_fresh_install_becomes_ready_and_no_write_fails_through_serving_and_ca_rotations_on_two_replicas()
 {
    let _serial = one_at_a_time();
    let Some(assets) = require("certs rotation", Assets::find()) else {
        return;
    };
    // Serving certificates live 6 s (renewed every 4 s), CAs 30 s (rotated
    // from 20 s on), each CA rotation step waits 2 s.
    let flags = [
        "--cert-validity=6s",
        "--ca-validity=30s",
        "--cert-propagation=2s",
    ];
    let started = Instant::now();
    let env = SelfManaged::start(&assets, &["127.0.0.1", "127.0.0.2"], &flags)
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "a fresh install with two replicas was ready {:?} after the cluster started",
        started.elapsed()
    );

    // No human step: the caBundle the webhook wrote is its CA, and a write
    // goes through the webhooks.
    let first_ca = secret_data(&env.cluster)["ca.crt"].clone();
    for bundle in ca_bundles(&env.cluster) {
        assert_eq!(
            pem_blocks(&bundle),
            pem_blocks(&first_ca),
            "caBundle is the CA"
        );
    }
    let out = env.write("fresh");
    assert!(out.success, "a write through the webhooks: {out}");

    // Writes in a loop for 40 s while the certificates rotate, the Service
    // alternating between the replicas every 4 s.
    let stop = AtomicBool::new(false);
    let (writes, failures) = std::thread::scope(|scope| {
        let writer = scope.spawn(|| write_in_a_loop(&env.cluster, &stop, "load"));
        let load_start = Instant::now();
        let mut target = 0;
        while load_start.elapsed() < Duration::from_secs(40) {
            std::thread::sleep(Duration::from_secs(4));
            target = 1 - target;
            if let Err(why) = env.route_to(target) {
                stop.store(true, Ordering::SeqCst);
                panic!("{why}");
            }
        }
        stop.store(true, Ordering::SeqCst);
        writer.join().expect("the writer")
    });
    let (leader, follower) = (&env.replicas[0], &env.replicas[1]);
    assert!(
        failures.is_empty(),
        "{} of {writes} writes failed during the rotations:\n{}\nleader log:\n{}\nfollower log:\n{}",
        failures.len(),
        failures.join("\n"),
        leader.webhook.log_tail(30),
        follower.webhook.log_tail(30)
    );
    assert!(writes >= 20, "only {writes} writes in 40 s");
    eprintln!("{writes} writes in 40 s, none failed");

    // Both rotations happened, by the leader only.
    let renewed = metric(
        leader,
        "pipelinerollout_webhook_certs_issued_total{kind=\"serving\",reason=\"rotation\"}",
    );
    let completed = metric(
        leader,
        "pipelinerollout_webhook_certs_ca_rotations_total{step=\"completed\"}",
    );
    assert!(renewed >= 3.0, "serving renewals: {renewed}");
    assert!(completed >= 1.0, "completed CA rotations: {completed}");
    assert_eq!(
        metric(follower, "pipelinerollout_webhook_certs_issued_total"),
        0.0,
        "the serving-only replica issues nothing"
    );
    assert_eq!(
        metric(leader, "pipelinerollout_webhook_certs_errors_total"),
        0.0,
        "no call of the controller failed (its RBAC suffices):\n{}",
        leader.webhook.log_tail(30)
    );
    // The first CA has left every caBundle; both replicas are ready, so
    // what each serves is trusted by the caBundle in force.
    for bundle in ca_bundles(&env.cluster) {
        assert!(
            !pem_blocks(&bundle).contains(&pem_blocks(&first_ca)[0]),
            "the first CA left the caBundle"
        );
    }
    for replica in [leader, follower] {
        assert!(
            within(Duration::from_secs(5), || ready(replica)).is_some(),
            "replica at {} ready",
            replica.ip
        );
    }
}

#[test]
fn an_overwritten_ca_bundle_is_put_back_and_an_invalid_secret_is_replaced() {
    let _serial = one_at_a_time();
    let Some(assets) = require("certs faults", Assets::find()) else {
        return;
    };
    let env = SelfManaged::start(&assets, &["127.0.0.1"], &[]).unwrap_or_else(|e| panic!("{e}"));
    let replica = &env.replicas[0];
    let admin = env.cluster.kubectl(User::Admin);
    let original = ca_bundles(&env.cluster);

    // Another actor (an Argo CD sync) writes another caBundle.
    let stranger =
        pipelinerollout_webhook::certs::generate("stranger", &["stranger".to_owned()], 1)
            .expect("a CA");
    let other = base64::engine::general_purpose::STANDARD.encode(stranger.ca_pem);
    let patch =
        json!([{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": other}])
            .to_string();
    admin
        .run(&[
            "patch",
            "validatingwebhookconfiguration",
            CONFIGURATION,
            "--type=json",
            "-p",
            &patch,
        ])
        .expect_success("overwrite the caBundle");
    let restored = within(Duration::from_secs(5), || {
        ca_bundles(&env.cluster) == original
    })
    .unwrap_or_else(|| {
        panic!(
            "the caBundle was not put back within 5 s:\n{}",
            replica.webhook.log_tail(20)
        )
    });
    eprintln!("caBundle put back {restored:?} after the overwrite");
    let out = env.write("after-overwrite");
    assert!(out.success, "{out}");

    // A hand edit makes the serving certificate garbage: replaced under
    // the same CA (the caBundle does not change), logged.
    let garbage = base64::engine::general_purpose::STANDARD.encode("garbage");
    admin
        .merge_patch(
            "secret",
            NAMESPACE,
            SECRET,
            &json!({"data": {"tls.crt": garbage}}),
            &[],
        )
        .expect_success("break the Secret");
    let replaced = within(Duration::from_secs(5), || {
        secret_data(&env.cluster)["tls.crt"].contains("BEGIN CERTIFICATE")
    })
    .unwrap_or_else(|| {
        panic!(
            "the Secret was not repaired within 5 s:\n{}",
            replica.webhook.log_tail(20)
        )
    });
    eprintln!("invalid serving certificate replaced {replaced:?} after the edit");
    assert_eq!(ca_bundles(&env.cluster), original, "the CA stays");
    assert!(
        replica.webhook.log_tail(40).contains("unusable"),
        "the replacement is logged:\n{}",
        replica.webhook.log_tail(40)
    );
    env.wait_for_a_write("after-edit", Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{e}"));

    // A hand edit breaks the CA's key: a new CA, written into the caBundle.
    admin
        .merge_patch(
            "secret",
            NAMESPACE,
            SECRET,
            &json!({"data": {"ca.key": garbage}}),
            &[],
        )
        .expect_success("break the CA key");
    within(Duration::from_secs(5), || {
        ca_bundles(&env.cluster) != original
    })
    .unwrap_or_else(|| panic!("no new CA within 5 s:\n{}", replica.webhook.log_tail(20)));
    let new_ca = secret_data(&env.cluster)["ca.crt"].clone();
    for bundle in ca_bundles(&env.cluster) {
        assert_eq!(pem_blocks(&bundle), pem_blocks(&new_ca));
    }
    let recovered = env
        .wait_for_a_write("after-new-ca", Duration::from_secs(15))
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("writes went through again {recovered:?} after the CA was replaced");
    assert!(
        within(Duration::from_secs(5), || ready(replica)).is_some(),
        "ready again"
    );
}

#[test]
fn a_replica_that_cannot_reach_the_api_server_serves_its_last_certificate_and_is_ready_once_it_can()
{
    let _serial = one_at_a_time();
    let Some(assets) = require("certs without an API server", Assets::find()) else {
        return;
    };
    let env = SelfManaged::start(&assets, &["127.0.0.1"], &[]).unwrap_or_else(|e| panic!("{e}"));
    let api: SocketAddr = env
        .cluster
        .server()
        .trim_start_matches("https://")
        .parse()
        .expect("the API server's address");
    let proxy = Proxy::start(api);
    let kubeconfig = proxy.kubeconfig(&env.cluster, &env.cluster.kubeconfig(User::Webhook));
    let follower = env
        .spawn_follower("127.0.0.2", &kubeconfig)
        .unwrap_or_else(|e| panic!("{e}"));

    // It serves, but cannot tell whether the caBundle trusts it: not ready.
    let mut said = String::new();
    let never_ready = within(Duration::from_secs(3), || match follower.webhook.readyz() {
        Ok((200, _)) => true,
        Ok((_, body)) => {
            said = body;
            false
        }
        Err(_) => false,
    });
    assert!(never_ready.is_none(), "ready without reading the caBundle");
    assert!(said.contains("caBundle"), "/readyz says why: {said}");
    // What it serves is the Secret's certificate (the volume's files): the
    // API server's writes through it go through.
    env.cluster
        .point_service_at(NAMESPACE, SERVICE, follower.ip)
        .unwrap_or_else(|e| panic!("{e}"));
    env.wait_for_a_write("through-the-follower", Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{e}\n{}", follower.webhook.log_tail(20)));
    assert!(
        follower
            .webhook
            .log_tail(40)
            .contains("cannot read the webhook configurations"),
        "the retries are logged:\n{}",
        follower.webhook.log_tail(40)
    );

    // The API server comes back: ready after the next retry.
    proxy.set_up();
    let became_ready = within(Duration::from_secs(40), || ready(&follower)).unwrap_or_else(|| {
        panic!(
            "not ready 40 s after the API server came back:\n{}",
            follower.webhook.log_tail(20)
        )
    });
    eprintln!("ready {became_ready:?} after the API server became reachable");
}

#[test]
fn a_controller_restarted_in_the_middle_of_a_ca_rotation_finishes_it_and_no_write_fails() {
    let _serial = one_at_a_time();
    let Some(assets) = require("certs leader change", Assets::find()) else {
        return;
    };
    // CAs live 45 s (rotated from 30 s on), serving certificates 6 s.
    let flags = [
        "--cert-validity=6s",
        "--ca-validity=45s",
        "--cert-propagation=2s",
    ];
    let mut env = SelfManaged::start(&assets, &["127.0.0.1", "127.0.0.2"], &flags)
        .unwrap_or_else(|e| panic!("{e}"));
    // Writes go through the replica that stays up.
    env.route_to(1).unwrap_or_else(|e| panic!("{e}"));
    let has = |cluster: &Cluster, key: &str| secret_data(cluster).contains_key(key);
    let stop = AtomicBool::new(false);
    let cluster = &env.cluster;
    let (leader, _follower) = env.replicas.split_at_mut(1);
    let leader = &mut leader[0];
    let (writes, failures) = std::thread::scope(|scope| {
        let writer = scope.spawn(|| write_in_a_loop(cluster, &stop, "load"));
        let outcome = (|| -> Result<(), String> {
            // Step 1 done (a new CA beside the old one): the controller stops
            // and a new process takes over from the Secret.
            within(Duration::from_secs(45), || has(cluster, "ca-next.crt"))
                .ok_or("no CA rotation started within 45 s")?;
            leader.webhook.stop();
            std::thread::sleep(Duration::from_secs(1));
            leader.webhook.resume(cluster)?;
            // Step 2 done (serving from the new CA, the old one retiring):
            // again.
            within(Duration::from_secs(20), || has(cluster, "ca-previous.crt"))
                .ok_or("the rotation did not switch within 20 s of the restart")?;
            leader.webhook.stop();
            std::thread::sleep(Duration::from_secs(1));
            leader.webhook.resume(cluster)?;
            within(Duration::from_secs(20), || {
                let data = secret_data(cluster);
                !data.contains_key("ca-previous.crt") && !data.contains_key("ca-next.crt")
            })
            .ok_or("the rotation did not complete within 20 s of the second restart")?;
            std::thread::sleep(Duration::from_secs(3));
            Ok(())
        })();
        stop.store(true, Ordering::SeqCst);
        let written = writer.join().expect("the writer");
        if let Err(why) = outcome {
            panic!("{why}\nleader log:\n{}", leader.webhook.log_tail(30));
        }
        written
    });
    assert!(
        failures.is_empty(),
        "{} of {writes} writes failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The last process only finished the rotation: it started none and
    // switched none.
    let leader = &env.replicas[0];
    let steps = |step: &str| {
        metric(
            leader,
            &format!("pipelinerollout_webhook_certs_ca_rotations_total{{step=\"{step}\"}}"),
        )
    };
    assert_eq!(
        (steps("started"), steps("switched"), steps("completed")),
        (0.0, 0.0, 1.0),
        "the third process completed the rotation the first one started"
    );
    for bundle in ca_bundles(&env.cluster) {
        assert_eq!(
            pem_blocks(&bundle),
            pem_blocks(&secret_data(&env.cluster)["ca.crt"])
        );
    }
    eprintln!("{writes} writes across two controller restarts mid-rotation, none failed");
}
