//! The configuration record every results file carries (`config`): each planner returns
//! its part, and the command puts them together here.

/// Adds the configuration record's parts (JSON objects) to `config`.
pub fn merge(config: &mut serde_json::Value, parts: impl IntoIterator<Item = serde_json::Value>) {
    for part in parts {
        if let (Some(all), serde_json::Value::Object(m)) = (config.as_object_mut(), part) {
            all.extend(m);
        }
    }
}
