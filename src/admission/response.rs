//! The answer side: the AdmissionReview response built from a Verdict, in
//! one place, written as JSON text of our own (kube-core's types carry the
//! patch as an array of byte values): the patch goes out as base64 text,
//! the form the Kubernetes documentation shows, a third to a quarter of the
//! size.

use base64::Engine as _;

use super::json_out;
use super::request::AdmissionRequest;
use crate::policy::rules::Verdict;

/// The response AdmissionReview, serialised: uid echoed, apiVersion kept,
/// status 403 with the message on denial, else the patch (if any), and the
/// warnings and audit annotations. Written straight into one buffer sized
/// for it ([`json_out`]): the shape is fixed and every value is a string,
/// a boolean or a number.
pub(super) fn wire_body(request: &AdmissionRequest, decision: &Verdict) -> Vec<u8> {
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
    let warnings = extra_warning
        .iter()
        .chain(&decision.warnings)
        .map(String::as_str);
    let strings_len =
        |texts: &mut dyn Iterator<Item = &str>| texts.map(|t| t.len() + 8).sum::<usize>();
    let capacity = 160
        + request.api_version.len()
        + request.uid.len()
        + denial.as_ref().map_or(0, String::len)
        + patch.as_ref().map_or(0, String::len)
        + strings_len(&mut warnings.clone())
        + strings_len(
            &mut decision
                .audit
                .iter()
                .flat_map(|(k, v)| [k.as_str(), v.as_str()]),
        );
    let mut out = Vec::with_capacity(capacity);
    let mut review = json_out::Object::open(&mut out);
    review.str("apiVersion", &request.api_version);
    review.str("kind", "AdmissionReview");
    let mut response = json_out::Object::open(review.key("response"));
    response.str("uid", &request.uid);
    response.bool("allowed", denial.is_none());
    if let Some(message) = &denial {
        let mut status = json_out::Object::open(response.key("status"));
        status.str("status", "Failure");
        status.u16("code", 403);
        status.str("reason", "Forbidden");
        status.str("message", message);
        status.close();
    }
    if let Some(patch) = &patch {
        response.str("patch", patch);
        response.str("patchType", "JSONPatch");
    }
    if warnings.clone().next().is_some() {
        json_out::strings(response.key("warnings"), warnings);
    }
    if !decision.audit.is_empty() {
        let mut audit = json_out::Object::open(response.key("auditAnnotations"));
        for (key, value) in &decision.audit {
            audit.str(key, value);
        }
        audit.close();
    }
    response.close();
    review.close();
    out
}
