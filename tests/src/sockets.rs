//! What a process holds open on the network, read from `/proc`: how many connections a
//! gateway keeps to its apiserver.

use std::collections::HashSet;

use anyhow::Result;

/// The established TCP connections process `pid` holds to port `port`.
pub fn connections_to(pid: u32, port: u16) -> Result<usize> {
    let inodes = socket_inodes(pid)?;
    let mut count = 0;
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}"))?;
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(remote), Some(state), Some(inode)) =
                (fields.get(2), fields.get(3), fields.get(9))
            else {
                continue;
            };
            let remote_port = remote
                .rsplit_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            // `01`: established.
            if remote_port == Some(port) && *state == "01" && inodes.contains(*inode) {
                count += 1;
            }
        }
    }
    Ok(count)
}

/// The inodes of the sockets among process `pid`'s open descriptors.
fn socket_inodes(pid: u32) -> Result<HashSet<String>> {
    let mut inodes = HashSet::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))? {
        // A descriptor closed between the listing and the read is no longer open.
        let Ok(target) = std::fs::read_link(entry?.path()) else {
            continue;
        };
        let target = target.to_string_lossy().into_owned();
        if let Some(inode) = target
            .strip_prefix("socket:[")
            .and_then(|rest| rest.strip_suffix(']'))
        {
            inodes.insert(inode.to_owned());
        }
    }
    Ok(inodes)
}
