//! Name rules: default plurals and compile-time checks of names, versions and paths.

/// The default plural of a kind: lowercased, then English rules (`policy` -> `policies`,
/// `ingress` -> `ingresses`, `box` -> `boxes`, `monitor` -> `monitors`).
pub(crate) fn plural_of(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if lower.ends_with('s')
        || lower.ends_with('x')
        || lower.ends_with('z')
        || lower.ends_with("ch")
        || lower.ends_with("sh")
    {
        return format!("{lower}es");
    }
    if let Some(stem) = lower.strip_suffix('y')
        && !stem.is_empty()
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        return format!("{stem}ies");
    }
    format!("{lower}s")
}

/// A DNS subdomain (RFC 1123), as API groups must be.
pub(crate) fn check_group(group: &str) -> Result<(), String> {
    if group.is_empty() {
        return Err(
            "the group must not be empty (custom resources cannot use the core group)".into(),
        );
    }
    if group.len() > 253 {
        return Err("the group must be at most 253 characters".into());
    }
    for label in group.split('.') {
        check_label(label).map_err(|e| format!("invalid group `{group}`: {e}"))?;
    }
    Ok(())
}

/// A DNS label (RFC 1123): plurals, singulars, short names and categories.
pub(crate) fn check_label(label: &str) -> Result<(), String> {
    if label.is_empty() || label.len() > 63 {
        return Err(format!("`{label}` must be 1 to 63 characters"));
    }
    let ok_chars = label
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let ok_ends = label.as_bytes()[0].is_ascii_alphanumeric()
        && label.as_bytes()[label.len() - 1].is_ascii_alphanumeric();
    if ok_chars && ok_ends {
        Ok(())
    } else {
        Err(format!(
            "`{label}` must consist of lower case alphanumeric characters or '-', and start and end with an alphanumeric character"
        ))
    }
}

/// A Kubernetes API version: `v<N>`, optionally followed by `alpha<N>` or `beta<N>`.
pub(crate) fn check_version(version: &str) -> Result<(), String> {
    let err = || {
        format!(
            "invalid version `{version}`: expected `v<N>`, `v<N>alpha<M>` or `v<N>beta<M>` (e.g. `v1`, `v2beta1`)"
        )
    };
    let rest = version.strip_prefix('v').ok_or_else(err)?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || rest.starts_with('0') {
        return Err(err());
    }
    let rest = &rest[digits..];
    if rest.is_empty() {
        return Ok(());
    }
    let tail = rest
        .strip_prefix("alpha")
        .or_else(|| rest.strip_prefix("beta"))
        .ok_or_else(err)?;
    if !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()) && !tail.starts_with('0') {
        Ok(())
    } else {
        Err(err())
    }
}

/// A simple JSON path as CRDs use (`.spec.replicas`), optionally under a required prefix.
pub(crate) fn check_json_path(path: &str, prefix: Option<&str>) -> Result<(), String> {
    if !path.starts_with('.') || path.len() < 2 {
        return Err(format!(
            "`{path}` is not a JSON path: it must start with `.` (e.g. `.spec.replicas`)"
        ));
    }
    if let Some(prefix) = prefix
        && !path.starts_with(prefix)
    {
        return Err(format!("`{path}` must start with `{prefix}`"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals() {
        assert_eq!(plural_of("Monitor"), "monitors");
        assert_eq!(plural_of("NetworkPolicy"), "networkpolicies");
        assert_eq!(plural_of("Ingress"), "ingresses");
        assert_eq!(plural_of("Box"), "boxes");
        assert_eq!(plural_of("Patch"), "patches");
        assert_eq!(plural_of("Gateway"), "gateways");
    }

    #[test]
    fn versions() {
        for ok in ["v1", "v12", "v1beta1", "v2alpha3"] {
            assert!(check_version(ok).is_ok(), "{ok}");
        }
        for bad in [
            "1", "v", "v0", "v01", "v1gamma1", "v1beta", "v1beta01", "V1",
        ] {
            assert!(check_version(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn groups() {
        assert!(check_group("example.com").is_ok());
        assert!(check_group("a-b.example.com").is_ok());
        assert!(check_group("").is_err());
        assert!(check_group("Example.com").is_err());
        assert!(check_group("example..com").is_err());
        assert!(check_group("-x.com").is_err());
    }

    #[test]
    fn json_paths() {
        assert!(check_json_path(".spec.replicas", Some(".spec.")).is_ok());
        assert!(check_json_path("spec.replicas", None).is_err());
        assert!(check_json_path(".status.replicas", Some(".spec.")).is_err());
    }
}
