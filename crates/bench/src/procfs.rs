//! Memory and CPU of the current process, from `/proc/self`.

/// Resident set size now (`VmRSS`), bytes. 0 when unavailable (not Linux).
pub fn rss() -> u64 {
    status_kib("VmRSS:") * 1024
}

/// Peak resident set size (`VmHWM`), bytes.
pub fn peak_rss() -> u64 {
    status_kib("VmHWM:") * 1024
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// User + system CPU time consumed by this process so far, seconds (10 ms resolution).
pub fn cpu_seconds() -> f64 {
    // Fields after the command name (which may contain spaces): state is field 3, utime 14,
    // stime 15. USER_HZ is 100 on every Linux configuration that matters.
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 1..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            let utime: u64 = f.get(11)?.parse().ok()?;
            let stime: u64 = f.get(12)?.parse().ok()?;
            Some((utime + stime) as f64 / 100.0)
        })
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_own_process() {
        if cfg!(target_os = "linux") {
            assert!(super::rss() > 0);
            assert!(super::peak_rss() >= super::rss() / 2);
            assert!(super::cpu_seconds() >= 0.0);
        }
    }
}
