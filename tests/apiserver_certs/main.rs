//! Tests of `serve --manage-certs` through a real kube-apiserver and etcd:
//! the self-managed install with its replicas. Each test has a cluster of
//! its own and they run one at a time (`ONE_AT_A_TIME`), so they have a
//! binary of their own, where no test of another subject runs beside them.

#[path = "../apiserver/apiserver_support/mod.rs"]
mod apiserver_support;

mod apiserver_certs_support;

mod certs;
mod certs_deleted;
mod certs_proof;
mod stolen_token;
