//! A simulated cluster for the plan: the two Secrets, one caBundle every
//! webhook carries (written the moment a pass writes it, as the API
//! server sees it within moments), a controller pass every 200 ms that
//! writes what the plan says in the controller's order, and two replicas
//! that serve what the serving Secret held 9.5 s and 5 s ago (the
//! kubelet's lag, under the 10 s propagation delay). After every pass it
//! checks that the caBundle trusts what each replica serves, for
//! [`MARGIN`](crate::background::certs::schedule::MARGIN) to come.

use time::OffsetDateTime;

use super::{at, served, stored, unix};
use crate::background::certs::linger::Lingering;
use crate::background::certs::material::{Material, Served, Stored};
use crate::background::certs::plan::{self, Change, Reason};
use crate::background::certs::schedule::{MARGIN, signed};
use crate::background::certs::trust;
use crate::background::certs::{CertOptions, bundle};
use crate::pki::PemPair;

/// What happened, counted.
#[derive(Debug, Default)]
pub struct Counts {
    /// Completed CA rotations.
    pub ca_rotations: usize,
    /// Serving certificates renewed because they were due.
    pub serving_renewals: usize,
}

pub struct World {
    settings: CertOptions,
    now: OffsetDateTime,
    ca: Option<Stored>,
    serving: Option<Served>,
    bundle: String,
    /// Every version of the serving Secret, with when it was written.
    history: Vec<(OffsetDateTime, Served)>,
    last: Option<Material>,
    /// The controller's memory of the CAs the replicas serve from.
    lingering: Lingering,
    /// Secret writes.
    pub writes: usize,
    /// Moments a replica served what the caBundle did not trust.
    pub failures: Vec<String>,
    pub metrics: Counts,
}

/// How far behind the serving Secret each replica is, in milliseconds.
const LAGS_MS: [i64; 2] = [9_500, 5_000];

impl World {
    pub fn new(settings: CertOptions) -> Self {
        Self {
            settings,
            now: at(0),
            ca: None,
            serving: None,
            bundle: String::new(),
            history: Vec::new(),
            last: None,
            lingering: Lingering::default(),
            writes: 0,
            failures: Vec::new(),
            metrics: Counts::default(),
        }
    }

    /// The material of a fresh install one second in.
    pub fn settled_material(settings: CertOptions) -> Material {
        let mut world = Self::new(settings);
        world.run_until(at(1));
        world.material()
    }

    /// What the last pass planned.
    pub fn material(&self) -> Material {
        self.last.clone().expect("a pass ran")
    }

    pub fn delete_serving(&mut self) {
        self.serving = None;
    }

    pub fn delete_ca(&mut self) {
        self.ca = None;
    }

    /// How many CAs the caBundle holds.
    pub fn bundle_cas(&self) -> usize {
        trust::pem_certificates(self.bundle.as_bytes()).len()
    }

    /// Both Secrets deleted at once.
    pub fn delete_both(&mut self) {
        self.ca = None;
        self.serving = None;
    }

    /// A new controller (another leader, or a restart): its memory is
    /// empty.
    pub fn restart_controller(&mut self) {
        self.lingering = Lingering::default();
    }

    pub fn edit_ca(&mut self, edit: impl FnOnce(&mut Stored)) {
        if let Some(ca) = self.ca.as_mut() {
            edit(ca);
        }
    }

    /// Passes every 200 ms until `until`.
    pub fn run_until(&mut self, until: OffsetDateTime) {
        while self.now < until {
            self.pass();
            self.check();
            self.now += time::Duration::milliseconds(200);
        }
    }

    fn pass(&mut self) {
        let bundle = self.bundle.clone();
        let plan = plan::plan(
            self.ca.as_ref(),
            self.serving.as_ref(),
            self.now,
            &self.settings,
            |cas| bundle::carries(bundle.as_bytes(), cas),
        )
        .expect("plan");
        let propagation = self.settings.propagation;
        self.lingering.update(&plan, self.now, propagation);
        if plan.write_ca {
            self.ca = Some(stored(&plan.material));
            self.writes += 1;
        }
        self.bundle = self.lingering.bundle(&plan.material);
        if plan.write_serving {
            let data = served(&plan.material);
            self.serving = Some(data.clone());
            self.history.push((self.now, data));
            self.writes += 1;
        }
        self.lingering
            .written(&plan.material, self.now, propagation);
        for change in &plan.changes {
            match change {
                Change::RotationCompleted => self.metrics.ca_rotations += 1,
                Change::ServingIssued(Reason::Due) => self.metrics.serving_renewals += 1,
                _ => {}
            }
        }
        self.last = Some(plan.material);
    }

    fn check(&mut self) {
        let soon = unix(self.now + signed(MARGIN));
        for (replica, lag) in LAGS_MS.iter().enumerate() {
            let seen = self.now - time::Duration::milliseconds(*lag);
            let Some((_, files)) = self.history.iter().rev().find(|(t, _)| *t <= seen) else {
                continue;
            };
            let leaf = trust::pem_certificates(&files["tls.crt"]);
            if let Err(why) = trust::verify(self.bundle.as_bytes(), &leaf, "hook.ns.svc", soon) {
                let secs = (self.now - at(0)).as_seconds_f64();
                self.failures
                    .push(format!("{secs:.1}s, replica {replica}: {why}"));
            }
        }
    }
}

/// A CA with its key whose name constraints permit example.com only.
pub fn name_constrained_ca() -> PemPair {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "constrained CA");
    params.name_constraints = Some(rcgen::NameConstraints {
        permitted_subtrees: vec![rcgen::GeneralSubtree::DnsName("example.com".into())],
        excluded_subtrees: vec![],
    });
    params.not_before = at(-600);
    params.not_after = at(100_000);
    let cert = params.self_signed(&key).expect("self-signed");
    PemPair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    }
}
