//! Unit file -> StartTransientUnit properties.
//!
//! `start` reads the unit files in the state dir (so a user's edit takes effect) and hands systemd the
//! same settings as D-Bus properties. systemd has no API that loads a unit file as a transient unit,
//! and no crate parses unit files with systemd's quoting rules, so this module does: line
//! continuations, comments, `%%`, C-style quoting in ExecStart=, `*Sec=` to microseconds. Every key
//! it does not know is an error naming the file and line: nothing is dropped silently.

mod dbus;
mod file;
mod words;

pub use dbus::properties;
pub use file::{parse, ExecFlags, UnitFile, Value};
pub use words::{flag_value, parse_timespan, split_words, SyntaxError};
