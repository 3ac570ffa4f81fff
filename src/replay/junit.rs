//! The JUnit XML report of a replay or verification (`--junit FILE`): one
//! `<testcase>` per step, for CI systems that read JUnit.
//!
//! Every text taken from the run (server, step and tool names, reasons,
//! differences) is escaped for XML attributes and text, and control
//! characters other than newline and tab are dropped (XML 1.0 cannot carry
//! most of them), so a recorded value never breaks the document.

use super::runner::{self, Report};

/// `s` escaped for an XML attribute or text node.
fn xml(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
        .collect::<String>()
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One `<testcase>` per step: divergences are failures, held and blocked
/// steps are skipped, a server that did not start is an error.
pub(crate) fn junit_xml(report: &Report) -> String {
    let failures = report
        .steps
        .iter()
        .filter(|s| s.status.is_divergence())
        .count();
    let skipped = report
        .steps
        .iter()
        .filter(|s| s.status.is_not_run())
        .count();
    let mut x = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"{}\" skipped=\"{skipped}\">\n",
        xml(if report.scenario.is_empty() {
            "bir replay"
        } else {
            &report.scenario
        }),
        report.steps.len(),
        report.environment.len()
    );
    if !report.env_read.is_empty() {
        x.push_str(&format!(
            "  <properties><property name=\"bir.envRead\" value=\"{}\"/></properties>\n",
            xml(&report.env_read.join(","))
        ));
    }
    for e in &report.environment {
        x.push_str(&format!(
            "  <testcase name=\"server\"><error message=\"{}\"/></testcase>\n",
            xml(e)
        ));
    }
    for st in &report.steps {
        let secs = st.duration_ms.unwrap_or(0.0) / 1000.0;
        x.push_str(&format!(
            "  <testcase classname=\"{}\" name=\"{} {}\" time=\"{secs:.3}\">",
            xml(&st.server),
            xml(&st.id),
            xml(&st.tool)
        ));
        let detail: Vec<String> = st
            .reasons
            .iter()
            .cloned()
            .chain(st.differences.iter().map(|d| {
                format!(
                    "{}: expected {} got {}",
                    d.path,
                    runner::brief(&d.expected),
                    runner::brief(&d.actual)
                )
            }))
            .collect();
        if st.status.is_divergence() {
            x.push_str(&format!(
                "<failure message=\"{}\">{}</failure>",
                st.status.name(),
                xml(&detail.join("\n"))
            ));
        } else if st.status.is_not_run() {
            x.push_str(&format!(
                "<skipped message=\"{}\"/>",
                xml(&format!("{}: {}", st.status.name(), detail.join("; ")))
            ));
        }
        x.push_str("</testcase>\n");
    }
    x.push_str("</testsuite>\n");
    x
}
