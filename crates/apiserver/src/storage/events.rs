//! The storage form of `events.k8s.io/v1` Events: kube-apiserver keeps every Event as a
//! core v1 Event, whichever API wrote it, and converts it for the other API (its storage
//! codec). Only field names differ between the two; each is written as Go writes it.

use serde_json::Value;

/// The core Event's fields that `events.k8s.io/v1` names differently (kube-apiserver's
/// conversion between the two; every other field has the same name and form).
const RENAMED: [(&str, &str); 7] = [
    ("involvedObject", "regarding"),
    ("source", "deprecatedSource"),
    ("message", "note"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
];

/// How Go writes one API's Event: the scalars it drops when zero, the fields it writes
/// as `null` or `""` when unset, and the structs it always writes (`{}` when empty).
struct GoShape {
    api_version: &'static str,
    zero_dropped: &'static [&'static str],
    unset: &'static [(&'static str, Value)],
    structs: &'static [&'static str],
}

static CORE: GoShape = GoShape {
    api_version: "v1",
    zero_dropped: &["action", "count", "message", "reason", "type"],
    unset: &[
        ("eventTime", Value::Null),
        ("firstTimestamp", Value::Null),
        ("lastTimestamp", Value::Null),
        ("reportingComponent", Value::String(String::new())),
        ("reportingInstance", Value::String(String::new())),
    ],
    structs: &["involvedObject", "source"],
};

static EVENTS_V1: GoShape = GoShape {
    api_version: "events.k8s.io/v1",
    zero_dropped: &[
        "action",
        "deprecatedCount",
        "note",
        "reason",
        "reportingController",
        "reportingInstance",
        "type",
    ],
    unset: &[
        ("deprecatedFirstTimestamp", Value::Null),
        ("deprecatedLastTimestamp", Value::Null),
        ("eventTime", Value::Null),
    ],
    structs: &["regarding", "deprecatedSource"],
};

/// `obj` with its fields renamed (`to_v1`: core to `events.k8s.io/v1`, else back) and
/// written as Go writes the target API's Event.
fn convert(obj: &Value, to_v1: bool, shape: &GoShape) -> Value {
    let Some(fields) = obj.as_object() else {
        return obj.clone();
    };
    let mut out = serde_json::Map::with_capacity(fields.len() + 2);
    for (k, v) in fields {
        let name = RENAMED
            .iter()
            .find_map(|&(core, v1)| match to_v1 {
                true if k == core => Some(v1),
                false if k == v1 => Some(core),
                _ => None,
            })
            .unwrap_or(k);
        out.insert(name.to_string(), v.clone());
    }
    out.insert("apiVersion".into(), Value::String(shape.api_version.into()));
    for f in shape.zero_dropped {
        let zero = match out.get(*f) {
            Some(Value::String(s)) => s.is_empty(),
            Some(Value::Number(n)) => n.as_i64() == Some(0),
            Some(Value::Null) => true,
            _ => false,
        };
        if zero {
            out.remove(*f);
        }
    }
    for (f, unset) in shape.unset {
        if !out.contains_key(*f) {
            out.insert((*f).to_string(), unset.clone());
        }
    }
    for f in shape.structs {
        if !out.contains_key(*f) {
            out.insert((*f).to_string(), Value::Object(Default::default()));
        }
    }
    Value::Object(out)
}

/// A stored (core v1) Event as `events.k8s.io/v1` serves it: kube-apiserver keeps one
/// object per Event, whichever API wrote it, and converts it for the other API.
pub fn to_events_v1(core: &Value) -> Value {
    convert(core, true, &EVENTS_V1)
}

/// An `events.k8s.io/v1` Event as it is stored (core v1).
pub fn to_core_v1(event: &Value) -> Value {
    convert(event, false, &CORE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_two_apis_name_the_same_fields() {
        let core = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "ns", "resourceVersion": "7"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "ns"},
            "reason": "Started", "message": "m", "type": "Normal", "count": 2,
            "firstTimestamp": "2026-12-03T14:00:00Z", "lastTimestamp": "2026-12-03T14:00:01Z",
            "source": {"component": "kubelet"}, "eventTime": null,
            "reportingComponent": "", "reportingInstance": ""
        });
        let v1 = to_events_v1(&core);
        assert_eq!(
            v1,
            json!({
                "apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": "e", "namespace": "ns", "resourceVersion": "7"},
                "regarding": {"kind": "Pod", "name": "p", "namespace": "ns"},
                "reason": "Started", "note": "m", "type": "Normal", "deprecatedCount": 2,
                "deprecatedFirstTimestamp": "2026-12-03T14:00:00Z",
                "deprecatedLastTimestamp": "2026-12-03T14:00:01Z",
                "deprecatedSource": {"component": "kubelet"}, "eventTime": null
            })
        );
        assert_eq!(to_core_v1(&v1), core);
    }

    #[test]
    fn an_events_v1_event_is_stored_as_go_writes_a_core_one() {
        let v1 = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "eventTime": "2026-12-03T14:00:00.000001Z", "reportingController": "x.io/c",
            "reportingInstance": "c-1", "action": "Sync", "reason": "Synced", "type": "Normal",
            "regarding": {"kind": "Pod", "name": "p"}, "note": "n",
            "series": {"count": 2, "lastObservedTime": "2026-12-03T14:00:01.000000Z"}
        });
        let core = to_core_v1(&v1);
        assert_eq!(core["involvedObject"], json!({"kind": "Pod", "name": "p"}));
        assert_eq!(core["message"], "n");
        assert_eq!(core["reportingComponent"], "x.io/c");
        assert_eq!(core["source"], json!({}));
        assert_eq!(core["firstTimestamp"], Value::Null);
        assert_eq!(core["series"]["count"], 2);
        assert!(core.get("count").is_none() && core.get("regarding").is_none());
        assert_eq!(
            to_events_v1(&core),
            v1.as_object()
                .map(|o| {
                    let mut o = o.clone();
                    o.insert("deprecatedSource".into(), json!({}));
                    o.insert("deprecatedFirstTimestamp".into(), Value::Null);
                    o.insert("deprecatedLastTimestamp".into(), Value::Null);
                    Value::Object(o)
                })
                .unwrap_or_default()
        );
    }
}
