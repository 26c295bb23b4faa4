//! `review`: answer one AdmissionReview as the webhook would.

use std::io::Read as _;
use std::process::ExitCode;
use std::time::Duration;

use super::args::ReviewArgs;
use super::current_thread_runtime;
use crate::admission::{self, AnswerContext, ParseError};
use crate::apiserver::{self, KubeClientError};
use crate::authz::{Authorizer, RbacAuthorizer, StaticLists};
use crate::policy::Policy;

/// Runs `review`: exit 0 if allowed, 1 if denied, 2 on bad input.
pub(crate) fn run(args: &ReviewArgs) -> ExitCode {
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
            Some(path) => Authorizer::Rbac(RbacAuthorizer::new(
                apiserver::client(Some(path))
                    .await
                    .map_err(ReviewCommandError::Client)?,
            )),
            None => {
                Authorizer::StaticLists(StaticLists::new("review was run without --kubeconfig"))
            }
        };
        let context = AnswerContext {
            authorizer: &authorizer,
            permission_timeout: Duration::from_secs(10),
            now: args.now.unwrap_or_else(time::OffsetDateTime::now_utc),
            // Not read: a namespace left to Numaplane's default is judged
            // as if that were no-strategy, and the denial says so.
            cluster_default: None,
            cluster: None,
        };
        admission::answer(args.webhook.into(), &policy, &input, context)
            .await
            .map_err(|source| ReviewCommandError::Answer {
                file: args.file.clone(),
                source,
            })
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

/// Why `review` cannot answer; the message is what it prints.
#[derive(Debug, thiserror::Error)]
enum ReviewCommandError {
    /// The file or standard input cannot be read.
    #[error("cannot read {file}: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    /// The input is not JSON, and not YAML either.
    #[error("{file} is neither JSON nor YAML: {source}")]
    NotJsonOrYaml {
        file: String,
        /// What the YAML reader said (boxed: it is large).
        source: Box<serde_saphyr::Error>,
    },
    /// The input is YAML but not an object.
    #[error(
        "{file} is not an AdmissionReview: expected a JSON or YAML object with apiVersion, kind and request"
    )]
    NotAnObject { file: String },
    /// The YAML read cannot be written as JSON.
    #[error("{file}: {source}")]
    ToJson {
        file: String,
        source: serde_json::Error,
    },
    /// No client for the API server given with --kubeconfig.
    #[error(transparent)]
    Client(KubeClientError),
    /// The input is not an AdmissionReview that can be answered.
    #[error("{file}: {source}")]
    Answer { file: String, source: ParseError },
}

/// Reads an AdmissionReview from a file or stdin; YAML is turned into JSON.
fn read_input(file: &str) -> Result<Vec<u8>, ReviewCommandError> {
    let mut text = String::new();
    let read = if file == "-" {
        std::io::stdin().read_to_string(&mut text)
    } else {
        std::fs::File::open(file).and_then(|mut f| f.read_to_string(&mut text))
    };
    let file = file.to_owned();
    if let Err(source) = read {
        return Err(ReviewCommandError::Read { file, source });
    }
    if serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok() {
        return Ok(text.into_bytes());
    }
    let value: serde_json::Value = match serde_saphyr::from_str(&text) {
        Ok(value) => value,
        Err(e) => {
            let source = Box::new(e);
            return Err(ReviewCommandError::NotJsonOrYaml { file, source });
        }
    };
    if !value.is_object() {
        return Err(ReviewCommandError::NotAnObject { file });
    }
    serde_json::to_vec(&value).map_err(|source| ReviewCommandError::ToJson { file, source })
}
