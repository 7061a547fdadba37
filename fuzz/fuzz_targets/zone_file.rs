//! Any bytes as a zone file: the reader never panics; a file it loads answers for every
//! record it read (never REFUSED for a name of its own zone), and whatever it refuses is
//! refused in one line naming the file and line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mailbench_wire::dns::zone::{Authority, key};
use mailbench_wire::dns::zonefile::read;

fuzz_target!(|input: &[u8]| {
    let mut a = Authority::default();
    match a.load_zone_file(input, "f") {
        Err(e) => {
            assert!(e.starts_with("--zone-file f"), "the error names the file: {e}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
        Ok(_) => {
            let records = read(input).expect("a loaded file reads");
            for r in records.iter().take(32) {
                let found = a.resolve(&r.record.name, &key(&r.record.name), r.record.record_type());
                assert_ne!(u16::from(found.rcode), 5, "{} is in the zone: not REFUSED", r.record.name);
            }
        }
    }
});
