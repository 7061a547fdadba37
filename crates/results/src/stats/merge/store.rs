//! What a merge of agents that drove one mail store (`mailbox pop3`, `imap`) checks and
//! keeps beyond the sums: that no two agents logged in as one user (their sessions
//! would have raced in one mailbox, and neither agent's counts nor state checks would be
//! its own), and the store's figures from the one agent that watched it.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::Input;

/// The network figures of a store report: counted at the watching agent's clients, so
/// only its share of the run's.
const CLIENT_COUNTED: [&str; 4] = [
    "net_in_bytes",
    "net_out_bytes",
    "net_in_bytes_per_s",
    "net_out_bytes_per_s",
];

/// A line naming two agents that logged in as the same user, or an agent that ran
/// unsplit beside others (it logged in as every user); `None` when every agent's users
/// (`shard.users`) are its own.
pub fn users_shared(agents: &[Value]) -> Option<String> {
    if agents.len() < 2 {
        return None;
    }
    let fix = "give every agent the same --users-file and its own --shard I/N";
    let mut owner: BTreeMap<&str, &str> = BTreeMap::new();
    let mut lists = Vec::new();
    for a in agents {
        let file = a["file"].as_str().unwrap_or("?");
        let Some(users) = a["shard"]["users"].as_array() else {
            return Some(format!(
                "{file} ran without --shard: it logged in as every user of the run, as the other agents did; {fix}"
            ));
        };
        lists.push((file, users));
    }
    for (file, users) in &lists {
        for u in users.iter().filter_map(Value::as_str) {
            let Some(other) = owner.insert(u, file) else {
                continue;
            };
            let theirs = lists
                .iter()
                .find(|(f, _)| f == &other)
                .map_or(&[][..], |(_, l)| l.as_slice());
            let common = users.iter().filter(|x| theirs.contains(x)).count();
            return Some(format!(
                "{other} and {file} both logged in as {u} ({common} user(s) in common): their sessions shared mailboxes, so neither agent's counts or state checks are its own; {fix}"
            ));
        }
    }
    None
}

/// The store's report (`extra.sut`) of the agent `w` that watched it, without the
/// network figures its clients counted (its share only; the run's are in the summed
/// counters), and what the merged file says of where it came from
/// (`extra.store_watched_by`).
pub fn watched(inputs: &[Input], w: usize, agents: &[Value]) -> (Value, Value) {
    let from = &inputs[w];
    let mut sut = from.results.extra.get("sut").cloned().unwrap_or_default();
    if let Some(m) = sut.as_object_mut() {
        for k in CLIENT_COUNTED {
            m.remove(k);
        }
    }
    let shard = agents
        .iter()
        .find(|a| a["file"].as_str() == Some(from.name.as_str()))
        .and_then(|a| a["shard"]["label"].as_str())
        .or_else(|| from.results.extra.get("shard")?["label"].as_str());
    let also: Vec<&str> = inputs
        .iter()
        .enumerate()
        .filter(|(i, x)| *i != w && x.results.extra.contains_key("sut"))
        .map(|(_, x)| x.name.as_str())
        .collect();
    let said = json!({
        "file": from.name,
        "shard": shard,
        "also_watched_ignored": also,
        "network": "left out: counted at the watching agent's clients only; the run's bytes are the summed counters",
    });
    (sut, said)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(file: &str, users: Option<&[&str]>) -> Value {
        match users {
            Some(u) => json!({"file": file, "shard": {"users": u}}),
            None => json!({"file": file, "shard": null}),
        }
    }

    #[test]
    fn shared_users_and_an_unsplit_agent_are_named() {
        let a = agent("a.json", Some(&["u1", "u4"]));
        let b = agent("b.json", Some(&["u2", "u5"]));
        assert_eq!(users_shared(&[a.clone(), b.clone()]), None);
        assert_eq!(users_shared(std::slice::from_ref(&a)), None);
        // c shares u1 and u4 with a (and u5 with b): the first shared user is named.
        let c = agent("c.json", Some(&["u1", "u4", "u5"]));
        let line = users_shared(&[a.clone(), b, c]).expect("u1 is a's and c's");
        assert!(
            line.starts_with("a.json and c.json both logged in as u1 (2 user(s) in common)"),
            "{line}"
        );
        let whole = agent("w.json", None);
        let line = users_shared(&[a, whole]).expect("w.json logged in as everyone");
        assert!(line.starts_with("w.json ran without --shard"), "{line}");
    }
}
