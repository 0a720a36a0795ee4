//! Status conditions (`metav1.Condition` lists) as apimachinery's `meta` helpers keep
//! them (`SetStatusCondition`, `FindStatusCondition`, ...): one entry per `type`, and a
//! `lastTransitionTime` that moves only when the `status` changes.
//!
//! ```
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
//! use kubewright_core::conditions::{is_status_condition_true, new_condition, set_status_condition};
//!
//! let mut conditions: Vec<Condition> = Vec::new();
//! let ready = new_condition("Ready", true, "Synced", "the backup is scheduled");
//! assert!(set_status_condition(&mut conditions, ready.clone())); // added
//! assert!(!set_status_condition(&mut conditions, ready)); // nothing changed
//! assert!(is_status_condition_true(&conditions, "Ready"));
//! ```

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// A condition of `type_` with status `"True"` or `"False"`, `reason` (CamelCase) and
/// `message`, its `lastTransitionTime` now. Set `observed_generation` on the result to
/// the generation the controller acted on.
pub fn new_condition(type_: &str, status: bool, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: if status { "True" } else { "False" }.to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
        last_transition_time: Time(jiff::Timestamp::now()),
        observed_generation: None,
    }
}

/// Puts `new` into `conditions`, replacing the entry of its type: the
/// `lastTransitionTime` changes only when the status does (to `new`'s), while reason,
/// message and `observedGeneration` are always taken from `new`. Returns whether
/// anything changed, so a controller can skip a status write that would change nothing.
pub fn set_status_condition(conditions: &mut Vec<Condition>, new: Condition) -> bool {
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == new.type_) else {
        conditions.push(new);
        return true;
    };
    let mut changed = false;
    if existing.status != new.status {
        existing.status = new.status;
        existing.last_transition_time = new.last_transition_time;
        changed = true;
    }
    if existing.reason != new.reason {
        existing.reason = new.reason;
        changed = true;
    }
    if existing.message != new.message {
        existing.message = new.message;
        changed = true;
    }
    if existing.observed_generation != new.observed_generation {
        existing.observed_generation = new.observed_generation;
        changed = true;
    }
    changed
}

/// Removes the condition of `type_`; whether there was one.
pub fn remove_status_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// The condition of `type_`, if any.
pub fn find_status_condition<'a>(
    conditions: &'a [Condition],
    type_: &str,
) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of `type_` is there with status `"True"`.
pub fn is_status_condition_true(conditions: &[Condition], type_: &str) -> bool {
    find_status_condition(conditions, type_).is_some_and(|c| c.status == "True")
}

/// Whether the condition of `type_` is there with status `"False"`.
pub fn is_status_condition_false(conditions: &[Condition], type_: &str) -> bool {
    find_status_condition(conditions, type_).is_some_and(|c| c.status == "False")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_with_the_status() {
        let mut cs = Vec::new();
        let mut first = new_condition("Ready", false, "Pending", "waiting");
        first.last_transition_time = Time(jiff::Timestamp::UNIX_EPOCH);
        assert!(set_status_condition(&mut cs, first));
        // Same status, new reason: the transition time stays.
        let later = new_condition("Ready", false, "StillPending", "waiting more");
        assert!(set_status_condition(&mut cs, later));
        assert_eq!(cs[0].reason, "StillPending");
        assert_eq!(
            cs[0].last_transition_time,
            Time(jiff::Timestamp::UNIX_EPOCH)
        );
        // A new status moves it.
        let ready = new_condition("Ready", true, "Synced", "");
        let at = ready.last_transition_time.clone();
        assert!(set_status_condition(&mut cs, ready.clone()));
        assert_eq!(cs[0].last_transition_time, at);
        assert!(!set_status_condition(&mut cs, ready));
        assert!(is_status_condition_true(&cs, "Ready"));
        assert!(!is_status_condition_false(&cs, "Ready"));
        assert!(set_status_condition(
            &mut cs,
            new_condition("Degraded", false, "Fine", "")
        ));
        assert_eq!(cs.len(), 2);
        assert!(is_status_condition_false(&cs, "Degraded"));
        assert!(remove_status_condition(&mut cs, "Ready"));
        assert!(!remove_status_condition(&mut cs, "Ready"));
        assert!(find_status_condition(&cs, "Ready").is_none());
    }
}
