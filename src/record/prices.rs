//! Prices the user sets per model, and what a run's tokens cost at them.
//!
//! bir invents no price: no host tells it a cost through what it reads (the
//! transcripts and hooks carry tokens, not money; Claude Code's
//! `total_cost_usd` is only on its own stdout), and a built-in table would
//! be wrong the day a price changes. A cost is shown only where the user
//! wrote the model's prices in `$BIR_HOME/prices.json` (or the file
//! `BIR_PRICES` names): US dollars per million tokens,
//!
//! ```json
//! {"claude-sonnet-4-5": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75},
//!  "gpt-5*": {"input": 1.25, "output": 10, "cacheRead": 0.125}}
//! ```
//!
//! A key matches the model named exactly, or, ending in `*`, every model
//! it starts (the longest such key wins). `cacheRead` and `cacheWrite`
//! default to `input`. A turn or run with tokens of a model without a
//! price has no cost (never a partial one).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::model::{TokenUsage, TurnUsage};

/// The variable that names another prices file.
pub(crate) const PRICES_ENV: &str = "BIR_PRICES";
/// The prices file's name in `$BIR_HOME`.
pub(crate) const PRICES_FILE: &str = "prices.json";
/// The largest prices file read (it is a handful of lines).
const MAX_BYTES: u64 = 1024 * 1024;

/// One model's prices, US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ModelPrice {
    pub input: f64,
    pub output: f64,
    #[serde(default)]
    pub cache_read: Option<f64>,
    #[serde(default)]
    pub cache_write: Option<f64>,
}

impl ModelPrice {
    /// What `u` costs, in US dollars.
    pub(crate) fn cost(&self, u: &TokenUsage) -> f64 {
        let per = |n: u64, price: f64| n as f64 * price / 1_000_000.0;
        per(u.uncached_input(), self.input)
            + per(u.cache_read, self.cache_read.unwrap_or(self.input))
            + per(u.cache_write, self.cache_write.unwrap_or(self.input))
            + per(u.output, self.output)
    }
}

/// The user's prices (empty: no file).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Prices {
    by_model: BTreeMap<String, ModelPrice>,
}

impl Prices {
    /// Reads prices from `text` (the file's JSON). Every price must be a
    /// finite number, not negative.
    pub(crate) fn parse(text: &str) -> Result<Prices, String> {
        let by_model: BTreeMap<String, ModelPrice> =
            serde_json::from_str(text).map_err(|e| e.to_string())?;
        for (model, p) in &by_model {
            let all = [Some(p.input), Some(p.output), p.cache_read, p.cache_write];
            if all.iter().flatten().any(|x| !x.is_finite() || *x < 0.0) {
                return Err(format!("{model:?}: a price is negative or not a number"));
            }
        }
        Ok(Prices { by_model })
    }

    /// The file prices are read from: `BIR_PRICES`, else
    /// `$BIR_HOME/prices.json`.
    pub(crate) fn path() -> Option<PathBuf> {
        match std::env::var_os(PRICES_ENV) {
            Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
            _ => crate::home::bir_home().map(|h| h.join(PRICES_FILE)),
        }
    }

    /// The user's prices: none when there is no file; an error (to show,
    /// the caller goes on without prices) when it cannot be read or is not
    /// a prices file.
    pub(crate) fn load() -> Result<Prices, String> {
        use std::io::Read;
        let Some(path) = Prices::path() else {
            return Ok(Prices::default());
        };
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Prices::default()),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let mut text = String::new();
        file.take(MAX_BYTES)
            .read_to_string(&mut text)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Prices::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The price of `model`: its own key, else the longest `prefix*` key
    /// it starts with.
    pub(crate) fn of(&self, model: &str) -> Option<&ModelPrice> {
        if let Some(p) = self.by_model.get(model) {
            return Some(p);
        }
        self.by_model
            .iter()
            .filter_map(|(k, p)| Some((k.strip_suffix('*')?, p)))
            .filter(|(prefix, _)| model.starts_with(prefix))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, p)| p)
    }

    /// What `rows` cost, in US dollars: `None` when there is no row, or a
    /// row with tokens names no model or one without a price.
    pub(crate) fn cost<'a>(&self, rows: impl IntoIterator<Item = &'a TurnUsage>) -> Option<f64> {
        let mut sum = 0.0;
        let mut any = false;
        for row in rows {
            if row.usage.is_empty() {
                continue;
            }
            let price = self.of(row.model.as_deref()?)?;
            sum += price.cost(&row.usage);
            any = true;
        }
        any.then_some(sum)
    }
}

/// The user's prices, read once per process ([`Prices::load`]); a file
/// that cannot be read is said once (on stderr) and taken as none.
pub(crate) fn user_prices() -> &'static Prices {
    static PRICES: std::sync::OnceLock<Prices> = std::sync::OnceLock::new();
    PRICES.get_or_init(|| {
        Prices::load().unwrap_or_else(|e| {
            crate::output::note(&format!("prices ignored: {e}"));
            Prices::default()
        })
    })
}

/// A cost as shown: dollars with four decimals (a turn often costs less
/// than a cent).
pub(crate) fn format_usd(usd: f64) -> String {
    format!("${usd:.4}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(turn: u32, model: Option<&str>, input: u64, output: u64, read: u64) -> TurnUsage {
        let json = serde_json::json!({"turn": turn, "model": model,
            "usage": {"input": input, "output": output, "cacheRead": read, "cacheWrite": 0}});
        serde_json::from_value(json).expect("row")
    }

    #[test]
    fn costs_come_only_from_prices_the_user_set() {
        let prices = Prices::parse(
            r#"{"claude-opus": {"input": 10, "output": 50, "cacheRead": 1},
                "gpt-5*": {"input": 2, "output": 8},
                "gpt-5-mini*": {"input": 0.5, "output": 1}}"#,
        )
        .expect("prices");
        // 1M input of which 400k cached: 600k × $10 + 400k × $1; 100k out × $50.
        let opus = row(1, Some("claude-opus"), 1_000_000, 100_000, 400_000);
        let cost = prices.cost([&opus]).expect("priced");
        assert!((cost - (6.0 + 0.4 + 5.0)).abs() < 1e-9, "{cost}");
        // The longest prefix wins; cache reads default to the input price.
        let mini = row(1, Some("gpt-5-mini-2026"), 2_000_000, 0, 1_000_000);
        assert!((prices.cost([&mini]).expect("priced") - 1.0).abs() < 1e-9);
        let big = row(1, Some("gpt-5-codex"), 1_000_000, 0, 0);
        assert!((prices.cost([&big]).expect("priced") - 2.0).abs() < 1e-9);
        // A model without a price, or no model: no cost at all, not a part.
        let other = row(1, Some("gemini-2.5-pro"), 10, 1, 0);
        assert_eq!(prices.cost([&opus, &other]), None);
        assert_eq!(prices.cost([&row(1, None, 10, 1, 0)]), None);
        assert_eq!(prices.cost([]), None);
        assert_eq!(Prices::default().cost([&opus]), None);
        // Not a prices file.
        assert!(Prices::parse(r#"{"m": {"input": -1, "output": 1}}"#).is_err());
        assert!(Prices::parse(r#"{"m": {"input": 1, "outptu": 1}}"#).is_err());
        assert!(Prices::parse("[]").is_err());
        assert_eq!(format_usd(0.012345), "$0.0123");
    }
}
