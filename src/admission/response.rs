//! The answer side: the AdmissionReview response built from a Decision, in
//! one place. Our own small wire types (kube-core's carry the patch as an
//! array of byte values): the patch goes out as base64 text, the form the
//! Kubernetes documentation shows, a third to a quarter of the size.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::Serialize;

use super::request::AdmissionRequest;
use crate::policy::rules::Decision;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReviewOut<'a> {
    api_version: &'a str,
    kind: &'static str,
    response: ResponseOut<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResponseOut<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<StatusOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<&'a str>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    audit_annotations: &'a BTreeMap<String, String>,
}

/// A denial's `status`: a metav1.Status with code 403.
#[derive(Serialize)]
struct StatusOut {
    status: &'static str,
    code: u16,
    reason: &'static str,
    message: String,
}

/// The response AdmissionReview, serialised: uid echoed, apiVersion kept,
/// status 403 with the message on denial, else the patch (if any), and the
/// warnings and audit annotations.
pub(super) fn wire_body(request: &AdmissionRequest, decision: &Decision) -> Vec<u8> {
    let denial = decision.denial_message();
    let mut extra_warning = None;
    let patch = match (&denial, decision.patch.is_empty()) {
        (None, false) => match serde_json::to_vec(&decision.patch) {
            Ok(json) => Some(base64::engine::general_purpose::STANDARD.encode(json)),
            Err(e) => {
                extra_warning = Some(format!("default not applied: {e}"));
                None
            }
        },
        _ => None,
    };
    let mut warnings: Vec<&str> = extra_warning.iter().map(String::as_str).collect();
    warnings.extend(decision.warnings.iter().map(String::as_str));
    let review = ReviewOut {
        api_version: &request.api_version,
        kind: "AdmissionReview",
        response: ResponseOut {
            uid: &request.uid,
            allowed: denial.is_none(),
            status: denial.map(|message| StatusOut {
                status: "Failure",
                code: 403,
                reason: "Forbidden",
                message,
            }),
            patch_type: patch.as_ref().map(|_| "JSONPatch"),
            patch,
            warnings,
            audit_annotations: &decision.audit,
        },
    };
    serde_json::to_vec(&review).unwrap_or_else(|e| {
        // Serialising plain strings and maps cannot fail; answer with a
        // denial rather than nothing if it ever does.
        serde_json::json!({
            "apiVersion": request.api_version,
            "kind": "AdmissionReview",
            "response": {
                "uid": request.uid,
                "allowed": false,
                "status": {"code": 500, "message": format!("cannot serialise the answer: {e}")},
            },
        })
        .to_string()
        .into_bytes()
    })
}
