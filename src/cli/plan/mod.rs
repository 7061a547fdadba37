//! Flags → validated plans, one planner per flag group: `load` (the shape), `message`,
//! `dkim`, `client` (TLS, the SMTP client, mailbox timeouts), `send` (the load groups put
//! together), `output`, `scale` (split runs), `dns` (zones and faults), `lab` (lab MTAs
//! and stores), `fill` (filling a store) and `store` (where a mailbox workload runs and
//! as whom). Planners take typed defaults and name their own flags, so commands compose
//! them without building flag structs or rewording errors; nothing here runs anything.

pub mod client;
pub mod dkim;
pub mod dns;
pub mod fill;
pub mod lab;
pub mod load;
pub mod message;
pub mod output;
pub mod scale;
pub mod send;
pub mod store;

/// Adds the configuration record's parts (JSON objects) to `config`.
pub fn merge(config: &mut serde_json::Value, parts: impl IntoIterator<Item = serde_json::Value>) {
    for part in parts {
        if let (Some(all), serde_json::Value::Object(m)) = (config.as_object_mut(), part) {
            all.extend(m);
        }
    }
}
