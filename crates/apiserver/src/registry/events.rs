//! Event validation as kube-apiserver's `ValidateEventCreate`/`ValidateEventUpdate`: the
//! legacy checks every Event passes, and the strict ones of the `events.k8s.io` API. The
//! field paths are those of the internal (core) type whichever API the Event came
//! through: `involvedObject`, not `regarding`.

use crate::registry::ResourceDef;
use kubewright_core::StatusCause;
use serde_json::Value;

const REPORTING_INSTANCE_MAX: usize = 128;
const ACTION_MAX: usize = 128;
const REASON_MAX: usize = 128;
const NOTE_MAX: usize = 1024;

/// An invalid string value, quoted as Go's `%q` quotes it.
fn invalid(field: &str, value: &str, message: &str) -> StatusCause {
    crate::error::invalid_cause(field, &crate::error::go_quote(value), message)
}

/// Appends the field errors of an Event (`obj` in its API's form, `def` its API; `old`
/// the Event an update replaces): the legacy checks always; through `events.k8s.io`, the
/// strict ones on a create and, on an update, the fields that may not change.
pub(crate) fn validate(
    def: &ResourceDef,
    obj: &Value,
    old: Option<&Value>,
    causes: &mut Vec<StatusCause>,
) {
    let v1 = def.group == "events.k8s.io";
    // The API's names for the internal type's fields.
    let (involved, message, source, first, last, count, controller) = if v1 {
        (
            "regarding",
            "note",
            "deprecatedSource",
            "deprecatedFirstTimestamp",
            "deprecatedLastTimestamp",
            "deprecatedCount",
            "reportingController",
        )
    } else {
        (
            "involvedObject",
            "message",
            "source",
            "firstTimestamp",
            "lastTimestamp",
            "count",
            "reportingComponent",
        )
    };
    let text = |f: &str| obj.get(f).and_then(Value::as_str).unwrap_or("");
    let set = |f: &str| obj.get(f).is_some_and(|v| !v.is_null());
    let namespace = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let involved_ns = obj
        .get(involved)
        .and_then(|o| o.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let event_time = set("eventTime");
    // Legacy checks (every Event). The controller's field is named as the request's API
    // names it.
    if !event_time {
        let mismatch = if involved_ns.is_empty() {
            !namespace.is_empty() && namespace != "default"
        } else {
            namespace != involved_ns
        };
        if mismatch {
            causes.push(invalid(
                "involvedObject.namespace",
                involved_ns,
                "does not match event.namespace",
            ));
        }
    } else {
        if involved_ns.is_empty() && namespace != "default" && namespace != "kube-system" {
            causes.push(invalid(
                "involvedObject.namespace",
                involved_ns,
                "does not match event.namespace",
            ));
        }
        let rc = text(controller);
        if rc.is_empty() {
            causes.push(crate::error::required_cause(controller));
        }
        for msg in crate::error::qualified_name_errors(rc) {
            causes.push(invalid(controller, rc, &msg));
        }
        let ri = text("reportingInstance");
        if ri.is_empty() {
            causes.push(crate::error::required_cause("reportingInstance"));
        }
        if ri.len() > REPORTING_INSTANCE_MAX {
            causes.push(invalid(
                "reportingInstance",
                "",
                &format!("can have at most {REPORTING_INSTANCE_MAX} characters"),
            ));
        }
        for (f, max) in [("action", ACTION_MAX), ("reason", REASON_MAX)] {
            let t = text(f);
            if t.is_empty() {
                causes.push(crate::error::required_cause(f));
            }
            if t.len() > max {
                causes.push(invalid(
                    f,
                    "",
                    &format!("can have at most {max} characters"),
                ));
            }
        }
        if text(message).len() > NOTE_MAX {
            causes.push(invalid(
                "message",
                "",
                &format!("can have at most {NOTE_MAX} characters"),
            ));
        }
    }
    if !v1 {
        return;
    }
    if let Some(old) = old {
        // An update through events.k8s.io: a changed series is checked, and what the
        // Event reports may not change (upstream checks `reason` twice).
        if obj.get("series") != old.get("series") {
            series(obj, causes);
        }
        let frozen = [
            ("involvedObject", involved),
            ("reason", "reason"),
            ("message", message),
            ("source", source),
            ("firstTimestamp", first),
            ("lastTimestamp", last),
            ("count", count),
            ("reason", "reason"),
            ("type", "type"),
            ("eventTime", "eventTime"),
            ("action", "action"),
            ("related", "related"),
            ("reportingController", controller),
            ("reportingInstance", "reportingInstance"),
        ];
        for (path, f) in frozen {
            let (new, was) = (obj.get(f), old.get(f));
            let unset = |v: Option<&Value>| v.is_none_or(Value::is_null);
            if new != was && !(unset(new) && unset(was)) {
                causes.push(crate::error::invalid_cause(
                    path,
                    &crate::registry::immutable::go_value(new),
                    "field is immutable",
                ));
            }
        }
        return;
    }
    // Strict checks of events.k8s.io.
    series(obj, causes);
    if !event_time {
        causes.push(crate::error::required_cause("eventTime"));
    }
    let ty = text("type");
    if ty != "Normal" && ty != "Warning" {
        causes.push(invalid("type", "", &format!("has invalid value: {ty}")));
    }
    if set(first) {
        causes.push(invalid("firstTimestamp", "", "needs to be unset"));
    }
    if set(last) {
        causes.push(invalid("lastTimestamp", "", "needs to be unset"));
    }
    if obj.get(count).and_then(Value::as_i64).unwrap_or(0) != 0 {
        causes.push(invalid("count", "", "needs to be unset"));
    }
    let src = obj.get(source);
    let src_text = |f: &str| {
        src.and_then(|s| s.get(f))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    if !src_text("component").is_empty() || !src_text("host").is_empty() {
        causes.push(invalid("source", "", "needs to be unset"));
    }
}

/// An Event's series, as upstream's `validateV1EventSeries` checks it.
fn series(obj: &Value, causes: &mut Vec<StatusCause>) {
    let Some(series) = obj.get("series").filter(|s| !s.is_null()) else {
        return;
    };
    if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
        causes.push(invalid("series.count", "", "should be at least 2"));
    }
    if series.get("lastObservedTime").is_none_or(Value::is_null) {
        causes.push(crate::error::required_cause("series.lastObservedTime"));
    }
}

/// The resource an Event's validation errors name: the core one, whichever API the Event
/// came through (`Event "e"`, not `Event.events.k8s.io "e"`).
pub(crate) fn error_def(def: &ResourceDef) -> std::borrow::Cow<'_, ResourceDef> {
    if def.group == "events.k8s.io" && def.kind == "Event" {
        let mut core = def.clone();
        core.group = String::new();
        std::borrow::Cow::Owned(core)
    } else {
        std::borrow::Cow::Borrowed(def)
    }
}
