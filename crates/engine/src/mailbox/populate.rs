//! Filling mailboxes before a workload reads them: the generator delivers over LMTP, one
//! recipient per message, round-robin over the users (and their folders, as
//! `user+folder@domain`, which the store files into that folder), so every mailbox gets
//! the same number of messages. Every message carries the trace header and its own
//! Message-ID, as all generated mail does.

use std::sync::Arc;

use crate::lab::StoreUser;
use crate::message::users::User;
use crate::send::SendPlan;
use crate::send::plan::Addresses;
use crate::transport::target::Target;

/// The recipients that give each user's INBOX and `folders - 1` more folders the same
/// share: `u@d`, then `u+f2@d` … `u+fN@d` for every user.
pub fn recipients(users: &[StoreUser], folders: u32) -> Vec<User> {
    (1..=folders.max(1))
        .flat_map(|f| {
            users.iter().map(move |u| User {
                address: match (f, u.address.split_once('@')) {
                    (1, _) | (_, None) => u.address.clone(),
                    (f, Some((local, domain))) => format!("{local}+f{f}@{domain}"),
                },
                password: None,
                flags: String::new(),
            })
        })
        .collect()
}

/// Points a population plan at a store: its LMTP address, its users, `per_user`
/// messages each.
pub fn aim(plan: &mut SendPlan, lmtp: Target, users: &[StoreUser], per_user: u64, folders: u32) {
    let to = recipients(users, folders);
    plan.load.count = per_user.saturating_mul(users.len() as u64).max(1);
    plan.client.targets = vec![lmtp];
    plan.client.lmtp = true;
    plan.message.to = Addresses::List(Arc::new(to));
    plan.message.rcpts = 1;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_are_detail_addresses_after_the_inboxes() {
        let users = vec![
            StoreUser {
                address: "u1@x.test".into(),
                password: "p".into(),
            },
            StoreUser {
                address: "u2@x.test".into(),
                password: "p".into(),
            },
        ];
        let r: Vec<String> = recipients(&users, 2)
            .into_iter()
            .map(|u| u.address)
            .collect();
        assert_eq!(
            r,
            ["u1@x.test", "u2@x.test", "u1+f2@x.test", "u2+f2@x.test"]
        );
        assert_eq!(recipients(&users, 0).len(), 2, "at least the INBOX");
    }
}
