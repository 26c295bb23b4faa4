//! The answer side: the AdmissionReview response built from a Verdict, in
//! one place, serialised by serde_json from types of our own (kube-core's
//! types carry the patch as an array of byte values): the patch goes out as
//! base64 text, the form the Kubernetes documentation shows, a third to a
//! quarter of the size. The denial message and the patch's base64 are
//! written once, escaped straight into the body: neither is built as a
//! string of its own first.

use std::collections::BTreeMap;
use std::fmt;

use base64::display::Base64Display;
use base64::engine::general_purpose::STANDARD;
use serde::{Serialize, Serializer};

use super::request::AdmissionRequest;
use crate::policy::rules::{DenialMessage, Verdict};

/// A value serialised as the JSON string of its `Display`, written into
/// the body as it is formatted.
struct Displayed<T>(T);

impl<T: fmt::Display> Serialize for Displayed<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0)
    }
}

/// The room a denial message is given in the body before it is written: a
/// message longer than this makes the body grow once.
const MESSAGE_ROOM: usize = 640;

/// The response AdmissionReview, members in the order they are written.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Review<'a> {
    api_version: &'a str,
    kind: &'static str,
    response: Response<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Response<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<Displayed<Base64Display<'a, 'static, base64::engine::GeneralPurpose>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<&'a str>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    audit_annotations: &'a BTreeMap<String, String>,
}

/// The status of a denial: 403 Forbidden with the message.
#[derive(Serialize)]
struct Status<'a> {
    status: &'static str,
    code: u16,
    reason: &'static str,
    message: Displayed<DenialMessage<'a>>,
}

/// The response AdmissionReview, serialised: uid echoed, apiVersion kept,
/// status 403 with the message on denial, else the patch (if any), and the
/// warnings and audit annotations. Written by serde_json into one buffer
/// sized for it once: the escaping of the strings adds a few bytes at most,
/// and each denial is given [`MESSAGE_ROOM`] bytes (a longer message grows
/// the buffer once).
pub(super) fn wire_body(request: &AdmissionRequest, verdict: &Verdict) -> Vec<u8> {
    let denial = verdict.denial();
    let mut extra_warning = None;
    let patch = match (&denial, verdict.patch.is_empty()) {
        (None, false) => match serde_json::to_vec(&verdict.patch) {
            Ok(json) => Some(json),
            Err(e) => {
                extra_warning = Some(format!("default not applied: {e}"));
                None
            }
        },
        _ => None,
    };
    let warnings: Vec<&str> = extra_warning
        .iter()
        .chain(&verdict.warnings)
        .map(String::as_str)
        .collect();
    let strings_len =
        |texts: &mut dyn Iterator<Item = &str>| texts.map(|t| t.len() + 8).sum::<usize>();
    let capacity = 160
        + request.api_version.len()
        + request.uid.len()
        + verdict.denials.len() * MESSAGE_ROOM
        + patch.as_ref().map_or(0, |json| json.len().div_ceil(3) * 4)
        + strings_len(&mut warnings.iter().copied())
        + strings_len(
            &mut verdict
                .audit
                .iter()
                .flat_map(|(k, v)| [k.as_str(), v.as_str()]),
        );
    let review = Review {
        api_version: &request.api_version,
        kind: "AdmissionReview",
        response: Response {
            uid: &request.uid,
            allowed: denial.is_none(),
            status: denial.map(|message| Status {
                status: "Failure",
                code: 403,
                reason: "Forbidden",
                message: Displayed(message),
            }),
            patch: patch
                .as_deref()
                .map(|json| Displayed(Base64Display::new(json, &STANDARD))),
            patch_type: patch.as_ref().map(|_| "JSONPatch"),
            warnings,
            audit_annotations: &verdict.audit,
        },
    };
    let mut out = Vec::with_capacity(capacity);
    // Serialising borrowed strings, a bool and a number into a Vec cannot
    // fail; should it ever, the empty body is refused by the API server.
    if serde_json::to_writer(&mut out, &review).is_err() {
        out.clear();
    }
    out
}
