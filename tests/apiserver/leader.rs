//! Leader election through a real kube-apiserver, with two or three
//! replicas of the real binary taking part (`serve --leader-elect
//! --reset-stale-force`, with the base install's RBAC): only the holder of
//! the Lease sweeps, a SIGKILLed leader is replaced within the Lease
//! duration, a SIGTERMed one hands over in under two seconds, and a leader
//! cut off from the API server stops its controllers before another takes
//! over; a leader frozen (SIGSTOP) past its Lease steps down when it wakes
//! and undoes nothing its successor wrote; a deleted Lease is made anew
//! without two leaders at once; a Lease written once by the webhook's
//! token with a huge duration is taken over after the replicas' own
//! duration, and one that token keeps renewing shows up in every replica's
//! `leader_lease_followed_seconds` and log. Same
//! harness and skip rules as tests/apiserver/webhook.rs.
//!
//! The installation's own webhook, which the webhook configurations point
//! at, only serves admission (no election, no sweeper), so that killing a
//! leader never fails the test's writes; the replicas serve admission on
//! ports of their own. The tests run one at a time (each starts its own
//! replicas, whose sweepers watch every namespace) and use short Lease
//! settings (tests/apiserver/apiserver_leader_support/).

use crate::apiserver_leader_support;

use std::time::{Duration, Instant};

use apiserver_leader_support::{
    DEFAULT_LEASE, DURATION, GRACE, NAMESPACE, RENEW_DEADLINE, RETRY_PERIOD, Thaw,
    followed_seconds, holder, identity_of, is_reset, leads, lease_errors,
    lease_written_by_the_webhooks_token, logs, metric, one_leader, renew_time_offset, replica,
    replica_of, serial, shared, skewed_binary, stale_force, sweeper_resets, transitions,
};
use envtest::{Proxy, User, Webhook, WebhookOptions};

#[test]
fn only_the_leader_sweeps_and_every_replica_serves() {
    let Some(env) = shared() else { return };
    let _one = serial();
    let cluster = &env.cluster;
    let replicas: Vec<Webhook> = (0..3)
        .map(|i| replica(env, DEFAULT_LEASE, i, None))
        .collect();
    let leader = one_leader(&replicas, Duration::from_secs(15));
    assert_eq!(
        holder(cluster, DEFAULT_LEASE),
        Some(identity_of(&replicas[leader])),
        "kubectl get lease names the replica that leads"
    );
    // Followers are ready and answer admission; they only do not sweep.
    let review = std::fs::read_to_string(
        envtest::repo_root().join("tests/fixtures/admission/01-create-kubectl-apply-validate.json"),
    )
    .expect("fixture");
    for (i, follower) in replicas.iter().enumerate().filter(|(i, _)| *i != leader) {
        assert_eq!(
            follower.admin_get("/readyz").map(|(s, _)| s),
            Ok(200),
            "{i}"
        );
        let (status, body) = follower
            .post_json(cluster, "/validate", &review)
            .expect("POST");
        assert_eq!(status, 200, "follower {i} answers admission: {body}");
        assert!(body.contains("\"allowed\":true"), "{body}");
    }

    let ns = "e2e-leader-sweep";
    stale_force(cluster, ns, "p");
    let deadline = Instant::now() + GRACE + Duration::from_secs(15);
    while !is_reset(cluster, ns, "p") {
        assert!(
            Instant::now() < deadline,
            "the force was not reset; logs:\n{}",
            logs(&replicas)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Time for any other sweeper to try too.
    std::thread::sleep(GRACE + Duration::from_secs(2));
    assert_eq!(
        sweeper_resets(&replicas[leader]),
        1.0,
        "the leader reset it"
    );
    for (i, follower) in replicas.iter().enumerate().filter(|(i, _)| *i != leader) {
        assert!(!leads(follower), "{i} does not lead");
        assert_eq!(sweeper_resets(follower), 0.0, "{i} reset nothing");
        for series in [
            "pipelinerollout_webhook_sweeper_conflicts_total",
            "pipelinerollout_webhook_sweeper_errors_total",
        ] {
            assert_eq!(metric(follower, series), 0.0, "{i} never tried: {series}");
        }
        assert!(
            !follower.log_tail(10_000).contains("stale-force sweeper on"),
            "follower {i} never started the sweeper:\n{}",
            follower.log_tail(20)
        );
    }
    assert!(
        replicas[leader]
            .log_tail(10_000)
            .contains("stale-force sweeper on")
    );
    assert_eq!(one_leader(&replicas, Duration::from_secs(1)), leader);
    // The base install's RBAC is all they need: no call about the Lease
    // failed, and the leader took it once.
    for (i, replica) in replicas.iter().enumerate() {
        assert_eq!(
            lease_errors(replica),
            0.0,
            "replica {i}:\n{}",
            replica.log_tail(20)
        );
        let want = if i == leader { 1.0 } else { 0.0 };
        assert_eq!(transitions(replica, "acquired"), want, "replica {i}");
        assert_eq!(transitions(replica, "lost"), 0.0, "replica {i}");
    }
}

#[test]
fn a_lease_written_once_with_a_huge_duration_is_taken_over_after_our_own_duration() {
    let Some(env) = shared() else { return };
    let _one = serial();
    let cluster = &env.cluster;
    let lease = "leader-evil";
    // One write with the webhook's token, never renewed: trusted as
    // stated, it would hold the Lease for 68 years.
    lease_written_by_the_webhooks_token(cluster, lease, "evil", i32::MAX);
    let written = Instant::now();
    let replicas: Vec<Webhook> = (0..2).map(|i| replica(env, lease, i, None)).collect();
    let leader = one_leader(&replicas, DURATION + Duration::from_secs(10));
    let took = written.elapsed();
    eprintln!(
        "a Lease stating 2147483647 s, never renewed, was taken over {took:?} after it was written (own duration {DURATION:?})"
    );
    assert_eq!(holder(cluster, lease), Some(identity_of(&replicas[leader])));
    let log = replicas[leader].log_tail(10_000);
    assert!(
        log.contains("leaseDurationSeconds 2147483647, longer than this replica's own 4"),
        "the replica says what the Lease stated:\n{log}"
    );
    assert!(
        log.contains("took the Lease: \"evil\" had not renewed it for 4 s"),
        "the replica says why it took the Lease:\n{log}"
    );
    // The stated duration is logged once per holder, not on every read.
    let said = replicas
        .iter()
        .map(|r| {
            r.log_tail(10_000)
                .matches("leaseDurationSeconds 2147483647")
                .count()
        })
        .max()
        .unwrap_or(0);
    assert!(said <= 2, "logged {said} times:\n{}", logs(&replicas));
}

#[test]
fn a_holder_that_keeps_renewing_and_is_no_replica_shows_in_the_metric_and_the_log() {
    let Some(env) = shared() else { return };
    let _one = serial();
    let cluster = &env.cluster;
    let lease = "leader-renewed";
    lease_written_by_the_webhooks_token(cluster, lease, "evil", 4);
    let replicas: Vec<Webhook> = (0..2).map(|i| replica(env, lease, i, None)).collect();
    // The token renews every second (a new resourceVersion each time), so
    // the bound does not help: it holds the Lease while it keeps writing.
    let webhook = cluster.kubectl(User::Webhook);
    let start = Instant::now();
    let long = DURATION * 3 + Duration::from_secs(3);
    let mut i = 0;
    while start.elapsed() < long {
        i += 1;
        let patch = format!("{{\"spec\":{{\"leaseTransitions\":{i}}}}}");
        webhook
            .run(&[
                "patch",
                "lease",
                lease,
                "-n",
                NAMESPACE,
                "--type=merge",
                "-p",
                &patch,
            ])
            .expect_success("the token renews the Lease");
        assert!(
            !replicas.iter().any(leads),
            "a replica took a Lease renewed every second; logs:\n{}",
            logs(&replicas)
        );
        std::thread::sleep(Duration::from_millis(700));
    }
    assert_eq!(holder(cluster, lease).as_deref(), Some("evil"));
    for (n, replica) in replicas.iter().enumerate() {
        let followed = followed_seconds(replica);
        assert!(
            followed >= (DURATION * 3).as_secs_f64(),
            "replica {n} has followed for {followed} s after {long:?}"
        );
        let log = replica.log_tail(10_000);
        assert!(
            log.contains("this replica has not held the Lease")
                && log.contains("does not look like a replica of this webhook"),
            "replica {n} logs the long follow of a holder that is no replica:\n{log}"
        );
    }
    // Once the token stops, the Lease expires and a replica takes it: the
    // metric falls to 0 there, which clears the alert.
    let leader = one_leader(&replicas, DURATION + Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_secs(3);
    while followed_seconds(&replicas[leader]) != 0.0 {
        assert!(
            Instant::now() < deadline,
            "the leader still reports following"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_sigkilled_leader_is_replaced_within_the_lease_duration_and_grace() {
    let Some(env) = shared() else { return };
    let _one = serial();
    let cluster = &env.cluster;
    let lease = "leader-kill";
    let mut replicas: Vec<Webhook> = (0..2).map(|i| replica(env, lease, i, None)).collect();
    let leader = one_leader(&replicas, Duration::from_secs(15));
    let other = 1 - leader;

    replicas[leader].signal("KILL").expect("SIGKILL");
    let killed = Instant::now();
    replicas[leader]
        .wait_exit(Duration::from_secs(5))
        .expect("killed");
    // A stale force made after the kill, which only a new leader can reset.
    let ns = "e2e-leader-kill";
    stale_force(cluster, ns, "p");
    let (mut took_over, mut reset) = (None, None);
    let limit = DURATION + GRACE + Duration::from_secs(3);
    while took_over.is_none() || reset.is_none() {
        if took_over.is_none() && leads(&replicas[other]) {
            took_over = Some(killed.elapsed());
        }
        if reset.is_none() && is_reset(cluster, ns, "p") {
            reset = Some(killed.elapsed());
        }
        assert!(
            killed.elapsed() < limit + Duration::from_secs(5),
            "no new leader or no reset (took over {took_over:?}, reset {reset:?}); logs:\n{}",
            logs(&replicas)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (took_over, reset) = (took_over.expect("set"), reset.expect("set"));
    eprintln!(
        "SIGKILL of the leader (lease {DURATION:?}, grace {GRACE:?}): the other replica led after {took_over:?}, the force made after the kill was reset {reset:?} after it"
    );
    // The Lease expires at most its duration after the last renewal, which
    // came before the kill; the new leader's sweeper then waits its grace
    // from its first look at the object (and up to a tick of 1s).
    let slack = Duration::from_millis(1500);
    assert!(
        took_over <= DURATION + slack,
        "took over {took_over:?} after the kill"
    );
    assert!(
        reset <= took_over + GRACE + slack,
        "reset {reset:?} after the kill, {took_over:?} after which the other replica led"
    );
    assert!(
        reset <= limit,
        "reset {reset:?} after the kill: more than the Lease duration plus the grace (and 3s)"
    );
    assert_eq!(sweeper_resets(&replicas[other]), 1.0);
    assert_eq!(holder(cluster, lease), Some(identity_of(&replicas[other])));
}

#[test]
fn a_sigtermed_leader_hands_over_in_under_two_seconds() {
    let Some(env) = shared() else { return };
    let _one = serial();
    let cluster = &env.cluster;
    let lease = "leader-term";
    let mut replicas: Vec<Webhook> = (0..3).map(|i| replica(env, lease, i, None)).collect();
    let mut leader = one_leader(&replicas, Duration::from_secs(15));
    // Two hand-overs: three replicas, then two.
    for round in 1..=2 {
        replicas[leader].signal("TERM").expect("SIGTERM");
        let asked = Instant::now();
        let next = loop {
            let running: Vec<usize> = (0..replicas.len())
                .filter(|&i| i != leader && replicas[i].pid().is_some())
                .collect();
            if let Some(&next) = running.iter().find(|&&i| leads(&replicas[i])) {
                break next;
            }
            assert!(
                asked.elapsed() < Duration::from_secs(10),
                "no replica took over; logs:\n{}",
                logs(&replicas)
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        let handover = asked.elapsed();
        eprintln!("SIGTERM hand-over {round}: replica {next} led {handover:?} after the signal");
        assert!(
            handover < Duration::from_secs(2),
            "hand-over took {handover:?}; logs:\n{}",
            logs(&replicas)
        );
        replicas[leader]
            .wait_exit(Duration::from_secs(10))
            .expect("exits after SIGTERM");
        let log = replicas[leader].log_tail(10_000);
        assert!(
            log.contains("the Lease is released"),
            "the old leader released the Lease:\n{log}"
        );
        assert!(log.contains("stale-force sweeper stopped"), "{log}");
        assert!(
            log.find("stale-force sweeper stopped") < log.find("the Lease is released"),
            "the sweeper stopped before the Lease was released:\n{log}"
        );
        assert_eq!(holder(cluster, lease), Some(identity_of(&replicas[next])));
        assert_eq!(one_leader(&replicas, Duration::from_secs(1)), next);
        leader = next;
    }
}

#[test]
fn a_leader_cut_off_from_the_api_server_stops_before_another_takes_over() {
    let Some(env) = shared() else { return };
    let _one = serial();
    let cluster = &env.cluster;
    let lease = "leader-cut";
    let proxy = Proxy::start(cluster.api_addr()).expect("proxy");
    let via_proxy = cluster
        .kubeconfig_via(User::Webhook, proxy.addr(), "webhook-via-proxy")
        .expect("kubeconfig");
    let mut replicas = vec![replica(env, lease, 0, Some(via_proxy))];
    assert_eq!(one_leader(&replicas, Duration::from_secs(15)), 0);
    replicas.push(replica(env, lease, 1, None));
    std::thread::sleep(RETRY_PERIOD * 2);
    assert_eq!(
        one_leader(&replicas, Duration::from_secs(1)),
        0,
        "0 keeps it"
    );

    proxy.cut();
    let cut = Instant::now();
    let (mut stopped, mut took_over) = (None, None);
    while stopped.is_none() || took_over.is_none() {
        if stopped.is_none() && !leads(&replicas[0]) {
            stopped = Some(cut.elapsed());
        }
        if took_over.is_none() && leads(&replicas[1]) {
            took_over = Some(cut.elapsed());
        }
        assert!(
            cut.elapsed() < DURATION * 4,
            "stopped {stopped:?}, took over {took_over:?}; logs:\n{}",
            logs(&replicas)
        );
        std::thread::sleep(Duration::from_millis(25));
    }
    let (stopped, took_over) = (stopped.expect("set"), took_over.expect("set"));
    eprintln!(
        "API server cut off from the leader (renew deadline {RENEW_DEADLINE:?}, lease {DURATION:?}): it stopped its controllers {stopped:?} after the cut, the other replica led {took_over:?} after it"
    );
    assert!(
        stopped < took_over,
        "the cut-off leader stopped ({stopped:?}) before the other took over ({took_over:?})"
    );
    assert!(
        stopped <= RENEW_DEADLINE + Duration::from_millis(1500),
        "stopped {stopped:?} after the cut"
    );
    let log = replicas[0].log_tail(10_000);
    assert!(log.contains("stale-force sweeper stopped"), "{log}");
    assert!(log.contains("no longer leads"), "{log}");
    assert_eq!(transitions(&replicas[0], "lost"), 1.0);
    assert!(
        lease_errors(&replicas[0]) >= 1.0,
        "its failed renewals are counted"
    );
    assert_eq!(transitions(&replicas[1], "acquired"), 1.0);
    assert_eq!(
        replicas[0].admin_get("/readyz").map(|(s, _)| s),
        Ok(200),
        "still ready: readiness does not depend on leadership"
    );

    // Back on the network, it stays a follower.
    proxy.restore();
    std::thread::sleep(DURATION);
    assert_eq!(one_leader(&replicas, Duration::from_secs(1)), 1);
    assert_eq!(holder(cluster, lease), Some(identity_of(&replicas[1])));
    assert_eq!(
        transitions(&replicas[0], "acquired"),
        1.0,
        "it did not lead again"
    );
}

#[test]
fn a_holder_whose_clock_is_hours_off_keeps_the_lease_while_it_renews() {
    let Some(env) = shared() else { return };
    let _one = serial();
    let cluster = &env.cluster;
    const HOURS_3: i64 = 3 * 3600;
    for (lease, offset) in [
        ("leader-clock-behind", -HOURS_3),
        ("leader-clock-ahead", HOURS_3),
    ] {
        let holder_binary = skewed_binary(env, offset);
        let mut replicas = vec![replica_of(env, &holder_binary, lease, 0, None)];
        assert_eq!(one_leader(&replicas, Duration::from_secs(15)), 0, "{lease}");
        let skew = renew_time_offset(cluster, lease);
        assert!(
            (skew - offset).abs() < 60,
            "{lease}: the holder writes renewTime {skew}s off this clock, asked {offset}s"
        );
        // A candidate with a right clock reads a renewTime three hours in
        // the past (or future); judged by that, it would take the Lease at
        // once (or never). It watches the Lease change instead.
        replicas.push(replica(env, lease, 1, None));
        let started = Instant::now();
        while started.elapsed() < DURATION * 3 {
            assert!(
                !leads(&replicas[1]),
                "{lease}: the candidate took over from a holder that renews; logs:\n{}",
                logs(&replicas)
            );
            assert!(
                leads(&replicas[0]),
                "{lease}: the holder stopped; logs:\n{}",
                logs(&replicas)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(
            holder(cluster, lease),
            Some(identity_of(&replicas[0])),
            "{lease}"
        );
        assert_eq!(transitions(&replicas[1], "acquired"), 0.0, "{lease}");

        // Once the holder dies, the candidate takes over a Lease duration
        // after it last saw the Lease change, whatever renewTime says.
        replicas[0].signal("KILL").expect("SIGKILL");
        let killed = Instant::now();
        replicas[0]
            .wait_exit(Duration::from_secs(5))
            .expect("killed");
        while !leads(&replicas[1]) {
            assert!(
                killed.elapsed() < DURATION + RETRY_PERIOD * 3,
                "{lease}: no take-over; logs:\n{}",
                logs(&replicas)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let took_over = killed.elapsed();
        eprintln!(
            "{lease}: holder {offset}s off; the candidate took over {took_over:?} after its SIGKILL"
        );
        assert!(
            took_over >= DURATION - RETRY_PERIOD,
            "{lease}: took over {took_over:?} after the kill, before the Lease could expire"
        );
        assert_eq!(
            holder(cluster, lease),
            Some(identity_of(&replicas[1])),
            "{lease}"
        );
    }
}

#[test]
fn a_leader_frozen_past_its_lease_steps_down_when_it_wakes_and_undoes_nothing() {
    let Some(env) = shared() else { return };
    let _one = serial();
    let cluster = &env.cluster;
    let lease = "leader-frozen";
    let mut replicas = vec![replica(env, lease, 0, None)];
    assert_eq!(one_leader(&replicas, Duration::from_secs(15)), 0);
    replicas.push(replica(env, lease, 1, None));
    std::thread::sleep(RETRY_PERIOD * 2);
    assert_eq!(one_leader(&replicas, Duration::from_secs(1)), 0);

    // A stop-the-world pause of the leader (SIGSTOP: a VM freeze, a node
    // under memory pressure) outlasts its Lease. Its metrics cannot be read
    // while it is stopped, so only the other replica is asked.
    replicas[0].signal("STOP").expect("SIGSTOP");
    let thaw = Thaw(&replicas[0]);
    let frozen = Instant::now();
    while !leads(&replicas[1]) {
        assert!(
            frozen.elapsed() < DURATION + RETRY_PERIOD * 3,
            "no take-over from a frozen leader; log of replica 1:\n{}",
            replicas[1].log_tail(25)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "the leader froze; the other replica led {:?} after",
        frozen.elapsed()
    );
    assert_eq!(holder(cluster, lease), Some(identity_of(&replicas[1])));

    // The new leader does the work: it resets a force whose pause is over.
    let ns = "e2e-leader-frozen";
    stale_force(cluster, ns, "p");
    let deadline = Instant::now() + GRACE + Duration::from_secs(15);
    while !is_reset(cluster, ns, "p") {
        assert!(Instant::now() < deadline, "{}", replicas[1].log_tail(25));
        std::thread::sleep(Duration::from_millis(200));
    }

    // It wakes believing, for an instant, that it leads: its own clock,
    // not the Lease's renewTime, tells it its renew deadline went by.
    drop(thaw);
    let woke = Instant::now();
    while leads(&replicas[0]) {
        assert!(
            woke.elapsed() < Duration::from_secs(2),
            "the woken replica still leads; logs:\n{}",
            logs(&replicas)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let stepped_down = woke.elapsed();
    eprintln!(
        "woken after {:?} frozen, it stepped down {stepped_down:?} later",
        frozen.elapsed()
    );
    // Then it stays a follower, and the new leader keeps the Lease.
    let settled = Instant::now();
    while settled.elapsed() < DURATION + RETRY_PERIOD {
        assert!(
            !leads(&replicas[0]) && leads(&replicas[1]),
            "two leaders, or none, after the wake; logs:\n{}",
            logs(&replicas)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(holder(cluster, lease), Some(identity_of(&replicas[1])));
    assert_eq!(
        transitions(&replicas[0], "lost"),
        1.0,
        "{}",
        logs(&replicas)
    );
    assert_eq!(
        transitions(&replicas[0], "acquired"),
        1.0,
        "it did not lead again"
    );
    assert_eq!(
        sweeper_resets(&replicas[0]),
        0.0,
        "the woken replica reset nothing"
    );
    assert!(
        is_reset(cluster, ns, "p"),
        "what the new leader wrote stands"
    );
    let log = replicas[0].log_tail(10_000);
    assert!(log.contains("no longer leads"), "{log}");
}

#[test]
fn a_deleted_lease_is_made_anew_and_never_has_two_leaders() {
    let Some(env) = shared() else { return };
    let _one = serial();
    let cluster = &env.cluster;
    let lease = "leader-gone";
    let replicas: Vec<Webhook> = (0..2).map(|i| replica(env, lease, i, None)).collect();
    let leader = one_leader(&replicas, Duration::from_secs(15));
    cluster
        .kubectl(User::Admin)
        .run(&["delete", "lease", lease, "-n", NAMESPACE])
        .expect_success("an operator deletes the Lease");
    let deleted = Instant::now();
    let mut both = 0;
    while deleted.elapsed() < DURATION + Duration::from_secs(2) {
        if replicas.iter().all(leads) {
            both += 1;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert_eq!(
        both,
        0,
        "two replicas led at once; logs:\n{}",
        logs(&replicas)
    );
    let now_leading = one_leader(&replicas, Duration::from_secs(5));
    assert_eq!(
        holder(cluster, lease),
        Some(identity_of(&replicas[now_leading])),
        "the Lease is back, held by the replica that leads"
    );
    let log = replicas[leader].log_tail(10_000);
    assert!(log.contains("the Lease was deleted"), "{log}");
}

#[test]
fn with_election_off_every_replica_runs_the_controllers() {
    let Some(env) = shared() else { return };
    let _one = serial();
    let cluster = &env.cluster;
    let replicas: Vec<Webhook> = (0..2)
        .map(|i| {
            Webhook::start(
                cluster,
                WebhookOptions {
                    binary: env!("CARGO_BIN_EXE_pipelinerollout-webhook").into(),
                    name: format!("election-off-{i}"),
                    policy: cluster.dir().join("policy.yaml"),
                    extra_args: [
                        "--leader-elect=false",
                        "--reset-stale-force",
                        "--stale-force-grace=2s",
                    ]
                    .map(str::to_owned)
                    .to_vec(),
                    kubeconfig: None,
                },
            )
            .expect("start")
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !replicas.iter().all(leads) {
        assert!(Instant::now() < deadline, "{}", logs(&replicas));
        std::thread::sleep(Duration::from_millis(50));
    }
    let ns = "e2e-leader-off";
    stale_force(cluster, ns, "p");
    let deadline = Instant::now() + GRACE + Duration::from_secs(15);
    while !is_reset(cluster, ns, "p") {
        assert!(Instant::now() < deadline, "{}", logs(&replicas));
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(GRACE + Duration::from_secs(2));
    let resets: f64 = replicas.iter().map(sweeper_resets).sum();
    assert_eq!(
        resets, 1.0,
        "one reset wins; the other fails its resourceVersion test"
    );
    for (i, replica) in replicas.iter().enumerate() {
        assert!(
            replica.log_tail(10_000).contains("stale-force sweeper on"),
            "replica {i} runs the sweeper"
        );
        assert_eq!(transitions(replica, "acquired"), 0.0, "no election: {i}");
        assert!(
            !replica.log_tail(10_000).contains("leader election on"),
            "replica {i} took part in no election"
        );
    }
}
