//! The file descriptors a server needs: one for each client connection, about
//! one more for its upstream, and a few of its own — within the process's
//! limit on open files, so that a full house of connections never leaves it
//! unable to accept, connect upstream or open a file.

/// Descriptors kept for the process's own use (its listener, logs, MCP
/// servers, the demo's files).
const RESERVE: u64 = 64;

/// `wanted` connections, or as many as the limit on open files allows (its
/// soft limit raised to what they need first, up to the hard limit), each
/// counted twice (its client, its upstream); a warning when fewer.
pub fn connections_within_limit(wanted: usize) -> usize {
    let need = (wanted as u64).saturating_mul(2).saturating_add(RESERVE);
    let Some(limit) = open_files_limit(need) else {
        return wanted;
    };
    let fits = usize::try_from(limit.saturating_sub(RESERVE) / 2)
        .unwrap_or(usize::MAX)
        .max(1);
    if fits < wanted {
        tracing::warn!(
            "the limit on open files ({limit}) leaves room for {fits} connections, not the \
             {wanted} configured: at most {fits} are served at once (raise it with `ulimit -n`)"
        );
        return fits;
    }
    wanted
}

/// The soft limit on open files, raised towards `need` as far as the hard
/// limit allows; `None` where there is no such limit to read.
#[cfg(unix)]
#[allow(
    clippy::unnecessary_cast,
    reason = "rlim_t is u64 on Linux, but not on every unix"
)]
fn open_files_limit(need: u64) -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `getrlimit` writes the limit into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    let infinite = limit.rlim_cur == libc::RLIM_INFINITY;
    if infinite || limit.rlim_cur as u64 >= need {
        return Some(if infinite {
            u64::MAX
        } else {
            limit.rlim_cur as u64
        });
    }
    let raised = libc::rlimit {
        rlim_cur: if limit.rlim_max == libc::RLIM_INFINITY {
            need as libc::rlim_t
        } else {
            (limit.rlim_max as u64).min(need) as libc::rlim_t
        },
        rlim_max: limit.rlim_max,
    };
    // SAFETY: `setrlimit` reads the struct it is given.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
        return Some(raised.rlim_cur as u64);
    }
    Some(limit.rlim_cur as u64)
}

#[cfg(not(unix))]
fn open_files_limit(_need: u64) -> Option<u64> {
    None
}
