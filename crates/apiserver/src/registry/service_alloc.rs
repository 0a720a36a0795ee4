//! Cluster IPs and node ports of Services, unique across the cluster, as kube-apiserver's
//! allocators hand them out (`pkg/registry/core/service/storage/alloc.go`).
//!
//! The values in use are read from the stored Services when a write allocates, plus the
//! values that writes in flight have chosen but not stored yet ([`Reservation`]): two
//! concurrent creates never get the same IP or port, and a value is free again as soon
//! as the Service that held it is deleted or stops needing it (kube-apiserver releases
//! them synchronously too). What is checked and what the errors say:
//! - a requested cluster IP outside the service CIDR, or held by another Service: 422 on
//!   `spec.clusterIPs`;
//! - a requested node port outside 30000-32767, or held by another Service (or by
//!   another port of the same Service with a different `port`): 422 on
//!   `spec.ports[i].nodePort`;
//! - no free node port left: 500, "failed to allocate a nodePort: range is full".
//!
//! Ports of one Service with the same `port` (e.g. TCP and UDP 53) share one node port,
//! and `healthCheckNodePort` is allocated for a LoadBalancer with
//! `externalTrafficPolicy: Local`. Dynamic values come from the upper part of each range
//! first (kube-apiserver keeps the lower band for static requests).

use crate::error::ApiError;
use crate::registry::ResourceDef;
use crate::storage::Storage;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::net::Ipv4Addr;
use std::sync::Mutex;

/// The service CIDR, kube-apiserver's default `--service-cluster-ip-range` (10.0.0.0/24):
/// its base address and prefix. 253 Services besides `default/kubernetes`, as there.
pub(crate) const SERVICE_CIDR: (Ipv4Addr, u32) = (Ipv4Addr::new(10, 0, 0, 0), 24);

/// The cluster IP of the `default/kubernetes` Service: the first of the range.
pub(crate) fn first_service_ip() -> Ipv4Addr {
    Ipv4Addr::from(u32::from(SERVICE_CIDR.0) + 1)
}

/// kube-apiserver's default node port range.
pub(crate) const NODE_PORTS: (u32, u32) = (30_000, 32_767);

/// The static band of the node port range: min(max(16, size/32), 128) (`portallocator`).
fn port_band() -> u32 {
    ((NODE_PORTS.1 - NODE_PORTS.0 + 1) / 32).clamp(16, 128)
}

/// The static band of a service IP range of `size` addresses: min(max(16, size/16), 256)
/// (`ipallocator`).
fn ip_band(size: u32) -> u32 {
    (size / 16).clamp(16, 256)
}

/// Values chosen by writes in flight.
#[derive(Default)]
struct Taken {
    ips: HashSet<u32>,
    ports: HashSet<u32>,
}

/// The allocator: one per server.
#[derive(Default)]
pub(crate) struct ServiceAllocator {
    pending: Mutex<Taken>,
}

/// What one write chose, held until the write has stored its Service (or failed):
/// dropping it makes the values depend on the store alone again.
pub(crate) struct Reservation<'a> {
    alloc: &'a ServiceAllocator,
    ips: Vec<u32>,
    ports: Vec<u32>,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut p = self.alloc.pending.lock().unwrap_or_else(|e| e.into_inner());
        for ip in &self.ips {
            p.ips.remove(ip);
        }
        for port in &self.ports {
            p.ports.remove(port);
        }
    }
}

/// One allocation: the values in use by others, and what this write takes.
struct Op<'o> {
    used: &'o mut Taken,
    ips: Vec<u32>,
    ports: Vec<u32>,
    /// For error messages: the Service's name (empty under generateName, as upstream).
    name: &'o str,
    def: &'o ResourceDef,
    /// A dry run: kube-apiserver's dry-run allocators check requested node ports
    /// against those in use, but requested IPs only against the range, and hand out
    /// placeholders (the CIDR's network address, node ports from 32769 up).
    dry_run: bool,
}

fn is_services(def: &ResourceDef) -> bool {
    def.group.is_empty() && def.plural == "services"
}

fn spec_str<'v>(o: &'v Value, k: &str) -> Option<&'v str> {
    o.get("spec")?.get(k)?.as_str()
}

pub(crate) fn service_type(o: &Value) -> &str {
    spec_str(o, "type").unwrap_or("ClusterIP")
}

pub(crate) fn needs_cluster_ip(o: &Value) -> bool {
    service_type(o) != "ExternalName"
}

/// `shouldAllocateNodePorts`.
pub(crate) fn allocates_node_ports(o: &Value) -> bool {
    match service_type(o) {
        "NodePort" => true,
        "LoadBalancer" => o.pointer("/spec/allocateLoadBalancerNodePorts") != Some(&json!(false)),
        _ => false,
    }
}

fn has_node_ports(o: &Value) -> bool {
    matches!(service_type(o), "NodePort" | "LoadBalancer")
}

/// `NeedsHealthCheck`.
pub(crate) fn needs_health_check(o: &Value) -> bool {
    service_type(o) == "LoadBalancer" && spec_str(o, "externalTrafficPolicy") == Some("Local")
}

fn ports(o: &Value) -> &[Value] {
    o.pointer("/spec/ports")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn node_port(p: &Value) -> u32 {
    p.get("nodePort")
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(0)
}

fn health_port(o: &Value) -> u32 {
    o.pointer("/spec/healthCheckNodePort")
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(0)
}

/// Every node port a Service holds.
fn node_ports_of(o: &Value) -> Vec<u32> {
    let mut out: Vec<u32> = ports(o).iter().map(node_port).filter(|n| *n != 0).collect();
    if health_port(o) != 0 {
        out.push(health_port(o));
    }
    out
}

fn cluster_ips_of(o: &Value) -> Vec<u32> {
    o.pointer("/spec/clusterIPs")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .filter_map(|s| s.parse::<Ipv4Addr>().ok())
                .map(u32::from)
                .collect()
        })
        .unwrap_or_default()
}

/// A free value in `lo..=hi`: a random one above the lower `band` first, probing
/// forward (kube-apiserver's bitmap allocators keep the lower band for static requests),
/// then the band. None when the range is taken.
fn pick(lo: u32, hi: u32, band: u32, taken: impl Fn(u32) -> bool) -> Option<u32> {
    let band = band.min(hi - lo);
    let probe = |from: u32, to: u32| -> Option<u32> {
        if to < from {
            return None;
        }
        let n = to - from + 1;
        let start = rand::random::<u32>() % n;
        (0..n).map(|i| from + (start + i) % n).find(|v| !taken(*v))
    };
    probe(lo + band, hi).or_else(|| probe(lo, lo + band - 1))
}

impl<'o> Op<'o> {
    fn new(used: &'o mut Taken, name: &'o str, def: &'o ResourceDef, dry_run: bool) -> Self {
        Op {
            used,
            ips: Vec::new(),
            ports: Vec::new(),
            name,
            def,
            dry_run,
        }
    }

    fn invalid(&self, field: String, value: &str, why: &str) -> ApiError {
        ApiError::invalid(
            &crate::registry::events::error_def(self.def),
            self.name,
            vec![crate::error::invalid_cause(&field, value, why)],
        )
    }

    fn take_port(&mut self, n: u32) {
        self.used.ports.insert(n);
        self.ports.push(n);
    }

    /// `Allocate(n)` of the node port allocator.
    fn request_port(&mut self, n: u32) -> Result<(), &'static str> {
        if self.dry_run {
            // `Has` of a port outside the range is false: accepted.
            if self.used.ports.contains(&n) {
                return Err("provided port is already allocated");
            }
            self.take_port(n);
            return Ok(());
        }
        if !(NODE_PORTS.0..=NODE_PORTS.1).contains(&n) {
            return Err(
                "provided port is not in the valid range. The range of valid ports is 30000-32767",
            );
        }
        if self.used.ports.contains(&n) {
            return Err("provided port is already allocated");
        }
        self.take_port(n);
        Ok(())
    }

    /// `AllocateNext()` of the node port allocator.
    fn next_port(&mut self) -> Option<u32> {
        if self.dry_run {
            let n = self.ports.iter().copied().max().unwrap_or(32_768) + 1;
            self.take_port(n);
            return Some(n);
        }
        let used = &self.used.ports;
        let n = pick(NODE_PORTS.0, NODE_PORTS.1, port_band(), |v| {
            used.contains(&v)
        })?;
        self.take_port(n);
        Some(n)
    }

    /// A cluster IP for a Service that needs one: the requested one if free and in
    /// range, else a free one.
    fn cluster_ip(&mut self, obj: &mut Value) -> Result<(), ApiError> {
        let requested = spec_str(obj, "clusterIP").unwrap_or("").to_string();
        if requested == "None" {
            return Ok(());
        }
        let (base, prefix) = SERVICE_CIDR;
        let (lo, hi) = (u32::from(base), u32::from(base) | (u32::MAX >> prefix));
        let ip = if requested.is_empty() && self.dry_run {
            lo
        } else if requested.is_empty() {
            let used = &self.used.ips;
            // Network and broadcast addresses are never handed out.
            let Some(ip) = pick(lo + 1, hi - 1, ip_band(hi - lo - 1), |v| used.contains(&v)) else {
                return Err(ApiError::internal_cause(format!(
                    "failed to allocate a serviceIP for Service {}: range is full",
                    crate::error::go_quote(self.name)
                )));
            };
            ip
        } else {
            // An unparseable IP is validation's to refuse.
            let Ok(ip) = requested.parse::<Ipv4Addr>() else {
                return Ok(());
            };
            let ip = u32::from(ip);
            let value = crate::error::go_json_text(
                obj.pointer("/spec/clusterIPs")
                    .unwrap_or(&json!([requested])),
            );
            let why = if ip <= lo || ip >= hi {
                "the provided network does not match the current range"
            } else if !self.dry_run && self.used.ips.contains(&ip) {
                "provided IP is already allocated"
            } else {
                ""
            };
            if !why.is_empty() {
                return Err(self.invalid(
                    "spec.clusterIPs".into(),
                    &value,
                    &format!("failed to allocate IP {requested}: {why}"),
                ));
            }
            ip
        };
        self.used.ips.insert(ip);
        self.ips.push(ip);
        let text = Ipv4Addr::from(ip).to_string();
        obj["spec"]["clusterIP"] = json!(text);
        let ips = obj["spec"]
            .get("clusterIPs")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if ips.is_empty() {
            obj["spec"]["clusterIPs"] = json!([text]);
        }
        Ok(())
    }

    /// `initNodePorts`: the node ports of a new Service (or of one that now needs them).
    fn init_node_ports(&mut self, obj: &mut Value) -> Result<(), ApiError> {
        let allocate = allocates_node_ports(obj);
        let Some(list) = obj.pointer_mut("/spec/ports").and_then(Value::as_array_mut) else {
            return Ok(());
        };
        let port_of = |p: &Value| p.get("port").and_then(Value::as_i64).unwrap_or(0);
        let mut by_port: BTreeMap<i64, u32> = BTreeMap::new();
        for i in 0..list.len() {
            let np = node_port(&list[i]);
            if np == 0 && !allocate {
                continue;
            }
            let port = port_of(&list[i]);
            match by_port.get(&port).copied() {
                None => {
                    // A value requested by this or a later port with the same `port`.
                    let requested = list[i..]
                        .iter()
                        .filter(|p| port_of(p) == port)
                        .map(node_port)
                        .find(|n| *n != 0);
                    let n = match requested {
                        Some(n) => {
                            self.request_port(n).map_err(|why| {
                                self.invalid(
                                    format!("spec.ports[{i}].nodePort"),
                                    &n.to_string(),
                                    why,
                                )
                            })?;
                            n
                        }
                        None => self.next_port().ok_or_else(|| {
                            ApiError::internal_cause("failed to allocate a nodePort: range is full")
                        })?,
                    };
                    list[i]["nodePort"] = json!(n);
                    by_port.insert(port, n);
                }
                Some(shared) if np != shared => {
                    if np == 0 {
                        list[i]["nodePort"] = json!(shared);
                    } else {
                        self.request_port(np).map_err(|why| {
                            self.invalid(format!("spec.ports[{i}].nodePort"), &np.to_string(), why)
                        })?;
                    }
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// `allocHealthCheckNodePort`.
    fn health_check_port(&mut self, obj: &mut Value) -> Result<(), ApiError> {
        let requested = health_port(obj);
        if requested != 0 {
            return self.request_port(requested).map_err(|why| {
                ApiError::internal_cause(format!(
                    "failed to allocate requested HealthCheck NodePort {requested}: {why}"
                ))
            });
        }
        let n = self.next_port().ok_or_else(|| {
            ApiError::internal_cause("failed to allocate a HealthCheck NodePort 0: range is full")
        })?;
        obj["spec"]["healthCheckNodePort"] = json!(n);
        Ok(())
    }

    /// `updateNodePorts`: ports the update adds are allocated; the old ones it keeps are
    /// the Service's already.
    fn update_node_ports(&mut self, old: &Value, obj: &mut Value) -> Result<(), ApiError> {
        let old_ports = node_ports_of(old);
        let allocate = allocates_node_ports(obj);
        let Some(list) = obj.pointer_mut("/spec/ports").and_then(Value::as_array_mut) else {
            return Ok(());
        };
        let mut done: HashSet<u32> = HashSet::new();
        for (i, p) in list.iter_mut().enumerate() {
            let np = node_port(p);
            if np == 0 && !allocate {
                continue;
            }
            if np != 0 {
                if !old_ports.contains(&np) && !done.contains(&np) {
                    self.request_port(np).map_err(|why| {
                        self.invalid(format!("spec.ports[{i}].nodePort"), &np.to_string(), why)
                    })?;
                    done.insert(np);
                }
            } else {
                let n = self.next_port().ok_or_else(|| {
                    ApiError::internal_cause("failed to allocate a nodePort: range is full")
                })?;
                p["nodePort"] = json!(n);
            }
        }
        Ok(())
    }
}

impl ServiceAllocator {
    /// Starts an allocation for the Service `own` (namespace, name; None for a create):
    /// the values every other stored Service holds, and those of writes in flight.
    fn begin<'a>(
        &'a self,
        storage: &Storage,
        own: Option<(&str, &str)>,
    ) -> (std::sync::MutexGuard<'a, Taken>, Taken) {
        let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let mut used = Taken {
            ips: pending.ips.clone(),
            ports: pending.ports.clone(),
        };
        for svc in storage.list("/services", None).0 {
            let id = (
                crate::registry::meta::meta_str(&svc, "namespace").unwrap_or(""),
                crate::registry::meta::meta_str(&svc, "name").unwrap_or(""),
            );
            if Some(id) == own {
                continue;
            }
            used.ips.extend(cluster_ips_of(&svc));
            used.ports.extend(node_ports_of(&svc));
        }
        (pending, used)
    }

    /// The allocations of a Service create (kube-apiserver's `allocateCreate`), into
    /// `obj`. Other kinds pass through.
    pub(crate) fn create(
        &self,
        storage: &Storage,
        def: &ResourceDef,
        name: &str,
        obj: &mut Value,
        dry_run: bool,
    ) -> Result<Reservation<'_>, ApiError> {
        if !is_services(def) {
            return Ok(self.reservation(Vec::new(), Vec::new()));
        }
        let (pending, mut used) = self.begin(storage, None);
        let mut op = Op::new(&mut used, name, def, dry_run);
        if needs_cluster_ip(obj) {
            op.cluster_ip(obj)?;
        }
        if has_node_ports(obj) {
            op.init_node_ports(obj)?;
        }
        if needs_health_check(obj) {
            op.health_check_port(obj)?;
        }
        Ok(self.hold(pending, op))
    }

    /// The allocations of a Service update (`allocateUpdate`), into `new`: a cluster IP
    /// when the type comes to need one, node ports for ports that lack them, a health
    /// check port when newly needed. What the update gives up is free once it is stored.
    pub(crate) fn update(
        &self,
        storage: &Storage,
        def: &ResourceDef,
        (ns, name): (&str, &str),
        old: &Value,
        new: &mut Value,
        dry_run: bool,
    ) -> Result<Reservation<'_>, ApiError> {
        if !is_services(def) {
            return Ok(self.reservation(Vec::new(), Vec::new()));
        }
        let (pending, mut used) = self.begin(storage, Some((ns, name)));
        let mut op = Op::new(&mut used, name, def, dry_run);
        if !needs_cluster_ip(old) && needs_cluster_ip(new) {
            op.cluster_ip(new)?;
        }
        if has_node_ports(new) {
            op.update_node_ports(old, new)?;
        }
        if !needs_health_check(old) && needs_health_check(new) {
            op.health_check_port(new)?;
        }
        Ok(self.hold(pending, op))
    }

    /// What `op` took, held for the write (nothing for a dry run).
    fn hold<'a>(
        &'a self,
        mut pending: std::sync::MutexGuard<'a, Taken>,
        op: Op<'_>,
    ) -> Reservation<'a> {
        if op.dry_run {
            return self.reservation(Vec::new(), Vec::new());
        }
        pending.ips.extend(op.ips.iter().copied());
        pending.ports.extend(op.ports.iter().copied());
        self.reservation(op.ips, op.ports)
    }

    fn reservation(&self, ips: Vec<u32>, ports: Vec<u32>) -> Reservation<'_> {
        Reservation {
            alloc: self,
            ips,
            ports,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pick_prefers_the_upper_band_and_fills_the_range() {
        let mut taken = HashSet::new();
        // The first 2,768 - 86 picks come from above the static band.
        let band = port_band();
        assert_eq!(band, 86);
        for _ in 0..(2_768 - band) {
            let n = pick(30_000, 32_767, band, |v| taken.contains(&v)).unwrap();
            assert!(n >= 30_000 + band, "{n} is in the static band");
            assert!(taken.insert(n));
        }
        for _ in 0..band {
            let n = pick(30_000, 32_767, band, |v| taken.contains(&v)).unwrap();
            assert!((30_000..30_000 + band).contains(&n));
            assert!(taken.insert(n));
        }
        assert_eq!(pick(30_000, 32_767, band, |v| taken.contains(&v)), None);
    }

    #[test]
    fn the_first_service_ip_is_in_the_cidr() {
        assert_eq!(first_service_ip(), Ipv4Addr::new(10, 0, 0, 1));
    }
}
