//! A run as one self-contained HTML page (engine layer; `bir report` in
//! `crate::cmd::report` decides where it is written, follows and opens it).
//!
//! [`document`] turns a run into the page's data (calls paired and
//! numbered 1, 2, 3 by `record::calls`, times on one axis, plain-words
//! explanations); [`page`] embeds it, escaped, in a fixed shell
//! (`page.html`, `page.css`, `page.js`) that renders it with DOM calls.
//! Both are pure: no I/O, no clock.

pub(crate) mod document;
pub(crate) mod page;
