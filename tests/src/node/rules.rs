//! kube-proxy's rules in the node's nat table: read, and flushed as a node that lost them.

use anyhow::Result;

use super::Node;

/// kube-proxy's own chains in the nat table (kubelet's KUBE-MARK-* and the shared
/// KUBE-POSTROUTING are left out: kubelet keeps them whatever kube-proxy does).
const PROXY_CHAINS: &[&str] = &["KUBE-SERVICES", "KUBE-SVC-", "KUBE-SEP-", "KUBE-NODEPORTS"];

impl Node {
    /// kube-proxy's rules: the nat table's lines that jump to, or are in, its service and
    /// endpoint chains, counters left out, sorted.
    pub fn proxy_rules(&self) -> Result<Vec<String>> {
        let table = self.run("iptables-save", &["-t", "nat"])?;
        let mut rules: Vec<String> = table
            .lines()
            .filter(|line| PROXY_CHAINS.iter().any(|chain| line.contains(chain)))
            .map(|line| match line.split_once(" [") {
                Some((chain, _counters)) if line.starts_with(':') => chain.to_owned(),
                _ => line.to_owned(),
            })
            .collect();
        rules.sort();
        Ok(rules)
    }

    /// Flushes and deletes kube-proxy's service and endpoint chains (as a node that lost
    /// them would be).
    pub fn flush_proxy_rules(&self) -> Result<()> {
        let table = self.run("iptables-save", &["-t", "nat"])?;
        let chains: Vec<&str> = table
            .lines()
            .filter_map(|line| line.strip_prefix(':')?.split(' ').next())
            .filter(|chain| PROXY_CHAINS.iter().any(|c| chain.starts_with(c)))
            .collect();
        // With --noflush, declaring a chain flushes it alone; then the per-service chains go.
        let mut script = String::from("*nat\n");
        for chain in &chains {
            script.push_str(&format!(":{chain} - [0:0]\n"));
        }
        for chain in chains
            .iter()
            .filter(|c| c.starts_with("KUBE-SVC-") || c.starts_with("KUBE-SEP-"))
        {
            script.push_str(&format!("-X {chain}\n"));
        }
        script.push_str("COMMIT\n");
        let path = self.dir.join("flush.rules");
        std::fs::write(&path, script)?;
        self.run(
            "iptables-restore",
            &["--noflush", &path.display().to_string()],
        )?;
        Ok(())
    }
}
