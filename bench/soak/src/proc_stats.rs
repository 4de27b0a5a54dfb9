//! The process's own resources, from `/proc/self`.

/// What `/proc/self/status` says about memory and threads.
#[derive(Default)]
pub(crate) struct Status {
    /// `VmRSS`, KiB.
    pub(crate) rss_kib: Option<u64>,
    /// `Threads`.
    pub(crate) threads: Option<u64>,
}

/// Reads `/proc/self/status`; fields it lacks (not Linux) are `None`.
pub(crate) fn status() -> Status {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| parse_status(&s))
        .unwrap_or_default()
}

fn parse_status(text: &str) -> Status {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse().ok())
    };
    Status {
        rss_kib: field("VmRSS:"),
        threads: field("Threads:"),
    }
}

/// Open file descriptors: the entries of `/proc/self/fd` (the directory handle used to
/// read it included, as with `ls`).
pub(crate) fn open_fds() -> Option<usize> {
    std::fs::read_dir("/proc/self/fd").ok().map(Iterator::count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_are_read_in_kib_and_counts() {
        let s = parse_status("Name:\tx\nVmHWM:\t  9000 kB\nVmRSS:\t  8123 kB\nThreads:\t7\n");
        assert_eq!(s.rss_kib, Some(8123));
        assert_eq!(s.threads, Some(7));
        let empty = parse_status("");
        assert_eq!(empty.rss_kib, None);
    }

    #[test]
    fn this_process_has_open_fds_and_a_resident_set() {
        assert!(open_fds().is_some_and(|n| n >= 3));
        assert!(status().rss_kib.is_some_and(|kib| kib > 0));
    }
}
