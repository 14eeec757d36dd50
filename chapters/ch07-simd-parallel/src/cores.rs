//! How many threads to run by default: one per physical core.
//!
//! The products are bound by memory bandwidth and by each core's SIMD units, and two
//! hyper-threads of one core share both: a second thread on the same core adds contention,
//! not speed. So the default is the number of distinct physical cores, read from Linux's
//! CPU topology; elsewhere, or when it cannot be read, the logical CPUs that `std` reports.

use std::collections::BTreeSet;

/// Physical cores among the machine's online CPUs, capped at the logical CPUs this process
/// may use (at least 1).
pub fn physical_cores() -> usize {
    let logical = std::thread::available_parallelism().map_or(1, |n| n.get());
    linux_cores().map_or(logical, |n| n.clamp(1, logical))
}

/// Distinct (package, core) pairs of the online CPUs in `/sys`; `None` where there is no
/// such topology to read.
fn linux_cores() -> Option<usize> {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?;
    let mut cores = BTreeSet::new();
    for cpu in cpu_list(online.trim())? {
        let dir = format!("/sys/devices/system/cpu/cpu{cpu}/topology");
        let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).ok();
        let core = read("core_id")?.trim().to_string();
        let package = read("physical_package_id")?.trim().to_string();
        cores.insert((package, core));
    }
    (!cores.is_empty()).then_some(cores.len())
}

/// `0-3,8,10-11` → its numbers; `None` if malformed or implausibly large (a range is
/// capped at 65 536 CPUs, so a corrupt file cannot size a loop).
fn cpu_list(list: &str) -> Option<Vec<usize>> {
    const MAX_CPUS: usize = 1 << 16;
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
            None => {
                let n: usize = part.parse().ok()?;
                (n, n)
            }
        };
        if a > b || b >= MAX_CPUS || cpus.len() + (b - a) >= MAX_CPUS {
            return None;
        }
        cpus.extend(a..=b);
    }
    Some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_as_linux_writes_them() {
        assert_eq!(cpu_list("0"), Some(vec![0]));
        assert_eq!(cpu_list("0-3,8,10-11"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(cpu_list("3-1"), None);
        assert_eq!(cpu_list("0-99999999"), None);
        assert_eq!(cpu_list("x"), None);
    }

    #[test]
    fn at_least_one_core_and_no_more_than_the_logical_cpus() {
        let n = physical_cores();
        let logical = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert!(
            (1..=logical).contains(&n),
            "{n} physical cores of {logical}"
        );
    }
}
