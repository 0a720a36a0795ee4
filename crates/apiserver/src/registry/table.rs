//! `meta.k8s.io/v1 Table` rendering for `kubectl get`.

use crate::error::ApiError;
use crate::registry::ResourceDef;
use serde_json::{Value, json};
use std::sync::Arc;

struct Col {
    name: &'static str,
    ty: &'static str,
    format: &'static str,
    priority: i64,
    description: &'static str,
}

const fn col(
    name: &'static str,
    ty: &'static str,
    priority: i64,
    description: &'static str,
) -> Col {
    Col {
        name,
        ty,
        format: "",
        priority,
        description,
    }
}

/// `ObjectMeta.name`'s description, which every table's Name column carries.
pub const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
/// `ObjectMeta.creationTimestamp`'s description (Age and Created At columns).
pub const CREATED_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const NODE_ADDRESSES_DESC: &str = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).";

/// Whether kube-apiserver has a table printer for the kind (others get its default
/// table: Name and Created At).
fn has_printer(def: &ResourceDef) -> bool {
    !matches!(
        (def.group.as_str(), def.plural.as_str()),
        ("apiextensions.k8s.io", _)
            | ("rbac.authorization.k8s.io", _)
            | ("apiregistration.k8s.io", _)
            | ("admissionregistration.k8s.io", _)
            | ("node.k8s.io", _)
            | ("flowcontrol.apiserver.k8s.io", _)
    )
}

/// The columns kube-apiserver's printers give a kind (names, types and descriptions as a
/// v1.36 kube-apiserver reports them).
fn columns(def: &ResourceDef) -> Vec<Col> {
    let name = Col {
        name: "Name",
        ty: "string",
        format: "name",
        priority: 0,
        description: NAME_DESC,
    };
    let age = col("Age", "string", 0, CREATED_DESC);
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "pods") => vec![
            name,
            col(
                "Ready",
                "string",
                0,
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            col(
                "Status",
                "string",
                0,
                "The aggregate status of the containers in this pod.",
            ),
            col(
                "Restarts",
                "string",
                0,
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            ),
            age,
            col(
                "IP",
                "string",
                1,
                "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
            ),
            col(
                "Node",
                "string",
                1,
                "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
            ),
            col(
                "Nominated Node",
                "string",
                1,
                "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.",
            ),
            col(
                "Readiness Gates",
                "string",
                1,
                "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
            ),
        ],
        ("apps", "deployments") => vec![
            name,
            col("Ready", "string", 0, "Number of the pod with ready state"),
            col(
                "Up-to-date",
                "string",
                0,
                "Total number of non-terminating pods targeted by this deployment that have the desired template spec.",
            ),
            col(
                "Available",
                "string",
                0,
                "Total number of available non-terminating pods (ready for at least minReadySeconds) targeted by this deployment.",
            ),
            age,
            col(
                "Containers",
                "string",
                1,
                "Names of each container in the template.",
            ),
            col(
                "Images",
                "string",
                1,
                "Images referenced by each container in the template.",
            ),
            col(
                "Selector",
                "string",
                1,
                "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment. It must match the pod template's labels.",
            ),
        ],
        ("", "services") => vec![
            name,
            col(
                "Type",
                "string",
                0,
                "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. \"LoadBalancer\" builds on NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same endpoints as the clusterIP. \"ExternalName\" aliases this service to the specified externalName. Several other fields do not apply to ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types",
            ),
            col(
                "Cluster-IP",
                "string",
                0,
                "clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; otherwise creation of the service will fail. This field may not be changed through updates unless the type field is also being changed to ExternalName (which requires this field to be blank) or the type field is being changed from ExternalName (in which case this field may optionally be specified, as describe above).  Valid values are \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" makes a \"headless service\" (no virtual IP), which is useful when direct endpoint connections are preferred and proxying is not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a Service of type ExternalName, creation will fail. This field will be wiped when updating a Service to type ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
            ),
            col(
                "External-IP",
                "string",
                0,
                "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes system.",
            ),
            col(
                "Port(s)",
                "string",
                0,
                "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
            ),
            age,
            col(
                "Selector",
                "string",
                1,
                "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/",
            ),
        ],
        ("", "endpoints") => vec![
            name,
            col(
                "Endpoints",
                "string",
                0,
                "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service.",
            ),
            age,
        ],
        ("discovery.k8s.io", "endpointslices") => vec![
            name,
            col(
                "AddressType",
                "string",
                0,
                "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name. (Deprecated) The EndpointSlice controller only generates, and kube-proxy only processes, slices of addressType \"IPv4\" and \"IPv6\". No semantics are defined for the \"FQDN\" type.",
            ),
            col(
                "Ports",
                "string",
                0,
                "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. Each slice may include a maximum of 100 ports. Services always have at least 1 port, so EndpointSlices generated by the EndpointSlice controller will likewise always have at least 1 port. EndpointSlices used for other purposes may have an empty ports list.",
            ),
            col(
                "Endpoints",
                "string",
                0,
                "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints.",
            ),
            age,
        ],
        ("", "nodes") => vec![
            name,
            col("Status", "string", 0, "The status of the node"),
            col("Roles", "string", 0, "The roles of the node"),
            age,
            col(
                "Version",
                "string",
                0,
                "Kubelet Version reported by the node.",
            ),
            col("Internal-IP", "string", 1, NODE_ADDRESSES_DESC),
            col("External-IP", "string", 1, NODE_ADDRESSES_DESC),
            col(
                "OS-Image",
                "string",
                1,
                "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
            ),
            col(
                "Kernel-Version",
                "string",
                1,
                "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
            ),
            col(
                "Container-Runtime",
                "string",
                1,
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
            ),
        ],
        ("", "configmaps") => vec![
            name,
            col(
                "Data",
                "string",
                0,
                "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.",
            ),
            age,
        ],
        ("", "secrets") => vec![
            name,
            col(
                "Type",
                "string",
                0,
                "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types",
            ),
            col(
                "Data",
                "string",
                0,
                "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
            ),
            age,
        ],
        ("", "namespaces") => vec![
            name,
            col("Status", "string", 0, "The status of the namespace"),
            age,
        ],
        _ if has_printer(def) => vec![name, age],
        _ => vec![name, col("Created At", "date", 0, CREATED_DESC)],
    }
}

/// Human age like kubectl's (`5s`, `3m`, `2h`, `4d`).
pub fn age(ts: Option<&str>) -> String {
    let Some(ts) = ts.and_then(|t| t.parse::<jiff::Timestamp>().ok()) else {
        return "<unknown>".into();
    };
    let secs = jiff::Timestamp::now().duration_since(ts).as_secs().max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 3600 * 2 => format!("{}m", s / 60),
        s if s < 86400 * 2 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

fn s(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(v) => v.to_string(),
    }
}

fn cells(def: &ResourceDef, o: &Value) -> Vec<Value> {
    let name = json!(
        o.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
    );
    let age = json!(age(o
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)));
    let len = |p: &str| {
        o.pointer(p)
            .and_then(Value::as_object)
            .map_or(0, |m| m.len())
    };
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "pods") => {
            let total = o
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let statuses = o
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let ready = statuses
                .iter()
                .filter(|c| c.get("ready") == Some(&json!(true)))
                .count();
            let restarts: i64 = statuses
                .iter()
                .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
                .sum();
            let mut phase = s(o.pointer("/status/phase"));
            if o.pointer("/metadata/deletionTimestamp").is_some() {
                phase = "Terminating".into();
            }
            let none = |p: &str| {
                json!(
                    o.pointer(p)
                        .and_then(Value::as_str)
                        .filter(|s| !s.is_empty())
                        .unwrap_or("<none>")
                )
            };
            let gates = o
                .pointer("/spec/readinessGates")
                .and_then(Value::as_array)
                .filter(|g| !g.is_empty())
                .map(|g| {
                    let ready = g
                        .iter()
                        .filter(|gate| {
                            let t = gate.get("conditionType");
                            o.pointer("/status/conditions")
                                .and_then(Value::as_array)
                                .is_some_and(|cs| {
                                    cs.iter().any(|c| {
                                        c.get("type") == t
                                            && c.get("status") == Some(&json!("True"))
                                    })
                                })
                        })
                        .count();
                    format!("{ready}/{}", g.len())
                })
                .unwrap_or_else(|| "<none>".into());
            vec![
                name,
                json!(format!("{ready}/{total}")),
                json!(phase),
                json!(restarts.to_string()),
                age,
                none("/status/podIP"),
                none("/spec/nodeName"),
                none("/status/nominatedNodeName"),
                json!(gates),
            ]
        }
        ("apps", "deployments") => {
            let want = o
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            let ready = o
                .pointer("/status/readyReplicas")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let containers = o
                .pointer("/spec/template/spec/containers")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let names: Vec<String> = containers.iter().map(|c| s(c.get("name"))).collect();
            let images: Vec<String> = containers.iter().map(|c| s(c.get("image"))).collect();
            let selector = o
                .pointer("/spec/selector/matchLabels")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", s(Some(v))))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            vec![
                name,
                json!(format!("{ready}/{want}")),
                json!(
                    o.pointer("/status/updatedReplicas")
                        .and_then(Value::as_i64)
                        .unwrap_or(0)
                ),
                json!(
                    o.pointer("/status/availableReplicas")
                        .and_then(Value::as_i64)
                        .unwrap_or(0)
                ),
                age,
                json!(names.join(",")),
                json!(images.join(",")),
                json!(selector),
            ]
        }
        ("", "endpoints") => vec![name, json!(endpoints_cell(o)), age],
        ("discovery.k8s.io", "endpointslices") => {
            let items = |p: &str| {
                o.pointer(p)
                    .and_then(Value::as_array)
                    .map_or(&[][..], Vec::as_slice)
            };
            let ports: Vec<String> = items("/ports")
                .iter()
                .map(|p| {
                    match (
                        p.get("port").and_then(Value::as_i64),
                        p.get("name").and_then(Value::as_str),
                    ) {
                        (Some(n), _) => n.to_string(),
                        (None, Some(name)) => name.to_string(),
                        (None, None) => "*".to_string(),
                    }
                })
                .collect();
            let addresses: Vec<String> = items("/endpoints")
                .iter()
                .flat_map(|e| {
                    e.get("addresses")
                        .and_then(Value::as_array)
                        .map_or(&[][..], Vec::as_slice)
                })
                .map(|a| s(Some(a)))
                .collect();
            vec![
                name,
                json!(s(o.pointer("/addressType"))),
                json!(first_three(&ports)),
                json!(first_three(&addresses)),
                age,
            ]
        }
        ("", "services") => {
            let ports = o
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let ports: Vec<String> = ports
                .iter()
                .map(|p| {
                    format!(
                        "{}/{}",
                        s(p.get("port")),
                        p.get("protocol").and_then(Value::as_str).unwrap_or("TCP")
                    )
                })
                .collect();
            let selector = o
                .pointer("/spec/selector")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", s(Some(v))))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_else(|| "<none>".into());
            vec![
                name,
                json!(s(o.pointer("/spec/type"))),
                json!(
                    o.pointer("/spec/clusterIP")
                        .and_then(Value::as_str)
                        .unwrap_or("<none>")
                ),
                json!("<none>"),
                json!(if ports.is_empty() {
                    "<none>".to_string()
                } else {
                    ports.join(",")
                }),
                age,
                json!(selector),
            ]
        }
        ("", "nodes") => {
            let ready = o
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|c| c.iter().find(|c| c.get("type") == Some(&json!("Ready"))))
                .map(|c| {
                    if c.get("status") == Some(&json!("True")) {
                        "Ready"
                    } else {
                        "NotReady"
                    }
                })
                .unwrap_or("Unknown");
            let address = |ty: &str| {
                o.pointer("/status/addresses")
                    .and_then(Value::as_array)
                    .and_then(|a| a.iter().find(|x| x.get("type") == Some(&json!(ty))))
                    .and_then(|x| x.get("address"))
                    .and_then(Value::as_str)
                    .unwrap_or("<none>")
                    .to_string()
            };
            let info = |f: &str| {
                o.pointer(&format!("/status/nodeInfo/{f}"))
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .unwrap_or("<unknown>")
                    .to_string()
            };
            let mut roles: Vec<String> = o
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .map(|l| {
                    l.keys()
                        .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                        .filter(|r| !r.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            roles.sort();
            let mut status = ready.to_string();
            if o.pointer("/spec/unschedulable") == Some(&json!(true)) {
                status.push_str(",SchedulingDisabled");
            }
            vec![
                name,
                json!(status),
                json!(if roles.is_empty() {
                    "<none>".to_string()
                } else {
                    roles.join(",")
                }),
                age,
                json!(s(o.pointer("/status/nodeInfo/kubeletVersion"))),
                json!(address("InternalIP")),
                json!(address("ExternalIP")),
                json!(info("osImage")),
                json!(info("kernelVersion")),
                json!(info("containerRuntimeVersion")),
            ]
        }
        ("", "configmaps") => vec![name, json!(len("/data") + len("/binaryData")), age],
        ("", "secrets") => vec![name, json!(s(o.pointer("/type"))), json!(len("/data")), age],
        ("", "namespaces") => vec![name, json!(s(o.pointer("/status/phase"))), age],
        _ if has_printer(def) => vec![name, age],
        _ => vec![
            name,
            o.pointer("/metadata/creationTimestamp")
                .cloned()
                .unwrap_or(Value::Null),
        ],
    }
}

/// Builds a Table of `objs`. `with_columns: Some(false)` omits the column definitions
/// (watch events after the first); `include_object` is the request's `includeObject`.
pub fn table(
    def: &ResourceDef,
    objs: &[Arc<Value>],
    include_object: Option<&str>,
    list_meta: Option<Value>,
    with_columns: Option<bool>,
) -> Result<Value, ApiError> {
    let include = include_object.unwrap_or("Metadata");
    if !matches!(include, "None" | "Metadata" | "Object" | "") {
        return Err(ApiError::bad_request(format!(
            "Unable to convert to Table as requested: includeObject: Unsupported value: \"{include}\": supported values: \"None\", \"Metadata\", \"Object\""
        )));
    }
    let (cols_json, rows): (Vec<Value>, Vec<Value>) = if let Some(crd) = &def.crd {
        let cols = crd.printer_columns(&def.version);
        let mut defs = vec![
            json!({"name": "Name", "type": "string", "format": "name", "description": NAME_DESC, "priority": 0}),
        ];
        defs.extend(cols.iter().map(|c| {
            let description = if c.description.is_empty() {
                format!("Custom resource definition column (in JSONPath format): {}", c.json_path)
            } else {
                c.description.clone()
            };
            json!({"name": c.name, "type": c.ty, "format": c.format, "description": description, "priority": c.priority})
        }));
        // Like kube-apiserver: an Age column only for versions without printer columns.
        let has_age = !cols.is_empty();
        if !has_age {
            defs.push(json!({"name": "Age", "type": "date", "format": "", "description": CREATED_DESC, "priority": 0}));
        }
        let rows = objs
            .iter()
            .map(|o| {
                let mut cells = vec![json!(
                    o.pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                )];
                for c in &cols {
                    let ptr = format!("/{}", c.json_path.trim_start_matches('.').replace('.', "/"));
                    let v = o.pointer(&ptr).cloned().unwrap_or(Value::Null);
                    cells.push(if c.ty == "date" && v.is_string() {
                        json!(age(v.as_str()))
                    } else {
                        v
                    });
                }
                if !has_age {
                    cells.push(json!(age(o
                        .pointer("/metadata/creationTimestamp")
                        .and_then(Value::as_str))));
                }
                row(cells, o, include)
            })
            .collect();
        (defs, rows)
    } else {
        let cols = columns(def);
        let defs = cols
            .iter()
            .map(|c| json!({"name": c.name, "type": c.ty, "format": c.format, "description": c.description, "priority": c.priority}))
            .collect();
        (
            defs,
            objs.iter()
                .map(|o| row(cells(def, o), o, include))
                .collect(),
        )
    };
    let mut t = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta.unwrap_or_else(|| json!({})),
        "rows": rows,
    });
    if with_columns != Some(false) {
        t["columnDefinitions"] = Value::Array(cols_json);
    }
    Ok(t)
}

/// The printers' list of at most three items: `a,b,c + 2 more...`, `<unset>` when empty.
fn first_three(items: &[String]) -> String {
    let shown = items.iter().take(3).cloned().collect::<Vec<_>>().join(",");
    if items.len() > 3 {
        format!("{shown} + {} more...", items.len() - 3)
    } else if shown.is_empty() {
        "<unset>".into()
    } else {
        shown
    }
}

/// An Endpoints object's `Endpoints` cell (`formatEndpoints`): up to three `ip:port`
/// pairs (addresses alone for a subset without ports), `+ N more...` for the rest,
/// `<none>` without subsets.
fn endpoints_cell(o: &Value) -> String {
    let subsets = o
        .get("subsets")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if subsets.is_empty() {
        return "<none>".into();
    }
    let mut list: Vec<String> = Vec::new();
    let mut count = 0;
    let mut more = false;
    for ss in subsets {
        let addrs: Vec<&str> = ss
            .get("addresses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|a| a.get("ip").and_then(Value::as_str).unwrap_or(""))
            .collect();
        let ports = ss
            .get("ports")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        let mut add = |entry: String| {
            if list.len() == 3 {
                more = true;
            } else {
                list.push(entry);
            }
        };
        if ports.is_empty() {
            count += addrs.len();
            for ip in &addrs {
                add(ip.to_string());
            }
            continue;
        }
        for port in ports {
            count += addrs.len();
            let n = port.get("port").and_then(Value::as_i64).unwrap_or(0);
            for ip in &addrs {
                // Go's net.JoinHostPort: an IPv6 address in brackets.
                add(if ip.contains(':') {
                    format!("[{ip}]:{n}")
                } else {
                    format!("{ip}:{n}")
                });
            }
        }
    }
    let shown = list.join(",");
    if more {
        format!("{shown} + {} more...", count - 3)
    } else {
        shown
    }
}

fn row(cells: Vec<Value>, o: &Value, include: &str) -> Value {
    let object = match include {
        "None" => Value::Null,
        "Object" => o.clone(),
        _ => crate::registry::meta::partial_meta(o),
    };
    let mut r = json!({"cells": cells});
    if !object.is_null() {
        r["object"] = object;
    }
    r
}
