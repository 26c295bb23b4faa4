//! `review`: answer one AdmissionReview as the webhook would.

use std::io::Read as _;
use std::process::ExitCode;
use std::time::Duration;

use super::args::ReviewArgs;
use super::current_thread_runtime;
use crate::admission::{self, AnswerContext};
use crate::authz::{self, Authorizer, RbacAuthorizer, StaticLists};
use crate::policy::Policy;

/// Runs `review`: exit 0 if allowed, 1 if denied, 2 on bad input.
pub fn run(args: &ReviewArgs) -> ExitCode {
    let policy = match Policy::from_file_or_built_in(args.policy.as_deref()) {
        Ok(policy) => policy,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let input = match read_input(&args.file) {
        Ok(input) => input,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match current_thread_runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let answer = runtime.block_on(async {
        let authorizer = match &args.kubeconfig {
            Some(path) => {
                Authorizer::Rbac(RbacAuthorizer::new(authz::kube_client(Some(path)).await?))
            }
            None => {
                Authorizer::StaticLists(StaticLists::new("review was run without --kubeconfig"))
            }
        };
        let judge = AnswerContext {
            authorizer: &authorizer,
            limit: Duration::from_secs(10),
            now: args.now.unwrap_or_else(time::OffsetDateTime::now_utc),
        };
        admission::answer(args.webhook.into(), &policy, &input, judge)
            .await
            .map_err(|e| format!("{}: {e}", args.file))
    });
    match answer {
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
        Ok((_, outcome)) => {
            let pretty = serde_json::from_slice::<serde_json::Value>(&outcome.body)
                .and_then(|v| serde_json::to_string_pretty(&v))
                .unwrap_or_else(|_| String::from_utf8_lossy(&outcome.body).into_owned());
            println!("{pretty}");
            if let Some(message) = outcome.message() {
                eprintln!("denied: {message}");
            }
            if outcome.allowed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
    }
}

/// Reads an AdmissionReview from a file or stdin; YAML is turned into JSON.
fn read_input(file: &str) -> Result<Vec<u8>, String> {
    let mut text = String::new();
    let read = if file == "-" {
        std::io::stdin().read_to_string(&mut text)
    } else {
        std::fs::File::open(file).and_then(|mut f| f.read_to_string(&mut text))
    };
    read.map_err(|e| format!("cannot read {file}: {e}"))?;
    if serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok() {
        return Ok(text.into_bytes());
    }
    let value: serde_json::Value = serde_saphyr::from_str(&text)
        .map_err(|e| format!("{file} is neither JSON nor YAML: {e}"))?;
    if !value.is_object() {
        return Err(format!(
            "{file} is not an AdmissionReview: expected a JSON or YAML object with apiVersion, kind and request"
        ));
    }
    serde_json::to_vec(&value).map_err(|e| format!("{file}: {e}"))
}
