//! The statistics layer shared by every command: the measured quantities (`metric`: a
//! protocol names its steps), metrics and counters (`recorder`), sharded collection and
//! the time series (`collector`), the results file (`results`) and each command's typed
//! summary in it (`summary`), histograms in JSON (`hist`), wall-clock times (`clock`),
//! times per sequence number that a relay matches (`timelog`), what a sink saw of a run
//! (`seen`), the tool's own CPU and memory (`cpu`), the system under test's (`sut`; the
//! exact CPU of what mailbench started, in a cgroup of its own: `sut_cgroup`; its CPU by
//! process name: `sut_names`) and
//! its machine's: the queue device and the load average (`host`); the rule for a series'
//! short intervals (`series`); the DNS server's summary
//! (`dns`); an MTA's queues and the messages in each (`queues`); one descriptor per kind of run, registered once (`kind`); the results of a
//! run split over agents added back into one (`merge`).

pub mod clock;
pub mod collector;
pub mod cpu;
pub mod dns;
pub mod hist;
pub mod host;
pub mod kind;
pub mod merge;
pub mod metric;
pub mod queues;
pub mod recorder;
pub mod results;
pub mod seen;
pub mod series;
pub mod summary;
pub mod sut;
pub mod sut_cgroup;
pub mod sut_names;
pub mod timelog;

pub use collector::{Collector, IntervalPoint, RelayPoint, Shards, SutPoint};
pub use metric::{Metric, Steps};
pub use recorder::{Counters, Recorder};
pub use results::Results;
