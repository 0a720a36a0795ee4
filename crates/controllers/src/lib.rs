//! kube-controller-manager's controllers, written as ordinary kubewright-runtime
//! controllers: informers, work queues and reconcilers over the public client, as
//! any operator built with kubewright is.
//!
//! The embedded API server runs them against itself (`kw serve`, the test servers of
//! `kubewright-testing`); `kw controllers` runs them against any cluster, which is how
//! CI proves them against a real kube-apiserver with the matching
//! kube-controller-manager controllers switched off.
//!
//! Controllers are named as kube-controller-manager names them, and selected as its
//! `--controllers` flag selects them:
//!
//! ```
//! use kubewright_controllers::Selection;
//! let all = Selection::parse("*").unwrap();
//! assert!(all.enabled("pod-garbage-collector-controller"));
//! let none = Selection::parse("*,-pod-garbage-collector-controller").unwrap();
//! assert!(!none.enabled("pod-garbage-collector-controller"));
//! assert!(Selection::parse("no-such-controller").is_err());
//! ```

pub mod disruption;
pub mod podgc;
pub mod storage_protection;
pub mod ttl_after_finished;

use kubewright_client::Client;
use kubewright_runtime::{CancellationToken, Manager, ManagerError};

/// The user agent the controllers' client sends beside the embedded server and from
/// `kw controllers`: its first part, which servers take as the field manager of its
/// writes, is kube-controller-manager's, so managedFields read as on any cluster.
pub const USER_AGENT: &str = concat!(
    "kube-controller-manager/kubewright-controllers-",
    env!("CARGO_PKG_VERSION")
);

/// Every controller of this crate, by kube-controller-manager's name.
pub const CONTROLLERS: &[&str] = &[
    podgc::NAME,
    ttl_after_finished::NAME,
    storage_protection::PVC_NAME,
    storage_protection::PV_NAME,
    storage_protection::VAC_NAME,
    disruption::NAME,
];

/// Errors from selecting or running the controllers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A name in a selection that no controller has.
    #[error("unknown controller {name:?} (known: {known})", known = CONTROLLERS.join(", "))]
    UnknownController {
        /// The name as given.
        name: String,
    },
    /// The manager could not start or stopped with an error.
    #[error(transparent)]
    Manager(#[from] ManagerError),
}

/// Which controllers run, in kube-controller-manager's `--controllers` syntax: a
/// comma-separated list where `*` is every controller, `name` adds one and `-name`
/// removes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    enabled: Vec<&'static str>,
}

impl Selection {
    /// Every controller.
    pub fn all() -> Self {
        Self {
            enabled: CONTROLLERS.to_vec(),
        }
    }

    /// Parses `*,-name,name`; an unknown name is an error.
    pub fn parse(spec: &str) -> Result<Self, Error> {
        let mut all = false;
        let (mut on, mut off) = (Vec::new(), Vec::new());
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if item == "*" {
                all = true;
                continue;
            }
            let (list, name) = match item.strip_prefix('-') {
                Some(name) => (&mut off, name),
                None => (&mut on, item),
            };
            let known = CONTROLLERS.iter().find(|c| **c == name).ok_or_else(|| {
                Error::UnknownController {
                    name: name.to_string(),
                }
            })?;
            list.push(*known);
        }
        let enabled = CONTROLLERS
            .iter()
            .copied()
            .filter(|c| (all || on.contains(c)) && !off.contains(c))
            .collect();
        Ok(Self { enabled })
    }

    /// Whether the controller named `name` runs.
    pub fn enabled(&self, name: &str) -> bool {
        self.enabled.contains(&name)
    }

    /// The controllers that run.
    pub fn names(&self) -> &[&'static str] {
        &self.enabled
    }
}

/// Adds the selected controllers to `manager`.
pub fn add(manager: &mut Manager, selection: &Selection) -> Result<(), Error> {
    for name in selection.names() {
        match *name {
            podgc::NAME => podgc::add(manager)?,
            ttl_after_finished::NAME => ttl_after_finished::add(manager)?,
            storage_protection::PVC_NAME => storage_protection::add_pvc(manager)?,
            storage_protection::PV_NAME => storage_protection::add_pv(manager)?,
            storage_protection::VAC_NAME => storage_protection::add_vac(manager)?,
            disruption::NAME => disruption::add(manager)?,
            _ => unreachable!("CONTROLLERS and add() list the same names"),
        }
    }
    Ok(())
}

/// Runs the selected controllers over `client` until `stop` is cancelled, in one
/// manager without leader election.
pub async fn run(
    client: Client,
    selection: &Selection,
    stop: CancellationToken,
) -> Result<(), Error> {
    let mut manager = Manager::builder(client).build()?;
    add(&mut manager, selection)?;
    manager.run(stop).await?;
    Ok(())
}

/// Runs the selected controllers against the cluster a kubeconfig (YAML, its current
/// context) describes, with no client-side rate limit, until `stop` is cancelled. This
/// is how an embedded server runs them beside itself: give
/// `kubewright_apiserver::ServerBuilder::with_task` a closure that calls this. Errors
/// are logged, since nothing awaits the task's result.
pub async fn run_beside_server(kubeconfig: String, selection: Selection, stop: CancellationToken) {
    use kubewright_client::config::{KubeConfigOptions, Kubeconfig};
    let config = Kubeconfig::from_yaml(&kubeconfig)
        .map_err(kubewright_client::Error::from)
        .and_then(|kc| {
            kubewright_client::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .map_err(kubewright_client::Error::from)
        });
    let client = config.and_then(|mut config| {
        // The server is in the same process; it needs no protection from its controllers.
        config.qps = 0.0;
        config.user_agent = USER_AGENT.to_string();
        Client::new(config)
    });
    let outcome = match client {
        Ok(client) => run(client, &selection, stop).await,
        Err(e) => {
            tracing::error!("the embedded controllers cannot reach their server: {e}");
            return;
        }
    };
    if let Err(e) = outcome {
        tracing::error!("the embedded controllers stopped: {e}");
    }
}
