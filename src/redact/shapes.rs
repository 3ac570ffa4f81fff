//! Token shapes: credentials recognisable by their form alone.
//!
//! The table is ours, written from the published formats of each provider
//! (each rule names its source). Every rule has a stable id (it becomes the
//! placeholder, `[REDACTED:<id>]`), literal keywords for the prefilter, and
//! a pattern compiled with `regex::bytes` in ASCII mode (`unicode(false)`):
//! token alphabets are ASCII, and ASCII `\b` is what the patterns mean. An
//! optional capture group 1 narrows the replacement to the secret part
//! (`hooks.slack.com/services/[REDACTED:slack-webhook]`), and an optional
//! check rejects look-alikes the pattern cannot (prose after `Bearer`).
//!
//! Scanning: one Aho-Corasick pass over the text finds which keywords occur;
//! only the rules they name run their regex. Matches of all rules are
//! collected on the same text, overlapping spans are merged (the first rule
//! in the table names the union), and the result is written once.
//!
//! Every pattern starts and ends with ASCII-only atoms, so spans fall on
//! UTF-8 character boundaries; the writer checks anyway and widens a span
//! that does not (fail closed).
//!
//! PEM private keys are found by hand, not by regex: a block is
//! `-----BEGIN <label>-----` … `-----END <label>-----` where the label ends in
//! `PRIVATE KEY` (or `PRIVATE KEY BLOCK` for PGP). Certificates and public
//! keys have other labels and are left alone. A BEGIN without its END (a
//! truncated key) is redacted to the end of the text.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use regex::bytes::{Regex, RegexBuilder};

use super::Report;

/// One row of the table.
struct Shape {
    id: &'static str,
    /// Case-sensitive literals, at least one of which occurs in any match.
    keywords: &'static [&'static str],
    pattern: &'static str,
    /// Extra test on the secret bytes (group 1 if present, else the match).
    check: Option<fn(&[u8]) -> bool>,
}

const fn s(id: &'static str, keywords: &'static [&'static str], pattern: &'static str) -> Shape {
    Shape {
        id,
        keywords,
        pattern,
        check: None,
    }
}

/// The table. Order matters only for naming: when spans of two rules
/// overlap, the earlier rule's id names the merged span.
const SHAPES: &[Shape] = &[
    // AWS access key ids: four-letter prefix + 16 base32 upper-case chars.
    s(
        "aws-access-key-id",
        &["AKIA", "ASIA", "ABIA", "ACCA", "A3T"],
        r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}",
    ),
    // An AWS key pair glued into one string (`AKIA…:secret`, `AKIA…secret`,
    // a table row): the 40 characters right after a key id are its secret
    // access key, which has no prefix of its own.
    s(
        "aws-secret-access-key",
        &["AKIA", "ASIA", "ABIA", "ACCA", "A3T"],
        r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}[ \t:,;|=]{0,3}([A-Za-z0-9/+]{40})(?:$|[^A-Za-z0-9/+=])",
    ),
    // GitHub: classic PAT, OAuth, user-to-server / server-to-server, refresh.
    s("github-pat", &["ghp_"], r"ghp_[A-Za-z0-9]{36,255}"),
    s("github-oauth", &["gho_"], r"gho_[A-Za-z0-9]{36,255}"),
    s(
        "github-app-token",
        &["ghu_", "ghs_"],
        r"gh[us]_[A-Za-z0-9]{36,255}",
    ),
    s(
        "github-refresh-token",
        &["ghr_"],
        r"ghr_[A-Za-z0-9]{36,255}",
    ),
    s(
        "github-fine-grained-pat",
        &["github_pat_"],
        r"github_pat_[A-Za-z0-9_]{40,255}",
    ),
    // GitLab: every documented `gl…-` prefix, optional routing suffix; the
    // runner registration token; the session cookie.
    s(
        "gitlab-token",
        &[
            "glpat-",
            "gldt-",
            "glrt-",
            "glptt-",
            "glcbt-",
            "glft-",
            "glffct-",
            "glimt-",
            "glagent-",
            "gloas-",
            "glsoat-",
            "GR1348941",
        ],
        r"(?:(?:glpat|gldt|glrt|glptt|glcbt|glft|glffct|glimt|glagent|gloas|glsoat)-|GR1348941)[A-Za-z0-9_-]{20,}(?:\.[A-Za-z0-9]{2,}){0,2}",
    ),
    s(
        "gitlab-session",
        &["_gitlab_session="],
        r"_gitlab_session=([A-Za-z0-9]{20,})",
    ),
    // Slack: bot, user, other legacy/config tokens, app-level tokens.
    s(
        "slack-bot-token",
        &["xoxb-"],
        r"xoxb-[0-9]{6,}-[0-9A-Za-z-]{8,}",
    ),
    s(
        "slack-user-token",
        &["xoxp-"],
        r"xoxp-[0-9]{6,}-[0-9A-Za-z-]{8,}",
    ),
    s(
        "slack-token",
        &["xoxa-", "xoxo-", "xoxr-", "xoxs-", "xoxe-", "xoxe."],
        r"xox(?:[aorse]-|e\.xox[bp]-)[0-9]+-[0-9A-Za-z-]{8,}",
    ),
    s(
        "slack-app-token",
        &["xapp-"],
        r"xapp-[0-9]+-[A-Za-z0-9]+-[0-9]+-[A-Za-z0-9]{16,}",
    ),
    // Webhook URLs whose path is the credential.
    s(
        "slack-webhook",
        &["hooks.slack.com"],
        r"hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9_/+-]{16,})",
    ),
    s(
        "teams-webhook",
        &["webhook.office.com"],
        r"\.webhook\.office\.com/webhookb2/([A-Za-z0-9@/._-]{16,})",
    ),
    s(
        "discord-webhook",
        &["discord.com/api/webhooks", "discordapp.com/api/webhooks"],
        r"discord(?:app)?\.com/api/webhooks/[0-9]{5,25}/([A-Za-z0-9_-]{20,})",
    ),
    // Telegram bot tokens: `<bot id>:<35 chars>`, in `/bot<token>/` paths or
    // bare (the secret half starts with `AA`).
    s(
        "telegram-bot-token",
        &["/bot"],
        r"/bot([0-9]{5,16}:[A-Za-z0-9_-]{30,})",
    ),
    s(
        "telegram-bot-token",
        &[":AA"],
        r"\b[0-9]{5,16}:AA[A-Za-z0-9_-]{30,}",
    ),
    // Stripe secret and restricted keys (publishable `pk_` keys are public),
    // webhook signing secrets.
    s(
        "stripe-key",
        &[
            "sk_live_", "sk_test_", "sk_prod_", "rk_live_", "rk_test_", "rk_prod_",
        ],
        r"[rs]k_(?:live|test|prod)_[A-Za-z0-9]{10,247}",
    ),
    s(
        "stripe-webhook-secret",
        &["whsec_"],
        r"whsec_[A-Za-z0-9+/=]{24,}",
    ),
    // Anthropic: API keys, admin keys, Claude OAuth access/refresh tokens,
    // then any other `sk-ant-<kind><nn>-`.
    s(
        "anthropic-api-key",
        &["sk-ant-api"],
        r"sk-ant-api[0-9]{2}-[A-Za-z0-9_-]{40,}",
    ),
    s(
        "anthropic-admin-key",
        &["sk-ant-admin"],
        r"sk-ant-admin[0-9]{2}-[A-Za-z0-9_-]{40,}",
    ),
    s(
        "claude-oauth-token",
        &["sk-ant-oat", "sk-ant-ort"],
        r"sk-ant-o[ar]t[0-9]{2}-[A-Za-z0-9_-]{40,}",
    ),
    s(
        "anthropic-key",
        &["sk-ant-"],
        r"sk-ant-[a-z]{2,8}[0-9]{2}-[A-Za-z0-9_-]{20,}",
    ),
    // OpenAI: keys carry `T3BlbkFJ` (base64 of "OpenAI"); project, service
    // account and admin keys are also recognised by prefix alone.
    s(
        "openai-api-key",
        &["T3BlbkFJ"],
        r"\bsk-[A-Za-z0-9_-]{10,250}T3BlbkFJ[A-Za-z0-9_-]{10,250}",
    ),
    s(
        "openai-api-key",
        &["sk-proj-", "sk-svcacct-", "sk-admin-"],
        r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}",
    ),
    s(
        "openrouter-api-key",
        &["sk-or-v1-"],
        r"sk-or-v1-[a-f0-9]{64}",
    ),
    // Other `sk-` + long alphanumeric keys (many OpenAI-compatible vendors).
    s(
        "sk-api-key",
        &["sk-"],
        r"(?:^|[^A-Za-z0-9])(sk-[A-Za-z0-9]{32,})",
    ),
    // Google.
    s("google-api-key", &["AIza"], r"AIza[A-Za-z0-9_-]{35}"),
    s(
        "google-client-secret",
        &["GOCSPX-"],
        r"GOCSPX-[A-Za-z0-9_-]{20,40}",
    ),
    s(
        "google-oauth-token",
        &["ya29."],
        r"ya29\.[A-Za-z0-9_-]{20,}",
    ),
    s(
        "google-refresh-token",
        &["1//0"],
        r"\b1//0[A-Za-z0-9_-]{30,}",
    ),
    // JWTs (and id_tokens): header and payload are base64url JSON objects.
    s(
        "jwt",
        &["eyJ"],
        r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.?[A-Za-z0-9_-]*",
    ),
    // Package registries and ML hubs.
    s("npm-token", &["npm_"], r"npm_[A-Za-z0-9]{36}"),
    s(
        "pypi-token",
        &["pypi-AgEIcHlwaS5vcmc", "pypi-AgENdGVzdC5weXBpLm9yZw"],
        r"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{40,}",
    ),
    s(
        "huggingface-token",
        &["hf_"],
        r"(?:^|[^A-Za-z0-9])(hf_[A-Za-z0-9]{30,40})",
    ),
    s(
        "huggingface-token",
        &["api_org_"],
        r"(?:^|[^A-Za-z0-9])(api_org_[A-Za-z0-9]{30,40})",
    ),
    // Messaging and email.
    s(
        "sendgrid-api-key",
        &["SG."],
        r"\bSG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,50}",
    ),
    s("twilio-api-key", &["SK"], r"\bSK[0-9a-fA-F]{32}\b"),
    // Cloud consoles.
    s(
        "digitalocean-token",
        &["dop_v1_", "doo_v1_", "dor_v1_"],
        r"do[opr]_v1_[a-f0-9]{64}",
    ),
    s("heroku-api-key", &["HRKU-"], r"HRKU-[A-Za-z0-9_-]{20,}"),
    s(
        "shopify-token",
        &["shpat_", "shpca_", "shppa_", "shpss_"],
        r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",
    ),
    s(
        "databricks-token",
        &["dapi"],
        r"(?:^|[^A-Za-z0-9])(dapi[a-f0-9]{32}(?:-[0-9]+)?)",
    ),
    s(
        "azure-ad-client-secret",
        &["Q~"],
        r"\b[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}",
    ),
    s(
        "square-token",
        &["sq0atp-", "sq0csp-"],
        r"sq0(?:atp|csp)-[A-Za-z0-9_-]{22,60}",
    ),
    // HashiCorp.
    s(
        "vault-token",
        &["hvs.", "hvb."],
        r"(?:^|[^A-Za-z0-9])(hv[sb]\.[A-Za-z0-9_-]{24,})",
    ),
    s(
        "terraform-cloud-token",
        &[".atlasv1."],
        r"\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}",
    ),
    // Developer SaaS.
    s("linear-api-key", &["lin_api_"], r"lin_api_[A-Za-z0-9]{40}"),
    s(
        "linear-oauth-token",
        &["lin_oauth_"],
        r"lin_oauth_[A-Za-z0-9]{32,}",
    ),
    s("notion-token", &["ntn_"], r"ntn_[0-9]{11}[A-Za-z0-9]{35}"),
    s(
        "notion-token",
        &["secret_"],
        r"(?:^|[^A-Za-z0-9])(secret_[A-Za-z0-9]{43})",
    ),
    s(
        "sentry-token",
        &["sntrys_", "sntryu_"],
        r"sntry[su]_[A-Za-z0-9_=+/-]{40,}",
    ),
    s(
        "grafana-token",
        &["glsa_"],
        r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}",
    ),
    s(
        "grafana-token",
        &["glc_"],
        r"(?:^|[^A-Za-z0-9])(glc_[A-Za-z0-9+/]{32,}={0,2})",
    ),
    s(
        "doppler-token",
        &[
            "dp.pt.",
            "dp.st.",
            "dp.sa.",
            "dp.ct.",
            "dp.scim.",
            "dp.audit.",
        ],
        r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}",
    ),
    s(
        "pulumi-token",
        &["pul-"],
        r"(?:^|[^A-Za-z0-9])(pul-[a-f0-9]{40})",
    ),
    s(
        "postman-api-key",
        &["PMAK-"],
        r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}",
    ),
    s("perplexity-api-key", &["pplx-"], r"pplx-[A-Za-z0-9]{48}"),
    s(
        "groq-api-key",
        &["gsk_"],
        r"(?:^|[^A-Za-z0-9])(gsk_[A-Za-z0-9]{48,56})",
    ),
    s(
        "onepassword-token",
        &["ops_eyJ"],
        r"ops_eyJ[A-Za-z0-9+/=_-]{100,}",
    ),
    // age file-encryption identities (bech32).
    s(
        "age-secret-key",
        &["AGE-SECRET-KEY-1"],
        r"AGE-SECRET-KEY-1[0-9A-Z]{58}",
    ),
    // Mailchimp (the key ends in its data centre), New Relic user keys,
    // Bitbucket app passwords: shapes distinctive by themselves.
    s(
        "mailchimp-api-key",
        &["-us"],
        r"\b([0-9a-f]{32}-us[0-9]{1,2})\b",
    ),
    s("newrelic-api-key", &["NRAK-"], r"NRAK-[A-Z0-9]{27}"),
    s(
        "bitbucket-app-password",
        &["ATBB"],
        r"ATBB[A-Za-z0-9_=.-]{28,}",
    ),
    // Links that open a hosted agent's session, or a shared conversation,
    // to whoever holds them: the id in the path is the credential (the
    // host stays readable).
    s(
        "agent-session-url",
        &["claude.ai/code", "claude.ai/share"],
        r"claude\.ai/(?:code|share)/([A-Za-z0-9_-]{8,})",
    ),
    s(
        "agent-session-url",
        &["chatgpt.com/", "chat.openai.com/share"],
        r"(?:chatgpt\.com|chat\.openai\.com)/(?:share|s|codex/tasks)/([A-Za-z0-9_-]{16,})",
    ),
    s(
        "agent-session-url",
        &["devin.ai/sessions/"],
        r"devin\.ai/sessions/([A-Za-z0-9_-]{16,})",
    ),
    s(
        "agent-session-url",
        &["jules.google.com/session/"],
        r"jules\.google\.com/session/([A-Za-z0-9_-]{8,})",
    ),
    s(
        "agent-session-url",
        &["cursor.com/agents"],
        r"cursor\.com/agents(?:/|\?id=|\?selectedBcId=)([A-Za-z0-9_-]{12,})",
    ),
    // Passwords in command lines whose flags the name layer cannot read:
    // `mysql -pSECRET` (glued to `-p`), `curl -u user:SECRET`.
    s(
        "mysql-password",
        &["mysql", "mariadb"],
        r"\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b[^\n]*?[ \t]-p([^\s'\x22]{3,})",
    ),
    // Short password flags that mean a password only after their command
    // (`-p` is a port for `docker run` and `psql`, `-a` a flag for most
    // tools): `sshpass -p PW`, `docker login -u u -p PW`, `redis-cli -a PW`,
    // `mongosh -u u -p PW` (and the other mongo tools). The value is one
    // word or one quoted string; a next flag (`-p --quiet`: prompt for it)
    // is not a value.
    s(
        "cli-password",
        &["sshpass"],
        r"\bsshpass(?:[ \t]+-[A-Za-oq-z]\S*)*[ \t]+-p[ \t]*('[^'\n]+'|\x22[^\x22\n]+\x22|[^\s'\x22-][^\s'\x22]*)",
    ),
    s(
        "cli-password",
        &["docker", "podman"],
        r"\b(?:docker|podman)[ \t]+(?:-\S+[ \t]+)*login\b[^\n;&|]*?[ \t](?:-p|--password)(?:[ \t]+|=)('[^'\n]+'|\x22[^\x22\n]+\x22|[^\s'\x22-][^\s'\x22]*)",
    ),
    s(
        "cli-password",
        &["redis-cli", "valkey-cli"],
        r"\b(?:redis|valkey)-cli\b[^\n;&|]*?[ \t](?:-a|--pass)(?:[ \t]+|=)('[^'\n]+'|\x22[^\x22\n]+\x22|[^\s'\x22-][^\s'\x22]*)",
    ),
    s(
        "cli-password",
        &["mongo"],
        r"\bmongo(?:sh|dump|restore|export|import|stat|top|files)?\b[^\n;&|]*?[ \t](?:-p|--password)(?:[ \t]+|=)('[^'\n]+'|\x22[^\x22\n]+\x22|[^\s'\x22-][^\s'\x22]*)",
    ),
    s(
        "curl-user-password",
        &["curl"],
        r"\bcurl\b[^\n]*?[ \t](?:-u|--user)[ \t]*['\x22]?[^:\s'\x22]+:([^\s'\x22]+)",
    ),
    // Credentials after an HTTP auth scheme in free text. `Authorization:`
    // lines are also handled by the assignment layer; these catch the
    // scheme without the header name (`curl -H "…Bearer x"`, log lines).
    Shape {
        id: "bearer",
        keywords: &["Bearer", "bearer", "BEARER"],
        pattern: r"\b(?:Bearer|bearer|BEARER)[ \t]+([A-Za-z0-9._~+/-]{8,}=*)",
        check: Some(looks_like_token),
    },
    Shape {
        id: "basic",
        keywords: &["Basic"],
        pattern: r"\bBasic[ \t]+([A-Za-z0-9+/]{8,}={0,2})",
        check: Some(is_basic_credential),
    },
];

/// A vendor key whose shape alone is generic (32 hex digits, a UUID, 40
/// characters): a secret where the vendor is named just before it on the
/// same line (`Mailgun key: key-…`, `TWILIO_AUTH_TOKEN=…`), or in the key
/// its value sits under (`{"mailgun": {"apiKey"…}}` is the key rule's;
/// `{"MAILGUN_KEY": "key-…"}` is this one's). Elsewhere the same shape is
/// an ordinary hash and is kept.
struct Vendor {
    id: &'static str,
    /// How the text names the vendor, lower case (matched in any case).
    names: &'static [&'static str],
    /// The value; group 1 is the secret.
    value: &'static str,
}

const UUID: &str =
    r"\b([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\b";
const HEX32: &str = r"\b([0-9a-f]{32})\b";

const VENDORS: &[Vendor] = &[
    Vendor {
        id: "mailgun-api-key",
        names: &["mailgun"],
        value: r"\b(key-[0-9a-f]{32})\b",
    },
    Vendor {
        id: "twilio-auth-token",
        names: &["twilio"],
        value: HEX32,
    },
    Vendor {
        id: "datadog-api-key",
        names: &[
            "datadog",
            "dd_api_key",
            "dd_app_key",
            "dd-api-key",
            "dd-application-key",
        ],
        value: r"\b([0-9a-f]{40}|[0-9a-f]{32})\b",
    },
    Vendor {
        id: "algolia-api-key",
        names: &["algolia"],
        value: HEX32,
    },
    Vendor {
        id: "heroku-api-key",
        names: &["heroku"],
        value: UUID,
    },
    Vendor {
        id: "postmark-token",
        names: &["postmark"],
        value: UUID,
    },
    Vendor {
        id: "circleci-token",
        names: &["circleci", "circle_token", "circle-token"],
        value: r"\b([0-9a-f]{40})\b",
    },
    Vendor {
        id: "cloudflare-api-token",
        names: &["cloudflare"],
        value: r"(?:^|[^A-Za-z0-9_-])([A-Za-z0-9_-]{40})(?:$|[^A-Za-z0-9_-])",
    },
    Vendor {
        id: "okta-api-token",
        names: &["okta"],
        value: r"\b(00[A-Za-z0-9_-]{40})(?:$|[^A-Za-z0-9_-])",
    },
    Vendor {
        id: "aws-secret-access-key",
        names: &[
            "aws_secret",
            "aws secret",
            "awssecret",
            "aws-secret",
            "secretaccesskey",
            "secret_access_key",
            "secret access key",
        ],
        value: r"(?:^|[^A-Za-z0-9/+])([A-Za-z0-9/+]{40})(?:$|[^A-Za-z0-9/+=])",
    },
];

/// `t` in lower case, letters and digits only (`AWS_Secret` → `awssecret`).
fn squash(t: &str) -> String {
    t.bytes()
        .filter(u8::is_ascii_alphanumeric)
        .map(|c| char::from(c.to_ascii_lowercase()))
        .collect()
}

/// How far after the vendor's name (on its line) its key may follow.
const VENDOR_WINDOW: usize = 100;

/// The text rule of a vendor: its name, then (on the same line, within
/// [`VENDOR_WINDOW`] bytes) its value.
fn vendor_pattern(v: &Vendor) -> String {
    format!(
        "(?i:{})[^\\n]{{0,{VENDOR_WINDOW}}}?{}",
        v.names.join("|"),
        v.value
    )
}

/// A name in the three casings a text is likely to use (the prefilter is
/// case-sensitive): `mailgun`, `Mailgun`, `MAILGUN`.
fn casings(name: &str) -> [String; 3] {
    let mut title = name.to_owned();
    if let Some(first) = title.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    [name.to_owned(), title, name.to_ascii_uppercase()]
}

/// Marker for the PEM rule (not in the regex table).
const PRIVATE_KEY: &str = "private-key";
/// The PEM rule's number in the prefilter and in spans.
const PEM: usize = usize::MAX;

/// The prefilter bit of a rule: rules 0–126 have their own, PEM has 127.
/// (A table over 127 rules would share bit 126 and still run every rule
/// it should, only more often; a test keeps the table under that.)
fn rule_bit(rule: usize) -> u128 {
    if rule == PEM {
        1 << 127
    } else {
        1 << rule.min(126)
    }
}
const PEM_KEYWORD: &str = "PRIVATE KEY";

/// A rule of the table. Its regex is compiled the first time a keyword
/// asks for it: most sessions meet few token shapes, and a compiled regex
/// costs memory for the life of the proxy.
struct Compiled {
    id: &'static str,
    pattern: std::borrow::Cow<'static, str>,
    regex: std::sync::OnceLock<Option<Regex>>,
    check: Option<fn(&[u8]) -> bool>,
}

impl Compiled {
    fn regex(&self) -> Option<&Regex> {
        self.regex
            .get_or_init(|| {
                let built = RegexBuilder::new(&self.pattern)
                    .unicode(false)
                    .size_limit(1 << 22)
                    .build();
                debug_assert!(built.is_ok(), "shape {} does not compile", self.id);
                built.ok()
            })
            .as_ref()
    }
}

pub(crate) struct Shapes {
    rules: Vec<Compiled>,
    /// A vendor's value alone, for values under a key naming the vendor
    /// (the vendor's text rule is among `rules`).
    vendor_values: Vec<Compiled>,
    /// Each vendor's names, letters and digits only (`awssecret`), as
    /// looked for in a squashed key.
    vendor_keys: Vec<Vec<String>>,
    /// `None` only if the automaton could not be built; then every rule
    /// runs on every text (slower, never weaker).
    prefilter: Option<AhoCorasick>,
    /// Keyword pattern index → the rules it triggers, one bit per rule
    /// ([`PEM`] is bit 127).
    keyword_mask: Vec<u128>,
}

impl Shapes {
    /// Compiles the table. The patterns are ours and covered by tests, so
    /// a rule that fails to compile is skipped (and the test suite fails)
    /// rather than failing the caller.
    pub(crate) fn new() -> Shapes {
        let mut rules = Vec::with_capacity(SHAPES.len() + VENDORS.len());
        let mut keywords: Vec<String> = Vec::new();
        let mut keyword_rule: Vec<usize> = Vec::new();
        for shape in SHAPES {
            let idx = rules.len();
            rules.push(Compiled {
                id: shape.id,
                pattern: shape.pattern.into(),
                regex: std::sync::OnceLock::new(),
                check: shape.check,
            });
            for kw in shape.keywords {
                keywords.push((*kw).to_owned());
                keyword_rule.push(idx);
            }
        }
        let mut vendor_values = Vec::with_capacity(VENDORS.len());
        for vendor in VENDORS {
            let idx = rules.len();
            rules.push(Compiled {
                id: vendor.id,
                pattern: vendor_pattern(vendor).into(),
                regex: std::sync::OnceLock::new(),
                check: None,
            });
            vendor_values.push(Compiled {
                id: vendor.id,
                pattern: vendor.value.into(),
                regex: std::sync::OnceLock::new(),
                check: None,
            });
            for name in vendor.names {
                for kw in casings(name) {
                    keywords.push(kw);
                    keyword_rule.push(idx);
                }
            }
        }
        keywords.push(PEM_KEYWORD.to_owned());
        keyword_rule.push(PEM);
        // A hit on a keyword also stands for every keyword inside it
        // (`sk-ant-` contains `sk-`): the search reports one keyword per
        // position, and the shorter one's rules must still run.
        let keyword_mask = keywords
            .iter()
            .map(|kw| {
                keywords
                    .iter()
                    .zip(&keyword_rule)
                    .filter(|(other, _)| kw.contains(other.as_str()))
                    .fold(0u128, |m, (_, &r)| m | rule_bit(r))
            })
            .collect();
        let prefilter = AhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostFirst)
            .kind(Some(AhoCorasickKind::DFA))
            .build(&keywords)
            .ok();
        let vendor_keys = VENDORS
            .iter()
            .map(|v| v.names.iter().map(|n| squash(n)).collect())
            .collect();
        Shapes {
            rules,
            vendor_values,
            vendor_keys,
            prefilter,
            keyword_mask,
        }
    }

    /// A string value under the object key `key`: when the key names a
    /// vendor of [`VENDORS`] (`MAILGUN_KEY`, `twilioAuthToken`), that
    /// vendor's value shape is a secret anywhere in the string. `None` when
    /// nothing matched.
    pub(crate) fn scan_under_key(&self, key: &str, s: &str, report: &mut Report) -> Option<String> {
        // The key squashed into a stack buffer: this runs for every string
        // value under a key, so it must not allocate.
        let mut buf = [0u8; 64];
        let mut len = 0;
        for c in key.bytes().filter(u8::is_ascii_alphanumeric) {
            let Some(slot) = buf.get_mut(len) else { break };
            *slot = c.to_ascii_lowercase();
            len += 1;
        }
        let key = buf.get(..len).unwrap_or_default();
        let bytes = s.as_bytes();
        let mut spans = Vec::new();
        for (idx, names) in self.vendor_keys.iter().enumerate() {
            let named = names.iter().any(|n| {
                let n = n.as_bytes();
                key.windows(n.len()).any(|w| w == n)
            });
            if !named {
                continue;
            }
            let Some(regex) = self.vendor_values.get(idx).and_then(Compiled::regex) else {
                continue;
            };
            for caps in regex.captures_iter(bytes) {
                if let Some(g) = caps.get(1)
                    && keep_match(g.as_bytes(), None)
                {
                    spans.push((g.start(), g.end(), idx));
                }
            }
        }
        if spans.is_empty() {
            return None;
        }
        Some(splice(
            s,
            spans,
            |i| VENDORS.get(i).map_or("key", |v| v.id),
            report,
        ))
    }

    /// Replaces every shape found in `s`. `None` when nothing matched.
    pub(crate) fn scan(&self, s: &str, report: &mut Report) -> Option<String> {
        let bytes = s.as_bytes();
        // Which rules to run: a bit per rule (the table has fewer than 128).
        let (wanted, pem) = match &self.prefilter {
            Some(ac) => {
                let mut wanted = 0u128;
                let mut any = false;
                // Leftmost-first search restarted one byte after each hit:
                // every keyword occurrence is seen (as with overlapping
                // search) while the automaton's prefilter still skips the
                // stretches without any.
                let mut pos = 0;
                while pos < bytes.len() {
                    let input = aho_corasick::Input::new(bytes).range(pos..);
                    let Some(m) = ac.find(input) else { break };
                    wanted |= self
                        .keyword_mask
                        .get(m.pattern().as_usize())
                        .copied()
                        .unwrap_or(u128::MAX);
                    any = true;
                    pos = m.start() + 1;
                }
                if !any {
                    return None;
                }
                (wanted, wanted & rule_bit(PEM) != 0)
            }
            None => (u128::MAX, true),
        };
        let mut spans: Vec<(usize, usize, usize)> = Vec::new(); // start, end, rule
        if pem {
            pem_spans(bytes, &mut spans);
        }
        for (idx, rule) in self.rules.iter().enumerate() {
            if wanted & rule_bit(idx) == 0 {
                continue;
            }
            let Some(regex) = rule.regex() else { continue };
            // Matches may overlap: a token glued to the next one
            // (`ghp_…ghp_…`) is matched with the next one's prefix, which a
            // search resumed after it would then miss. So the search
            // resumes one byte after each match's start (the spans are
            // merged below). A rule whose pattern runs lazily to a later
            // part of its line (`mysql … -p…`) resumes after its match, so
            // no text is searched more than about twice.
            let overlapping = !rule.pattern.contains("*?");
            let mut at = 0;
            while at <= bytes.len() {
                let (whole, secret) = if regex.captures_len() > 1 {
                    let Some(caps) = regex.captures_at(bytes, at) else {
                        break;
                    };
                    let Some(whole) = caps.get(0) else { break };
                    (whole, caps.get(1))
                } else {
                    let Some(whole) = regex.find_at(bytes, at) else {
                        break;
                    };
                    (whole, Some(whole))
                };
                if let Some(g) = secret
                    && keep_match(g.as_bytes(), rule.check)
                {
                    spans.push((g.start(), g.end(), idx));
                }
                at = if overlapping {
                    whole.start() + 1
                } else {
                    whole.end().max(whole.start() + 1)
                };
            }
        }
        // A match that reaches into an earlier placeholder would take part
        // of it (`-u[REDACTED:private-key]` read as `user:password`).
        if super::url::find(bytes, b"[REDACTED").is_some() {
            let marks = marker_spans(bytes);
            spans.retain(|&(st, en, _)| !marks.iter().any(|&(ms, me)| st < me && ms < en));
        }
        if spans.is_empty() {
            return None;
        }
        let id_of = |rule: usize| {
            if rule == PEM {
                PRIVATE_KEY
            } else {
                self.rules[rule].id
            }
        };
        Some(splice(s, spans, id_of, report))
    }
}

/// The spans of `[REDACTED…]` placeholders in `b`.
fn marker_spans(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(k) = super::url::find(&b[from..], b"[REDACTED") {
        let st = from + k;
        let en = b[st..]
            .iter()
            .position(|&c| c == b']')
            .map_or(b.len(), |e| st + e + 1);
        out.push((st, en));
        from = en;
    }
    out
}

/// Whether a match is a secret: it passes the rule's check and is not an
/// earlier placeholder (a rule whose class admits `[` would otherwise take
/// `[REDACTED:…]` again).
fn keep_match(secret: &[u8], check: Option<fn(&[u8]) -> bool>) -> bool {
    !secret.starts_with(b"[REDACTED")
        && !is_placeholder_token(secret)
        && check.is_none_or(|c| c(secret))
}

/// A token-shaped placeholder from documentation, not a secret:
/// `ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx`, `sk-ant-api03-XXXX…`,
/// `AKIA****************`, `sk-your-api-key-goes-here…`. A run of eight
/// equal characters, or the word `your`, does not occur in a random token
/// (a 36-character base62 token holds such a run with odds of about 1 in
/// 10^12).
fn is_placeholder_token(secret: &[u8]) -> bool {
    let mut run = 0usize;
    let mut prev = 0u8;
    for &c in secret {
        run = if c == prev { run + 1 } else { 1 };
        prev = c;
        if run >= 8 {
            return true;
        }
    }
    // `your_…`, `your-…`, `yourApiKey…`, `YOUR_TOKEN…`.
    secret.windows(7).any(|w| {
        w[..4].eq_ignore_ascii_case(b"your")
            && (matches!(w[4], b'_' | b'-' | b'.')
                || [&b"key"[..], b"api", b"tok", b"sec", b"acc", b"pas", b"app"]
                    .iter()
                    .any(|word| w[4..].eq_ignore_ascii_case(word)))
    })
}

/// Writes `s` with each span replaced by `[REDACTED:<id>]`. Overlapping or
/// touching-inside spans are merged; the earliest-starting (then
/// lowest-ranked) span names the union.
pub(crate) fn splice(
    s: &str,
    mut spans: Vec<(usize, usize, usize)>,
    id_of: impl Fn(usize) -> &'static str,
    report: &mut Report,
) -> String {
    // PEM spans use usize::MAX as their rule; rank them first so a key
    // block is named as such even when a JWT-looking line sits inside.
    spans.sort_by_key(|&(st, en, r)| (st, std::cmp::Reverse(en), r.wrapping_add(1)));
    let mut out = String::with_capacity(s.len());
    let mut copied = 0usize;
    let mut cur: Option<(usize, usize, usize)> = None;
    let mut flush = |span: (usize, usize, usize), out: &mut String, copied: &mut usize| {
        let (mut st, mut en, r) = span;
        while st > 0 && !s.is_char_boundary(st) {
            st -= 1;
        }
        while en < s.len() && !s.is_char_boundary(en) {
            en += 1;
        }
        let st = st.max(*copied);
        out.push_str(&s[*copied..st]);
        let id = id_of(r);
        out.push_str("[REDACTED:");
        out.push_str(id);
        out.push(']');
        report.add(id);
        *copied = en.max(st);
    };
    for span in spans {
        match cur {
            Some((cs, ce, cr)) if span.0 < ce => cur = Some((cs, ce.max(span.1), cr)),
            Some(c) => {
                flush(c, &mut out, &mut copied);
                cur = Some(span);
            }
            None => cur = Some(span),
        }
    }
    if let Some(c) = cur {
        flush(c, &mut out, &mut copied);
    }
    out.push_str(&s[copied.min(s.len())..]);
    out
}

/// Finds PEM private-key blocks (by hand, see the module docs).
fn pem_spans(b: &[u8], spans: &mut Vec<(usize, usize, usize)>) {
    const BEGIN: &[u8] = b"-----BEGIN ";
    let mut from = 0;
    while let Some(k) = super::url::find(&b[from..], BEGIN) {
        let start = from + k;
        let label_start = start + BEGIN.len();
        // Labels are short upper-case words.
        let Some(label_len) = b[label_start..].iter().take(64).position(|&c| c == b'-') else {
            from = label_start;
            continue;
        };
        let label = &b[label_start..label_start + label_len];
        let header_end = label_start + label_len;
        if !b[header_end..].starts_with(b"-----") || !is_private_label(label) {
            from = label_start;
            continue;
        }
        let body = header_end + 5;
        let end = match super::url::find(&b[body..], b"-----END ") {
            Some(e) => {
                let e = body + e + b"-----END ".len();
                // Through the closing dashes of the END line.
                match b[e..].iter().take(80).position(|&c| c == b'-') {
                    Some(d) => {
                        let mut x = e + d;
                        while x < b.len() && b[x] == b'-' {
                            x += 1;
                        }
                        x
                    }
                    None => b.len(),
                }
            }
            None => b.len(),
        };
        spans.push((start, end, PEM));
        from = end;
    }
}

fn is_private_label(label: &[u8]) -> bool {
    label.ends_with(b"PRIVATE KEY") || label.ends_with(b"PRIVATE KEY BLOCK")
}

/// After `Bearer`: a token has a digit, or is long and mixes cases. Prose
/// ("bearer authentication", "Bearer token-based") does not.
fn looks_like_token(v: &[u8]) -> bool {
    let digit = v.iter().any(u8::is_ascii_digit);
    let upper = v.iter().any(u8::is_ascii_uppercase);
    let lower = v.iter().any(u8::is_ascii_lowercase);
    digit || (v.len() >= 20 && upper && lower)
}

/// After `Basic`: base64 that decodes to `user:password`.
fn is_basic_credential(v: &[u8]) -> bool {
    crate::codec::base64_decode(v)
        .is_some_and(|d| d.contains(&b':') && d.iter().all(|&c| c >= 0x20))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(s: &str) -> String {
        let shapes = Shapes::new();
        let mut r = Report::default();
        shapes.scan(s, &mut r).unwrap_or_else(|| s.to_owned())
    }

    #[test]
    fn every_rule_compiles_in_ascii_bytes_mode() {
        for shape in SHAPES {
            let r = RegexBuilder::new(shape.pattern).unicode(false).build();
            assert!(r.is_ok(), "{}: {:?}", shape.id, r.err());
            for kw in shape.keywords {
                assert!(!kw.is_empty(), "{}", shape.id);
            }
        }
        for vendor in VENDORS {
            let r = RegexBuilder::new(&vendor_pattern(vendor))
                .unicode(false)
                .build();
            assert!(r.is_ok(), "{}: {:?}", vendor.id, r.err());
        }
        assert_eq!(Shapes::new().rules.len(), SHAPES.len() + VENDORS.len());
        assert!(
            SHAPES.len() + VENDORS.len() <= 127,
            "the prefilter keeps one bit per rule"
        );
    }

    #[test]
    fn a_keyword_triggers_the_keywords_inside_it() {
        let shapes = Shapes::new();
        let rule = |id: &str| shapes.rules.iter().position(|r| r.id == id).expect(id);
        let kw = |k: &str| {
            let mut i = 0;
            for shape in SHAPES {
                for w in shape.keywords {
                    if *w == k {
                        return i;
                    }
                    i += 1;
                }
            }
            panic!("{k}")
        };
        let mask = shapes.keyword_mask[kw("sk-ant-api")];
        assert_ne!(mask & rule_bit(rule("sk-api-key")), 0);
        assert_ne!(mask & rule_bit(rule("anthropic-key")), 0);
        assert_ne!(mask & rule_bit(rule("anthropic-api-key")), 0);
        assert_eq!(mask & rule_bit(rule("github-pat")), 0);
        // And a shape still fires among other keywords.
        assert_eq!(
            scan("ops_eyJ SK :AA sk- AIza0123456789abcdefghijABCDEFGHIJ_-xyz."),
            "ops_eyJ SK :AA sk- [REDACTED:google-api-key]."
        );
    }

    #[test]
    fn pem_private_keys_only() {
        let key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----";
        assert_eq!(scan(&format!("a {key} b")), "a [REDACTED:private-key] b");
        let cert = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUFakeFakeFake\n-----END CERTIFICATE-----";
        assert_eq!(scan(cert), cert);
        let public = "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----";
        assert_eq!(scan(public), public);
        let truncated = "x -----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA";
        assert_eq!(scan(truncated), "x [REDACTED:private-key]");
        let enc = "-----BEGIN ENCRYPTED PRIVATE KEY-----\\nMIIFHzBJBgkqhkiG9w0BBQ0w\\n-----END ENCRYPTED PRIVATE KEY-----\\n";
        assert_eq!(scan(enc), "[REDACTED:private-key]\\n");
    }

    #[test]
    fn command_line_passwords() {
        assert_eq!(
            scan("mysql -u root -pS3cretPass123 -h db"),
            "mysql -u root -p[REDACTED:mysql-password] -h db"
        );
        assert_eq!(scan("mysql -u root -p -h db"), "mysql -u root -p -h db");
        assert_eq!(
            scan("curl -s -u 'deploy:hunter2hunter2' https://x.example"),
            "curl -s -u 'deploy:[REDACTED:curl-user-password]' https://x.example"
        );
    }

    #[test]
    fn placeholders_are_not_taken_apart() {
        let once = scan("curl -fsS -u-----BEGIN PRIVATE KEY----- x https://h.example");
        assert_eq!(once, "curl -fsS -u[REDACTED:private-key]");
        assert_eq!(scan(&once), once);
    }

    #[test]
    fn bearer_in_prose_is_kept() {
        assert_eq!(
            scan("use bearer authentication"),
            "use bearer authentication"
        );
        assert_eq!(
            scan("curl -H 'Authorization: Bearer abc123def456ghi'"),
            "curl -H 'Authorization: Bearer [REDACTED:bearer]'"
        );
        assert_eq!(scan("Basic authentication"), "Basic authentication");
        assert_eq!(scan("Basic dXNlcjpodW50ZXIy"), "Basic [REDACTED:basic]");
    }

    #[test]
    fn overlapping_spans_merge() {
        let mut r = Report::default();
        let out = splice("abcdefgh", vec![(1, 4, 0), (3, 6, 1)], |_| "x", &mut r);
        assert_eq!(out, "a[REDACTED:x]gh");
        assert_eq!(r.redactions, 1);
    }

    #[test]
    fn spans_widen_to_char_boundaries() {
        let mut r = Report::default();
        let out = splice("aé b", vec![(2, 3, 0)], |_| "x", &mut r);
        assert_eq!(out, "a[REDACTED:x] b");
    }
}
